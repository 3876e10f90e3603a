package webhook

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// State is where a stored event stands.
//
//	received ──► processing ──► processed
//	   ▲  ▲          │
//	   │  └─ error ◄─┤ (the handler failed; due again at NextAttemptAt)
//	   │             └──► dead (MaxAttempts failures, or a permanent error)
//	   └──── Retry (an operator) ◄── dead, error
//
// A processing event whose lease has expired was left by a crash (or a lost
// lease): it can be claimed again. Processed and dead events are removed once
// they are older than the retention (see Reap).
type State string

const (
	StateReceived   State = "received"
	StateProcessing State = "processing"
	StateProcessed  State = "processed"
	StateError      State = "error"
	StateDead       State = "dead"
)

// States lists every state, in the order of the diagram.
func States() []State {
	return []State{StateReceived, StateProcessing, StateProcessed, StateError, StateDead}
}

// Valid reports whether s is one of the defined states.
func (s State) Valid() bool {
	switch s {
	case StateReceived, StateProcessing, StateProcessed, StateError, StateDead:
		return true
	}
	return false
}

// Record is one stored event: the first delivery under its dedupe key.
// It never holds the webhook token (that is only in the Authorization header).
//
// Every time in a Record is the store's clock (the database's now, Redis
// TIME): see Store.
type Record struct {
	Key        string // dedupe key: the primary key, unique
	Event      string // envelope event, e.g. "TRANSACTION_PAID"
	Entity     string // "sale:<id>" or "subscription:<id>": one event at a time per entity
	EnvelopeID string // envelope id of the first stored delivery (tracing only: it changes per attempt)
	// Payload is the body as received, or sealed (AES-256-GCM) when the
	// Inbox has Config.PayloadKeys: see OpenPayload.
	Payload []byte

	State State
	// Attempts counts the handler runs started (Claim adds one) that were
	// not given back: a hand-back on shutdown (Outcome.NotAttempted) takes
	// its claim's one away again.
	Attempts      int
	Deliveries    int       // deliveries stored under Key: 1, plus one per duplicate
	LastError     string    // the last failure, one line
	NextAttemptAt time.Time // received/error: due from then on

	// Lease. LeaseToken is a fencing token: Claim increments it, and Renew
	// and Complete succeed only with the current one.
	LeaseOwner     string
	LeaseToken     int64
	LeaseExpiresAt time.Time

	ReceivedAt time.Time // first delivery stored
	UpdatedAt  time.Time // last change of state (duplicates do not count)
}

// Outcome is what Complete records.
type Outcome struct {
	// State is processed, error, dead, or received (the work was handed back
	// unfinished, e.g. on shutdown).
	State State
	// Error is the failure, one line (empty for processed).
	Error string
	// RetryAfter is, for an error or received outcome, how long after the
	// store's now the event is due again (0: at once; negative is invalid).
	// It is ignored for processed and dead.
	RetryAfter time.Duration
	// NotAttempted, with State received only, gives the attempt back: the
	// handler did not run, or was cancelled because the Inbox was shutting
	// down, so the run Claim counted is taken off Attempts again. Three
	// interrupted deploys then leave an event with the attempts it had.
	NotAttempted bool
}

// Check reports whether Complete accepts o, naming the field that is wrong.
func (o Outcome) Check() error {
	switch {
	case !ValidOutcome(o.State):
		return fmt.Errorf("outcome state %q: not processed, error, dead or received", o.State)
	case o.RetryAfter < 0:
		return fmt.Errorf("outcome RetryAfter %v: negative", o.RetryAfter)
	case o.NotAttempted && o.State != StateReceived:
		return fmt.Errorf("outcome NotAttempted with state %q: only a received hand-back gives its attempt back", o.State)
	}
	return nil
}

// Filter selects records for List.
type Filter struct {
	States        []State   // empty: any state
	UpdatedBefore time.Time // zero: any age; otherwise UpdatedAt < UpdatedBefore
	Limit         int       // <= 0: 100
}

// Errors every Store returns (wrapped or not; test with errors.Is).
var (
	ErrNotFound    = errors.New("webhook: event not found")
	ErrLeaseHeld   = errors.New("webhook: event leased by another worker")
	ErrEntityBusy  = errors.New("webhook: another event of the same sale or subscription is being processed")
	ErrLeaseLost   = errors.New("webhook: lease lost (taken over, expired or already completed)")
	ErrWrongState  = errors.New("webhook: event is not in a state that allows this")
	ErrUnavailable = errors.New("webhook: store unavailable")
)

