package pagpolar

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// Sentinel errors. Every error the SDK returns wraps at most a few of these;
// test with errors.Is. The functions that return them say which. A
// checkout needs three: ErrFailed, ErrNotExecuted and ErrOutcomeUnknown
// (Outcome); the others say why.
var (
	// ErrFailed: the operation definitely failed (OutcomeFailed): no
	// effect of it stands. A new attempt needs a new operation ID.
	ErrFailed = errors.New("pagpolar: operation failed")

	// ErrNotExecuted: nothing was processed (OutcomeNotExecuted): call
	// again with the same operation ID once the cause is fixed.
	ErrNotExecuted = errors.New("pagpolar: operation not executed")

	// ErrUnauthorized: the API answered 401 or 403 (bad or expired token).
	// Nothing was processed; the operation is left not_executed (as for
	// ErrRateLimited, the branch is OutcomeOf's: unknown if the store did
	// not take that).
	ErrUnauthorized = errors.New("pagpolar: unauthorized")

	// ErrValidation: the params failed local validation (a *ValidationError,
	// nothing saved or sent) or the API answered 400 (the key was not
	// registered; the operation failed once its record says so: a refusal
	// the store did not take is unknown, see ErrNotRecorded).
	ErrValidation = errors.New("pagpolar: invalid request")

	// ErrDeclined: the payment was declined. The declined sale exists; the
	// operation failed. A new attempt needs a new operation ID
	// (e.g. "retry-{order}-{attempt}") and usually new card data.
	ErrDeclined = errors.New("pagpolar: payment declined")

	// ErrRateLimited: the API answered 429 and the retries allowed by the
	// policy ran out. No attempt was processed; the operation is
	// not_executed once its record says so. If the store did not take that
	// (another worker may hold the operation), the error is OutcomeUnknown
	// and still matches this: branch on OutcomeOf or ErrNotExecuted, not on
	// the cause.
	ErrRateLimited = errors.New("pagpolar: rate limited")

	// ErrUnavailable: the API shed the request with its own 503 and the retries
	// ran out. Nothing was processed; the operation is not_executed (the
	// branch is OutcomeOf's, as for ErrRateLimited).
	ErrUnavailable = errors.New("pagpolar: service unavailable")

	// ErrInProgress: another worker (goroutine or process) holds this
	// operation, or the API answered 409 to it and the context ended while
	// waiting. Call again later: the operation's outcome will be settled.
	ErrInProgress = errors.New("pagpolar: operation in progress elsewhere")

	// ErrOutcomeUnknown: a request may or may not have taken effect and the
	// SDK could not settle it yet (the context or settle time ran out while
	// the original could still commit, or no reliable lookup exists for the
	// route). The record is kept in state unknown. Settle it with
	// Client.Resume (never charges) or by calling the same method again with
	// the same operation ID (looks up first, resends only on a trusted
	// not-found). Never retry it with a new operation ID.
	ErrOutcomeUnknown = errors.New("pagpolar: outcome unknown")

	// ErrParamsMismatch: the operation ID is already recorded with different
	// params (SAFETY rule 10; nothing was sent), or the API returned a 2xx that
	// belongs to another request (rule 7: an operation-ID/key collision). Its
	// branch is the operation's: failed when the record failed, unknown when
	// it succeeded (the order is charged: never "not executed"). A record
	// not settled for good (pending, unknown, not_executed: a call with the
	// recorded params may still send it) answers an OutcomeUnknownError
	// without this sentinel instead: its advice, a new operation ID, would
	// charge twice.
	ErrParamsMismatch = errors.New("pagpolar: operation ID reused with different params")

	// ErrStoreUnavailable: the key store could not record the operation, so
	// this call sent nothing (SAFETY rule 1). The operation is not_executed
	// when the store, its history proven (SAFETY rule 13), showed no earlier
	// call recorded it (its record was absent, or this call created it);
	// otherwise an earlier call may have
	// sent it, and the outcome is unknown. When the store refused because it
	// detected that it lost records it had acknowledged (SAFETY rule 13),
	// the error also matches keystore.ErrAmnesia: every new operation is
	// refused until an operator runs pagpolar ops recover.
	ErrStoreUnavailable = errors.New("pagpolar: key store unavailable")

	// ErrBudgetExhausted: the client-wide retry budget is spent (the API is
	// failing a large share of requests). The request was definitely not
	// processed; the operation is not_executed (the branch is OutcomeOf's,
	// as for ErrRateLimited) and may be called again later.
	ErrBudgetExhausted = errors.New("pagpolar: retry budget exhausted")

	// ErrNotFound: a read route answered 404, or a refund/plan change targets a
	// sale or subscription the API does not know.
	ErrNotFound = errors.New("pagpolar: not found")

	// ErrLeaseLost: this worker's lease on the operation expired and another
	// worker took it over; this worker stopped before sending again.
	ErrLeaseLost = errors.New("pagpolar: lease on operation lost")

	// ErrRefused: the API recorded the operation and refused it (a refund
	// or plan change in a failed or rejected state). The operation failed; a
	// new attempt needs a new operation ID.
	ErrRefused = errors.New("pagpolar: refused")

	// ErrNotRecorded: this call learned an outcome (the error also wraps
	// it: a decline, the API's refusal, ...) but the key store would not
	// take it, so the record still says the operation may be in flight. A
	// decline (the declined sale exists, under this operation's key) stays
	// failed. A refusal before processing registered no key, so until the
	// record says failed another worker may send the operation again: that
	// error is OutcomeUnknown. A later call of the same client answers the
	// outcome it learned (and writes it); a call from another process looks
	// the effect up first and sends again only if the lookup proves nothing
	// was done.
	ErrNotRecorded = errors.New("pagpolar: outcome not recorded")

	// ErrIncompleteList: a list answer holds paging the SDK cannot follow
	// (or more pages than it reads), so what was read may not be all.
	ErrIncompleteList = errors.New("pagpolar: list could not be read whole")

	// ErrOperationTooOld: the operation is older than the client's
	// MaxOperationAge, so it is not resent (SAFETY rule 6): not executed
	// once its record says so, unknown while the store has not taken it.
	ErrOperationTooOld = errors.New("pagpolar: operation too old to send again")

	// ErrForeignRecord: the store holds, under this client's record ID, a
	// record this SDK did not write for this credential and operation (a
	// key that is neither this operation's derived key nor one of its
	// random keys, a claim in another form). Nothing is sent or settled
	// on it; the error names the record and what was found.
	ErrForeignRecord = errors.New("pagpolar: record not written by this SDK for this credential")
)

