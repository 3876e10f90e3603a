package pagpolarriver

import (
	"errors"
	"time"

	pagpolar "github.com/pagpolar/pagpolar-go"
)

// action is what a worker tells River after an operation call.
type action int

const (
	// complete: the operation succeeded (whatever its decision); the job
	// is completed, with OnSettled in the same transaction.
	complete action = iota + 1
	// cancel: the operation definitely failed (declined, refused, the
	// API's refusal): no effect of it stands and running it again under
	// the same operation ID answers the same failure.
	cancel
	// cancelLoud: running it again cannot help and someone must look: the
	// operation ID names other params, the params are invalid, the payer
	// is gone, the record is not this SDK's, the operation is too old.
	cancelLoud
	// snooze: the effect may exist, or nothing was processed for a cause
	// that passes (a store outage, rate limits, shed load). The job runs
	// again after the delay under the same operation ID, which settles
	// before it sends; it is never discarded for it.
	snooze
	// retry: the SDK proved nothing was processed (a 401), or a first run
	// never reached it (the Resolver's database away):
	// River's retry policy runs it again, and discards it after its
	// attempts, which is safe because nothing was done.
	retry
)

func (a action) String() string {
	switch a {
	case complete:
		return "complete"
	case cancel:
		return "cancel"
	case cancelLoud:
		return "cancel_loud"
	case snooze:
		return "snooze"
	case retry:
		return "retry"
	}
	return "invalid"
}

// verdict is what to do with a job, and after how long for a snooze.
type verdict struct {
	act   action
	delay time.Duration
}

// DefaultBackoff is the snooze after the n-th snooze of a job (n from 0):
// 1 s doubling to at most 5 minutes.
func DefaultBackoff(n int) time.Duration {
	if n < 0 {
		n = 0
	}
	if n > 8 {
		return 5 * time.Minute
	}
	return min(time.Second<<n, 5*time.Minute)
}

// verdictOf maps an operation call's error to what River is told. now is
// the clock of the call's end; snoozes how many times the job was snoozed
// before; firstRun whether no earlier run of the job reached the SDK (no
// snooze and no earlier attempt: River rescues a job whose worker died
// mid-call as a new attempt, and a snooze gives its attempt back); backoff
// the snooze for that count. A lost answer is snoozed at
// least until the SDK says a lookup is conclusive (SettleAfter).
func verdictOf(err error, now time.Time, snoozes int, firstRun bool, backoff func(int) time.Duration) verdict {
	if err == nil {
		return verdict{act: complete}
	}
	var ve *pagpolar.ValidationError
	switch {
	case errors.Is(err, pagpolar.ErrParamsMismatch), errors.Is(err, pagpolar.ErrForeignRecord),
		errors.As(err, &ve), errors.Is(err, ErrUnresolvable), errors.Is(err, errNoResolver):
		return verdict{act: cancelLoud}
	case (errors.Is(err, pagpolar.ErrValidation) || errors.Is(err, pagpolar.ErrOperationTooOld)) &&
		pagpolar.OutcomeOf(err) != pagpolar.OutcomeUnknown:
		// The API's 400, or an operation too old to send, once recorded.
		// Unrecorded, it is unknown and snoozes below: the next run
		// settles it (and cancels it then) instead of leaving the record
		// in flight with no job behind it.
		return verdict{act: cancelLoud}
	}
	wait := backoff(snoozes)
	var re *resolveError
	if errors.As(err, &re) {
		// The SDK was not called. A first run that never reached it is
		// not executed, and River's retries may discard it; after a
		// snooze or an earlier attempt (a worker that died mid-call) an
		// earlier run may have left the operation unsettled, so it is
		// snoozed, never discarded.
		if firstRun {
			return verdict{act: retry}
		}
		return verdict{act: snooze, delay: wait}
	}
	if pagpolar.OutcomeOf(err) == pagpolar.OutcomeUnknown {
		var ou *pagpolar.OutcomeUnknownError
		if errors.As(err, &ou) && !ou.SettleAfter.IsZero() {
			wait = max(wait, ou.SettleAfter.Sub(now))
		}
		return verdict{act: snooze, delay: wait}
	}
	switch {
	case errors.Is(err, pagpolar.ErrStoreUnavailable), errors.Is(err, pagpolar.ErrRateLimited),
		errors.Is(err, pagpolar.ErrUnavailable), errors.Is(err, pagpolar.ErrBudgetExhausted):
		return verdict{act: snooze, delay: wait}
	}
	if pagpolar.OutcomeOf(err) == pagpolar.OutcomeFailed {
		return verdict{act: cancel}
	}
	return verdict{act: retry}
}