// Store keeps the inbox. Every method is safe for concurrent use by many
// goroutines and, for durable stores, many processes sharing the store; every
// method honours ctx. A method that cannot reach its backend returns an error
// wrapping ErrUnavailable.
//
// Time is the store's own (SAFETY rule 12): lease expiry, NextAttemptAt,
// ReceivedAt and UpdatedAt are set and compared by the store's clock (the
// database's clock_timestamp() or unixepoch(), Redis TIME inside the
// script; MemoryStore's Clock), never by the caller's. So a process whose
// clock is minutes off neither takes over a live lease nor keeps an expired
// one, and does not run retries early. The one time a caller gives is
// DeleteExpired's cut-off: a clock off by minutes moves a retention of days
// by minutes. "now" below is the store's clock when the method runs.
type Store interface {
	// Insert stores rec if no record has rec.Key, and reports inserted = true.
	// The store sets State = received, Attempts = 0, Deliveries = 1,
	// NextAttemptAt = ReceivedAt = UpdatedAt = now and clears the lease; the
	// caller gives Key, Event, Entity, EnvelopeID and Payload. When Insert
	// returns nil the record is durable (as the store documents).
	// If rec.Key exists, Insert increments that record's Deliveries, changes
	// nothing else and returns it with inserted = false.
	Insert(ctx context.Context, rec Record) (stored Record, inserted bool, err error)

	// Get returns the record or ErrNotFound.
	Get(ctx context.Context, key string) (Record, error)

	// Claim leases the record to owner until now+ttl, sets State =
	// processing and UpdatedAt = now, increments Attempts and LeaseToken,
	// and returns it. It succeeds when the record is received or error
	// (whatever NextAttemptAt says), or processing with a lease expired at
	// now; and no other record of the same Entity is processing under a
	// lease unexpired at now. Otherwise: ErrLeaseHeld (live lease on this
	// record), ErrEntityBusy, ErrWrongState (processed or dead), ErrNotFound;
	// a refusal returns the current record too.
	Claim(ctx context.Context, key, owner string, ttl time.Duration) (Record, error)

	// Renew extends the lease to now+ttl if token is the current LeaseToken,
	// the record is processing and the lease has not expired at now;
	// otherwise ErrLeaseLost (ErrNotFound if absent).
	Renew(ctx context.Context, key string, token int64, ttl time.Duration) (Record, error)

	// Complete records the outcome of the attempt holding token: it sets
	// State, LastError (out.Error; kept as it was when out.Error is empty)
	// and NextAttemptAt (now+out.RetryAfter for received and error; zero
	// otherwise), takes one off Attempts if out.NotAttempted (never below
	// 0), releases the lease (keeping LeaseToken) and sets UpdatedAt = now.
	// It succeeds if token is the current LeaseToken and the record is
	// processing, even if the lease has expired meanwhile (nobody claimed
	// it, so the attempt's outcome is the latest); otherwise ErrLeaseLost
	// (ErrNotFound if absent). out must pass out.Check.
	Complete(ctx context.Context, key string, token int64, out Outcome) (Record, error)

	// Due returns up to limit records Claim could take at now, ignoring
	// entity exclusion: received or error with NextAttemptAt <= now, and
	// processing with LeaseExpiresAt <= now; in the order they became due
	// (that time, then Key). A store may leave Payload out of them (the
	// Inbox needs Key and Entity; Claim returns the whole record).
	Due(ctx context.Context, limit int) ([]Record, error)

	// List returns records matching f, oldest UpdatedAt first (then by
	// Key), as they stood at one instant: a record changing state while
	// List runs is listed once, in one of its states, never twice or not
	// at all.
	List(ctx context.Context, f Filter) ([]Record, error)

	// Retry makes a dead or error record received again, due at now, with
	// Attempts reset to 0 (LastError is kept), for an operator. Other states:
	// ErrWrongState; absent: ErrNotFound.
	Retry(ctx context.Context, key string) (Record, error)

	// DeleteExpired removes up to limit processed or dead records whose
	// UpdatedAt is before 'before' (oldest first), and reports how many it
	// removed. Received, processing and error records are never removed:
	// they are unfinished. One call is one small batch: callers loop (see
	// Reap), so a purge never holds the store for long.
	DeleteExpired(ctx context.Context, before time.Time, limit int) (int, error)
}

// DefaultListLimit is the number of records List returns when Filter.Limit is 0.
const DefaultListLimit = 100

// Claimable reports whether Claim could take r at now (the store's clock),
// ignoring entity exclusion. Stores use it to keep one definition of the
// rule.
func Claimable(r Record, now time.Time) bool {
	switch r.State {
	case StateReceived, StateError:
		return true
	case StateProcessing:
		return !now.Before(r.LeaseExpiresAt)
	}
	return false
}

// LiveLease reports whether r is processing under a lease unexpired at now
// (the store's clock).
func LiveLease(r Record, now time.Time) bool {
	return r.State == StateProcessing && now.Before(r.LeaseExpiresAt)
}

// ValidOutcome reports whether Complete accepts out.State.
func ValidOutcome(s State) bool {
	return s == StateProcessed || s == StateError || s == StateDead || s == StateReceived
}
