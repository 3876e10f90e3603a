package pagpolarriver

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	pagpolar "github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// Every branch of an operation call's error becomes the River outcome
// that keeps the operation one: a success completes, a definite failure
// cancels, a defect cancels loudly, an effect that may exist or a cause
// that passes snoozes (never a new operation), and only what proved
// nothing was processed goes to River's retries.
func TestVerdictOf_EachOutcomeBranch(t *testing.T) {
	now := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	backoff := func(n int) time.Duration { return time.Duration(n+1) * time.Second }
	opErr := func(st keystore.State, err error) error {
		return &pagpolar.OperationError{OperationID: "pix:o", Key: "k", State: st, Err: err}
	}
	unknown := func(after time.Time) error {
		return &pagpolar.OutcomeUnknownError{OperationID: "pix:o", Key: "k", Reason: "answer lost", SettleAfter: after}
	}
	cases := []struct {
		name    string
		err     error
		snoozes int
		later   bool // an earlier attempt ran (River rescued the job, or retried it)
		want    verdict
	}{
		{"answered", nil, 0, false, verdict{act: complete}},
		{"declined", opErr(keystore.StateFailed, &pagpolar.APIError{StatusCode: 402, Code: "declined"}), 0, false, verdict{act: cancel}},
		{"refused", opErr(keystore.StateFailed, fmt.Errorf("%w: refund failed", pagpolar.ErrRefused)), 0, false, verdict{act: cancel}},
		{"API 422 business rule", opErr(keystore.StateFailed, &pagpolar.APIError{StatusCode: 422}), 0, false, verdict{act: cancel}},
		{"declined, outcome not recorded", opErr("", fmt.Errorf("%w (%w)", pagpolar.ErrDeclined, pagpolar.ErrNotRecorded)), 0, false, verdict{act: cancel}},
		{"params mismatch", opErr("", fmt.Errorf("%w: other params", pagpolar.ErrParamsMismatch)), 0, false, verdict{act: cancelLoud}},
		{"key collision (failed)", opErr(keystore.StateFailed, fmt.Errorf("%w: replay of another", pagpolar.ErrParamsMismatch)), 0, false, verdict{act: cancelLoud}},
		{"local validation", &pagpolar.ValidationError{Field: "Customer.Email", Reason: "not an e-mail address"}, 0, false, verdict{act: cancelLoud}},
		{"API 400", opErr(keystore.StateFailed, &pagpolar.APIError{StatusCode: 400}), 0, false, verdict{act: cancelLoud}},
		{"foreign record", opErr("", pagpolar.ErrForeignRecord), 0, false, verdict{act: cancelLoud}},
		{"too old, unrecorded", opErr(keystore.StateUnknown, &pagpolar.OutcomeUnknownError{OperationID: "pix:o", Reason: "not recorded", Err: pagpolar.ErrOperationTooOld}), 0, false, verdict{act: snooze, delay: time.Second}},
		{"API 400, unrecorded", opErr("", &pagpolar.OutcomeUnknownError{OperationID: "pix:o", Reason: "not recorded", Err: &pagpolar.APIError{StatusCode: 400}}), 0, false, verdict{act: snooze, delay: time.Second}},
		{"payer gone", &resolveError{orderID: "o", err: fmt.Errorf("no row: %w", ErrUnresolvable)}, 0, false, verdict{act: cancelLoud}},
		{"no resolver", &resolveError{orderID: "o", err: errNoResolver}, 0, false, verdict{act: cancelLoud}},
		{"unknown, settle later", unknown(now.Add(40 * time.Second)), 0, false, verdict{act: snooze, delay: 40 * time.Second}},
		{"unknown, settle time past", unknown(now.Add(-time.Minute)), 2, false, verdict{act: snooze, delay: 3 * time.Second}},
		{"unknown, backoff longer", unknown(now.Add(time.Second)), 4, false, verdict{act: snooze, delay: 5 * time.Second}},
		{"unknown, no settle time", unknown(time.Time{}), 0, false, verdict{act: snooze, delay: time.Second}},
		{"unknown wrapped", opErr(keystore.StateUnknown, unknown(now.Add(10*time.Second))), 0, false, verdict{act: snooze, delay: 10 * time.Second}},
		{"in progress elsewhere", opErr(keystore.StatePending, pagpolar.ErrInProgress), 1, false, verdict{act: snooze, delay: 2 * time.Second}},
		{"lease lost", opErr(keystore.StatePending, pagpolar.ErrLeaseLost), 0, false, verdict{act: snooze, delay: time.Second}},
		{"store unavailable", opErr("", fmt.Errorf("%w: %w", pagpolar.ErrStoreUnavailable, keystore.ErrUnavailable)), 0, false, verdict{act: snooze, delay: time.Second}},
		{"rate limited", opErr(keystore.StateNotExecuted, &pagpolar.APIError{StatusCode: 429}), 0, false, verdict{act: snooze, delay: time.Second}},
		{"shed", opErr(keystore.StateNotExecuted, &pagpolar.APIError{StatusCode: 503, FromAPI: true}), 0, false, verdict{act: snooze, delay: time.Second}},
		{"budget", opErr(keystore.StateNotExecuted, pagpolar.ErrBudgetExhausted), 0, false, verdict{act: snooze, delay: time.Second}},
		{"resolver's database away", &resolveError{orderID: "o", err: errors.New("connection refused")}, 0, false, verdict{act: retry}},
		{"resolver's database away after a snooze", &resolveError{orderID: "o", err: errors.New("connection refused")}, 1, false, verdict{act: snooze, delay: 2 * time.Second}},
		{"resolver's database away on a rescued job", &resolveError{orderID: "o", err: errors.New("connection refused")}, 0, true, verdict{act: snooze, delay: time.Second}},
		// A state the SDK did not prove is not proof: an error that only
		// claims not_executed is unknown, and snoozes.
		{"claimed not executed, unproven", opErr(keystore.StateNotExecuted, &pagpolar.APIError{StatusCode: 401}), 0, false, verdict{act: snooze, delay: time.Second}},
		{"claimed not executed, context", opErr(keystore.StateNotExecuted, context.Canceled), 0, false, verdict{act: snooze, delay: time.Second}},
	}
	for _, c := range cases {
		if got := verdictOf(c.err, now, c.snoozes, c.snoozes == 0 && !c.later, backoff); got != c.want {
			t.Errorf("%s: verdict %v %v, want %v %v", c.name, got.act, got.delay, c.want.act, c.want.delay)
		}
	}
}