// APIError is a non-2xx answer from the API. Its text fields are scrubbed
// before anyone sees them (scrub.go): the token the request was sent with
// (plain, JSON- and URL-escaped), the operation's personal values, e-mail
// addresses and runs of six or more digits are replaced by markers such as
// "[redacted]", "[e-mail]" and "[number]". Error() prints only those.
type APIError struct {
	StatusCode int
	Code       string // the API's error code, when its JSON body has one
	Message    string // the API's human message, when its JSON body has one; scrubbed
	RequestID  string // X-Request-Id
	Key        string // Idempotency-Key of the request, if any
	Raw        string // the body, scrubbed, then truncated to 4 KiB
	FromAPI    bool   // the body is the API's JSON error (not an intermediary's page)
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "pagpolar: API answered %d", e.StatusCode)
	if e.Code != "" {
		fmt.Fprintf(&b, " %s", e.Code)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", oneLine(e.Message))
	} else if !e.FromAPI && e.Raw != "" {
		b.WriteString(" (not the API's JSON body: an intermediary?)")
	}
	if e.RequestID != "" {
		fmt.Fprintf(&b, " (request %s)", e.RequestID)
	}
	return b.String()
}

// Is lets errors.Is match an APIError to the sentinel its status means.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrUnauthorized:
		return e.StatusCode == 401 || e.StatusCode == 403
	case ErrValidation:
		return e.StatusCode == 400
	case ErrDeclined:
		return e.StatusCode == 402 || e.Code == "declined"
	case ErrRateLimited:
		return e.StatusCode == 429
	case ErrUnavailable:
		return e.StatusCode == 503 && e.FromAPI
	case ErrInProgress:
		return e.StatusCode == 409
	case ErrNotFound:
		return e.StatusCode == 404
	}
	return false
}

