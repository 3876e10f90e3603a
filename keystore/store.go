// Package keystore defines where the SDK keeps its idempotency records: the
// Idempotency-Key of each business operation, a fingerprint of its parameters,
// its state and its lease. A record is written, and the write has returned,
// before the first byte of the request is sent (SAFETY rule 1).
//
// Implementations: Memory (tests only: a restart forgets every key), and the
// durable stores in the sqlstore and redisstore sub-packages. Every
// implementation passes the conformance suite in keystore/storetest unchanged.
package keystore

import (
	"context"
	"errors"
	"time"
)

// State is where an operation stands.
//
//	pending ──► succeeded | failed | not_executed   (settled: the outcome is known)
//	   │  ▲
//	   ▼  │
//	unknown   (an ambiguous attempt: it may have taken effect; settle by lookup)
//
// pending means "saved, a request may be in flight"; a pending record whose
// lease has expired was left by a crash and is treated like unknown.
type State string

const (
	StatePending     State = "pending"
	StateUnknown     State = "unknown"
	StateSucceeded   State = "succeeded"
	StateFailed      State = "failed"
	StateNotExecuted State = "not_executed" // settled: confirmed nothing happened; the caller may send again
)

// Settled reports whether s is a known outcome.
func (s State) Settled() bool {
	return s == StateSucceeded || s == StateFailed || s == StateNotExecuted
}

// Terminal reports whether a record in state s can be removed by DeleteExpired.
// not_executed is settled but not terminal: the caller may still send it.
func (s State) Terminal() bool { return s == StateSucceeded || s == StateFailed }

// Valid reports whether s is one of the defined states.
func (s State) Valid() bool {
	switch s {
	case StatePending, StateUnknown, StateSucceeded, StateFailed, StateNotExecuted:
		return true
	}
	return false
}

// Record is one business operation. It never holds a token, card data or a
// personal document: Fingerprint is a keyed HMAC (or covers non-sensitive
// fields only) and Result holds identifiers, statuses and amounts.
type Record struct {
	OperationID string // stable business ID, e.g. "pix:order-1234"; the primary key
	Key         string // the Idempotency-Key sent with every attempt
	Kind        string // "pix", "boleto", "credit_card", "subscribe", "plan_change", "refund"
	Fingerprint string // keyed fingerprint of the parameters (rule 10)
	State       State

	// Version is bumped by the store on every successful write of the
	// record's data (Create sets 1, each Update adds one; lease changes by
	// Acquire, Renew and Release leave it alone); Update succeeds only when
	// the caller's Version equals the stored one.
	Version int64

	Attempts    int       // requests sent so far (every attempt, counted by the engine)
	FirstSentAt time.Time // zero until the first send; lookups ignore effects created before it
	LastSentAt  time.Time // the in-processing window is measured from here
	ResultRef   string    // sale / refund / subscription / plan change identifier once known
	Result      []byte    // the JSON the client returns for a settled record (no personal data)
	Error       string    // one-line reason for failed / unknown
	Meta        []byte    // engine-owned extra data (e.g. a refund's snapshot of earlier refunds)

	// Lease (SAFETY rule 9). LeaseToken is a fencing token: it grows by one on
	// every acquisition, never decreases, and is checked by Update and Renew.
	LeaseOwner     string
	LeaseToken     int64
	LeaseExpiresAt time.Time // measured by the store's clock

	CreatedAt time.Time // store clock
	UpdatedAt time.Time // store clock
}

// Errors every Store returns (wrapped or not; test with errors.Is).
var (
	ErrNotFound    = errors.New("keystore: record not found")
	ErrExists      = errors.New("keystore: record already exists")
	ErrLeaseHeld   = errors.New("keystore: lease held by another owner")
	ErrLeaseLost   = errors.New("keystore: lease lost (expired or taken over)")
	ErrConflict    = errors.New("keystore: record changed since it was read (stale version)")
	ErrUnavailable = errors.New("keystore: store unavailable")
)

// Filter selects records for List.
type Filter struct {
	States        []State   // empty: any state
	UpdatedBefore time.Time // zero: any age; otherwise UpdatedAt < UpdatedBefore
	Prefix        string    // OperationID prefix; empty: any
	Limit         int       // <= 0: implementation default (at least 100)
}

// Store keeps idempotency records. All methods are safe for concurrent use by
// many goroutines and, for durable stores, many processes. Every method honours
// ctx. A method that cannot reach its backend returns an error wrapping
// ErrUnavailable; callers then send nothing.
type Store interface {
	// Create inserts rec if no record with rec.OperationID exists, and gives
	// the new record a lease held by owner for ttl (LeaseToken 1). When the write
	// returns nil it is durable (for durable stores: committed to disk / AOF as
	// the store documents). The store sets Version (to 1), CreatedAt, UpdatedAt,
	// LeaseToken and LeaseExpiresAt; it returns the stored record. An empty
	// State is stored as pending; an empty OperationID is an error.
	// If the operation exists, Create returns the existing record (as stored)
	// and an error wrapping ErrExists, changing nothing.
	Create(ctx context.Context, rec Record, owner string, ttl time.Duration) (Record, error)

	// Get returns the record or ErrNotFound.
	Get(ctx context.Context, operationID string) (Record, error)

	// Acquire takes the lease for owner for ttl if nobody holds an unexpired
	// lease (by the store's clock). It increments LeaseToken and returns the
	// record. Another owner's unexpired lease → ErrLeaseHeld (with the current
	// record). An owner that re-acquires its own unexpired lease also gets a new
	// token: the old one is fenced off. ErrNotFound if absent.
	Acquire(ctx context.Context, operationID, owner string, ttl time.Duration) (Record, error)

	// Renew extends the lease to now+ttl if token is still the current
	// LeaseToken and the lease has not expired; otherwise ErrLeaseLost.
	Renew(ctx context.Context, operationID string, token int64, ttl time.Duration) (Record, error)

	// Release gives the lease up if token is current (expiring it now);
	// a stale token is not an error (there is nothing of ours to give up).
	Release(ctx context.Context, operationID string, token int64) error

	// Update writes rec's mutable fields (State, Attempts, FirstSentAt,
	// LastSentAt, ResultRef, Result, Error, Meta, Fingerprint) if rec.Version
	// equals the stored version and rec.LeaseToken is the current, unexpired
	// lease; it bumps Version and UpdatedAt and returns the stored record.
	// Stale version → ErrConflict; lease not held → ErrLeaseLost. A Terminal
	// state (succeeded, failed) never changes: such an Update → ErrConflict.
	// Key, Kind, OperationID and lease fields are never changed by Update.
	Update(ctx context.Context, rec Record) (Record, error)

	// List returns records matching f, oldest UpdatedAt first.
	List(ctx context.Context, f Filter) ([]Record, error)

	// DeleteExpired removes at most limit records whose state is Terminal and
	// whose UpdatedAt is before 'before', and reports how many it removed. It
	// never removes a pending, unknown or not_executed record.
	DeleteExpired(ctx context.Context, before time.Time, limit int) (int, error)
}

// Clock is the time source of stores that keep time themselves (Memory).
type Clock interface{ Now() time.Time }