func TestDefaultBackoff_DoublesToFiveMinutes(t *testing.T) {
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}
	for n, w := range want {
		if got := DefaultBackoff(n); got != w {
			t.Errorf("DefaultBackoff(%d) = %v, want %v", n, got, w)
		}
	}
	for _, n := range []int{-1, 9, 100, 1 << 30} {
		if got := DefaultBackoff(n); got <= 0 || got > 5*time.Minute {
			t.Errorf("DefaultBackoff(%d) = %v", n, got)
		}
	}
}

// Only what the SDK proved not executed goes to River's retries: a 401,
// as the SDK returns it from a real call. A call whose context ended
// before the store was read proves nothing of the operation (an earlier
// run may have left it unsettled): it is unknown, and snoozes.
func TestVerdictOf_ProvenNotExecutedRetries(t *testing.T) {
	srv := pagpolartest.NewServer(t)
	now := time.Now()
	call := func(name, token string, ctx context.Context) error {
		c, err := pagpolar.NewClient(srv.CredentialID, pagpolar.StaticToken(token), pagpolar.WithBaseURL(srv.URL),
			pagpolar.WithStore(keystore.NewMemory()), pagpolar.WithRetryPolicy(testPolicy()), pagpolar.WithLogger(quiet()))
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Payments.Pix(ctx, pagpolar.PixParams{OperationID: "pix:verdict-" + name, OfferID: "offer-basic", ExternalReference: "verdict-" + name,
			Customer: pagpolar.Customer{Name: "Maria Silva", Email: "maria@example.com", Document: "123.456.789-09"}})
		return err
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name    string
		err     error
		outcome pagpolar.Outcome
		act     action
	}{
		{"unauthorized", call("unauthorized", "wrong-token", context.Background()), pagpolar.OutcomeNotExecuted, retry},
		{"context ended before the store was read", call("ended", srv.Token, ended), pagpolar.OutcomeUnknown, snooze},
	} {
		if got := pagpolar.OutcomeOf(c.err); got != c.outcome {
			t.Errorf("%s: OutcomeOf = %q (%v), want %q", c.name, got, c.err, c.outcome)
		}
		if got := verdictOf(c.err, now, 0, true, DefaultBackoff); got.act != c.act {
			t.Errorf("%s: verdict %v, want %v (%v)", c.name, got.act, c.act, c.err)
		}
	}
	if n := len(srv.Ledger().Sales); n != 0 {
		t.Fatalf("%d sales, want none", n)
	}
}