// ValidationError reports params that failed local validation. Nothing was
// saved or sent.
type ValidationError struct {
	Field  string // the params field, e.g. "Customer.Email"
	Reason string
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("pagpolar: invalid %s: %s", e.Field, e.Reason)
}

// Unwrap makes errors.Is(err, ErrValidation) and errors.Is(err,
// ErrNotExecuted) true: nothing was saved or sent.
func (e *ValidationError) Unwrap() []error { return []error{ErrValidation, ErrNotExecuted} }

// OutcomeUnknownError says that an operation may or may not have taken
// effect. errors.Is(err, ErrOutcomeUnknown) is true. Settle it with
// Client.Resume(ctx, OperationID) or by calling the same method with the same
// params again; never with a new operation ID, which could charge twice.
type OutcomeUnknownError struct {
	OperationID string
	Key         string    // the Idempotency-Key already sent
	Reason      string    // why it could not be settled yet
	SettleAfter time.Time // after it a "not found" lookup is conclusive (zero if unknown): schedule the settling call then
	Ref         string    // an effect found but not attributed (e.g. a sale whose method the SDK cannot read)
	Err         error     // the last underlying error, if any
}

func (e *OutcomeUnknownError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "pagpolar: outcome unknown for operation %q (key %s): %s", e.OperationID, e.Key, e.Reason)
	if e.Err != nil {
		fmt.Fprintf(&b, " (%s)", oneLine(e.Err.Error()))
	}
	if e.Ref != "" {
		fmt.Fprintf(&b, "; found %s", e.Ref)
	}
	if !e.SettleAfter.IsZero() {
		fmt.Fprintf(&b, "; a lookup is conclusive after %s", e.SettleAfter.UTC().Format(time.RFC3339))
	}
	b.WriteString("; settle with Client.Resume or by repeating the call with the same operation ID, never with a new one")
	return b.String()
}

// Unwrap returns ErrOutcomeUnknown and the underlying error.
func (e *OutcomeUnknownError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrOutcomeUnknown}
	}
	return []error{ErrOutcomeUnknown, e.Err}
}

// Outcome is what an operation call's error means for the caller: the
// four branches of a checkout's error handling are a nil error (the
// effect exists: read its Decision) and these three.
type Outcome string

const (
	// OutcomeFailed: definitely no effect of this operation stands —
	// declined, refused, or refused by the API before processing. The
	// operation is over: a new attempt (a new card, fixed data) goes under a
	// NEW operation ID. errors.Is(err, ErrFailed).
	OutcomeFailed Outcome = "failed"
	// OutcomeNotExecuted: nothing was processed, and that is proven: bad
	// params (nothing saved or sent), a store that answered it held no
	// record of the operation and could not take one, or a record that
	// now says so (rate limited, shed, 401/403, a misconfigured base URL,
	// the snapshot before the first send failed).
	// A "not executed" the store did not take is OutcomeUnknown: another
	// worker may hold the operation. Fix what the error names, if anything,
	// and call again with the SAME operation ID. errors.Is(err, ErrNotExecuted).
	OutcomeNotExecuted Outcome = "not_executed"
	// OutcomeUnknown: the effect may exist (a lost answer not settled yet,
	// another worker holds the operation, a store that failed before it
	// could say whether an earlier call sent it). Call again later with the SAME
	// operation ID, or Client.Resume; NEVER with a new one.
	// errors.Is(err, ErrOutcomeUnknown).
	OutcomeUnknown Outcome = "unknown"
)

