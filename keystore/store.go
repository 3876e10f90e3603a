package keystore

import (
	"context"
	"errors"
	"fmt"
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
	// ErrAmnesia: the store may have lost records it had acknowledged (see
	// AmnesiaGuard). Every error wrapping it also wraps ErrUnavailable, so
	// a caller that only knows ErrUnavailable sends nothing.
	ErrAmnesia = errors.New("keystore: the store lost records it had acknowledged")
)

// Filter selects records for List.
type Filter struct {
	States        []State   // empty: any state
	UpdatedBefore time.Time // zero: any age; otherwise UpdatedAt < UpdatedBefore
	Prefix        string    // OperationID prefix; empty: any
	Limit         int       // <= 0: implementation default (at least 100)
}

// AmnesiaError is the error Create returns, wrapped, when the store has
// detected that it lost records it had acknowledged (SAFETY rule 13). It
// matches both ErrAmnesia and ErrUnavailable with errors.Is.
type AmnesiaError struct {
	Part       string    // where the loss was detected: "table pagpolar_operations", "shard 3"
	Reason     string    // what was seen, e.g. "the shard's marker is missing"
	DetectedAt time.Time // by the store's clock; zero if unknown
}

func (e *AmnesiaError) Error() string {
	return fmt.Sprintf("keystore: amnesia in %s: %s. Records this store had acknowledged may be lost, "+
		"and an operation whose record is gone would be sent again as if it had no history, so Create refuses "+
		"every new record there (nothing is sent). Settle the unfinished operations by lookup "+
		"(Client.ResumeAll, pagpolar ops settle), then accept the loss (keystore.AmnesiaGuard.AcceptLoss) "+
		"to let Creates resume", e.Part, e.Reason)
}

// Is makes errors.Is match ErrAmnesia and ErrUnavailable.
func (e *AmnesiaError) Is(target error) bool { return target == ErrAmnesia || target == ErrUnavailable }

// AmnesiaGuard is implemented by stores that can tell "this record never
// existed" from "this store lost what it acknowledged" (SAFETY rule 13):
// a Redis without persistence restarted, a failover to a replica that had
// not received the last writes, a PostgreSQL that crashed with
// synchronous_commit off, a table emptied by mistake, a SQLite file
// replaced. Memory, sqlstore and redisstore implement it.
//
// How a store detects a loss. Each part of the store (a SQL table, a Redis
// shard) keeps a marker written when the part is first initialised (Migrate,
// New), naming the part's epoch; every Store remembers the epoch it found and
// the last record it created in each part (its high-water mark of
// acknowledged writes). Create checks both atomically with the insert: a
// marker that is gone or names another epoch, or a record this Store created
// and was told was durable that is no longer there (and was not removed by
// DeleteExpired or retention), is a loss. The part is then marked lost in the
// store itself, so that every Store, in every process, refuses Create there
// with an *AmnesiaError until AcceptLoss; Get, List, Acquire, Renew, Release,
// Update and DeleteExpired go on working, so that what survived can be
// settled by lookup.
//
// What no store can detect: a store emptied while no Store that had used it
// was running, and then opened again, looks exactly like a new one. A Store
// opened after a loss that running Stores have not noticed yet starts a new
// epoch; the running Stores then notice the change at their next Create and
// mark the part lost for everyone.
type AmnesiaGuard interface {
	// Amnesia reports the parts of the store in which a loss was detected
	// and not yet accepted, and the last loss accepted in each part. It
	// reads the store (every part it can reach), and checks each part
	// against what this Store remembers, recording any loss it finds as
	// Create would. An unreachable store → an error wrapping ErrUnavailable.
	Amnesia(ctx context.Context) (AmnesiaReport, error)

	// AcceptLoss ends the refusal in every part marked lost: the operator
	// has settled what survived (every pending and unknown record, by
	// lookup) and accepts that operations whose records were lost may be
	// sent again as new ones (within the API's 24 h key window a resend
	// after a released key creates a second effect: look those up by hand
	// where the loss could hold any). note says who accepted and why; it is
	// kept with the acceptance and must not be empty. Each part gets a new
	// epoch; every Store adopts it at its next Create. With nothing lost,
	// AcceptLoss does nothing and returns nil.
	AcceptLoss(ctx context.Context, note string) error
}

// AmnesiaReport is what Amnesia found.
type AmnesiaReport struct {
	// Lost lists the parts where Create refuses, oldest detection first.
	// Empty when no loss is pending.
	Lost []LostPart
	// Accepted lists, per part, the last loss an operator accepted.
	Accepted []AcceptedLoss
	// Parts is how many parts the store has; Unreachable names those
	// Amnesia could not read (their state is unknown).
	Parts       int
	Unreachable []string
}

// Detected reports whether some part refuses Create.
func (r AmnesiaReport) Detected() bool { return len(r.Lost) > 0 }

// LostPart is one part of a store in which a loss was detected.
type LostPart struct {
	Part       string
	Reason     string
	DetectedAt time.Time // store clock
}

// AcceptedLoss is the last loss accepted in one part.
type AcceptedLoss struct {
	Part string
	Note string
	At   time.Time // store clock
}

// Store keeps idempotency records. All methods are safe for concurrent use by
// many goroutines and, for durable stores, many processes. Every method honours
// ctx, and durable stores bound every call by a timeout of their own as well
// (documented per store), so a call returns even when ctx has no deadline
// and the backend stops answering. A method that cannot reach its backend
// returns an error wrapping ErrUnavailable; callers then send nothing.
type Store interface {
	// Create inserts rec if no record with rec.OperationID exists, and gives
	// the new record a lease held by owner for ttl (LeaseToken 1). When the write
	// returns nil it is durable (for durable stores: committed to disk / AOF as
	// the store documents). The store sets Version (to 1), CreatedAt, UpdatedAt,
	// LeaseToken and LeaseExpiresAt; it returns the stored record. An empty
	// State is stored as pending; an empty OperationID is an error.
	// If the operation exists, Create returns the existing record (as stored)
	// and an error wrapping ErrExists, changing nothing. A store that
	// implements AmnesiaGuard refuses to insert a record in a part where it
	// detected a loss, with an error wrapping an *AmnesiaError (so
	// ErrAmnesia and ErrUnavailable), writing nothing.
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