// OutcomeOf says which of the three branches an error returned by an
// operation call (Payments.Pix, Refunds.Create, ...) falls in. Only a
// definite failure is OutcomeFailed and only a proven absence of effect
// OutcomeNotExecuted; an error the SDK cannot place is OutcomeUnknown,
// whose remedy — calling again with the same operation ID — is safe
// whatever happened. OutcomeOf(nil) is "".
func OutcomeOf(err error) Outcome {
	if err == nil {
		return ""
	}
	var oe *OperationError
	if errors.As(err, &oe) {
		return outcomeOf(oe.Err, oe.State)
	}
	return outcomeOf(err, "")
}

func outcomeOf(err error, st keystore.State) Outcome {
	switch {
	case errors.Is(err, ErrOutcomeUnknown), errors.Is(err, ErrInProgress), errors.Is(err, ErrLeaseLost):
		return OutcomeUnknown
	case errors.Is(err, ErrDeclined), errors.Is(err, ErrRefused), st == keystore.StateFailed:
		return OutcomeFailed
	case errors.As(err, new(*ValidationError)), errors.As(err, new(notExecutedError)):
		return OutcomeNotExecuted
	}
	// Nothing proves that no effect exists (SAFETY rule 12): a store that
	// failed may hold an earlier call's record, a record that could not be
	// read may say the operation was sent, an error the SDK did not foresee
	// may follow a send. The remedy of unknown — call again with the same
	// operation ID — is the one that is safe whatever happened.
	return OutcomeUnknown
}

// notExecutedError marks an error whose operation is proven not executed:
// the params failed a check before anything was saved or sent, or the
// store holds (or, with a proven history, answered that it holds no) record
// saying nothing was processed, written by this call while it held the
// operation. Only errors so marked (and *ValidationError) are
// OutcomeNotExecuted. Its text is the error's own.
type notExecutedError struct{ err error }

func (u notExecutedError) Error() string { return u.err.Error() }
func (u notExecutedError) Unwrap() error { return u.err }

// opCause is err without the *OperationError that wraps it, for an error
// that becomes the cause of another operation error.
func opCause(err error) error {
	if oe := (*OperationError)(nil); errors.As(err, &oe) && oe.Err != nil {
		return oe.Err
	}
	return err
}

// OperationError wraps an error with the operation it belongs to. Every
// error an operation call returns after validation is one; errors.Is
// matches ErrFailed, ErrNotExecuted or ErrOutcomeUnknown by its Outcome.
type OperationError struct {
	OperationID string
	Key         string
	State       keystore.State // the record's state after the call ("" when none could be written or read)
	Err         error
}

func (e *OperationError) Error() string {
	st := string(e.State)
	if st == "" {
		st = "not recorded"
	}
	return fmt.Sprintf("pagpolar: operation %q (%s): %v", e.OperationID, st, e.Err)
}

// Outcome is the branch the error falls in (OutcomeOf).
func (e *OperationError) Outcome() Outcome { return outcomeOf(e.Err, e.State) }

// Is matches ErrFailed and ErrNotExecuted by the error's Outcome (and
// ErrOutcomeUnknown, which the underlying error wraps itself or not).
func (e *OperationError) Is(target error) bool {
	switch target {
	case ErrFailed:
		return e.Outcome() == OutcomeFailed
	case ErrNotExecuted:
		return e.Outcome() == OutcomeNotExecuted
	case ErrOutcomeUnknown:
		return e.Outcome() == OutcomeUnknown
	}
	return false
}

// Unwrap returns the underlying error.
func (e *OperationError) Unwrap() error { return e.Err }

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
