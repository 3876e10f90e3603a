package pagpolar

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// A checkout's error handling has four branches: nil (the effect exists),
// ErrFailed, ErrNotExecuted and ErrOutcomeUnknown. Each error the SDK
// returns falls in exactly one, and only a definite failure in ErrFailed
// (the one branch that allows a new operation ID).
func TestOutcomeOf_Branches(t *testing.T) {
	unknown := &OutcomeUnknownError{OperationID: "op", Reason: "lost"}
	cases := []struct {
		name string
		err  error
		want Outcome
	}{
		{"nil", nil, ""},
		{"validation", &ValidationError{Field: "Customer.Email", Reason: "empty"}, OutcomeNotExecuted},
		{"unknown", &OperationError{OperationID: "op", State: keystore.StateUnknown, Err: unknown}, OutcomeUnknown},
		{"bare unknown", unknown, OutcomeUnknown},
		{"in progress elsewhere", &OperationError{OperationID: "op", State: keystore.StatePending, Err: ErrInProgress}, OutcomeUnknown},
		{"lease lost", &OperationError{OperationID: "op", Err: ErrLeaseLost}, OutcomeUnknown},
		{"declined", &OperationError{OperationID: "op", State: keystore.StateFailed, Err: fmt.Errorf("%w: card", ErrDeclined)}, OutcomeFailed},
		{"declined later", &OperationError{OperationID: "op", State: keystore.StateSucceeded, Err: fmt.Errorf("%w: later", ErrDeclined)}, OutcomeFailed},
		{"refused", &OperationError{OperationID: "op", State: keystore.StateFailed, Err: ErrRefused}, OutcomeFailed},
		{"API 422", &OperationError{OperationID: "op", State: keystore.StateFailed, Err: &APIError{StatusCode: 422, FromAPI: true}}, OutcomeFailed},
		{"collision", &OperationError{OperationID: "op", State: keystore.StateFailed, Err: ErrParamsMismatch}, OutcomeFailed},
		{"reused ID, other params, while the first succeeded", &OperationError{OperationID: "op", State: keystore.StateSucceeded, Err: ErrParamsMismatch}, OutcomeNotExecuted},
		{"rate limited", &OperationError{OperationID: "op", State: keystore.StateNotExecuted, Err: ErrRateLimited}, OutcomeNotExecuted},
		{"no store, no record of the operation", &OperationError{OperationID: "op", Err: unsentError{fmt.Errorf("%w: nothing was sent", ErrStoreUnavailable)}}, OutcomeNotExecuted},
		{"no store, an earlier call's record unread", &OperationError{OperationID: "op", Err: ErrStoreUnavailable}, OutcomeUnknown},
		{"no store while the operation was recorded unknown", &OperationError{OperationID: "op", State: keystore.StateUnknown, Err: ErrStoreUnavailable}, OutcomeUnknown},
		{"amnesia", &OperationError{OperationID: "op", Err: fmt.Errorf("%w: %w", ErrStoreUnavailable, keystore.ErrAmnesia)}, OutcomeUnknown},
		{"store history unproven, the lookup before the first send not conclusive", &OperationError{OperationID: "op", State: keystore.StatePending, Err: fmt.Errorf("%w: not conclusive", ErrStoreUnproven)}, OutcomeUnknown},
		{"401", &OperationError{OperationID: "op", State: keystore.StateNotExecuted, Err: &APIError{StatusCode: 401, FromAPI: true}}, OutcomeNotExecuted},
		{"declined, not recorded", &OperationError{OperationID: "op", State: keystore.StatePending, Err: &unrecordedError{outcome: ErrDeclined}}, OutcomeFailed},
	}
	sentinel := map[Outcome]error{OutcomeFailed: ErrFailed, OutcomeNotExecuted: ErrNotExecuted, OutcomeUnknown: ErrOutcomeUnknown}
	for _, c := range cases {
		if got := OutcomeOf(c.err); got != c.want {
			t.Errorf("%s: OutcomeOf = %q, want %q", c.name, got, c.want)
		}
		for o, s := range sentinel {
			if errors.Is(c.err, s) != (o == c.want) {
				t.Errorf("%s: errors.Is(err, %v) = %v, want %v", c.name, s, errors.Is(c.err, s), o == c.want)
			}
		}
	}
}

// End to end: each branch from real calls against the fake.
func TestOutcomeOf_FromCalls(t *testing.T) {
	f := newFixture(t, nil)
	ctx := f.ctx
	// Declined: failed.
	_, err := f.c.Payments.CreditCard(ctx, CreditCardParams{OfferID: "offer-basic", ExternalReference: "o-decl", Customer: goodCustomer, CardToken: "tok_decline_1"})
	if !errors.Is(err, ErrFailed) || !errors.Is(err, ErrDeclined) {
		t.Errorf("decline: %v, want ErrFailed and ErrDeclined", err)
	}
	// Bad params: not executed.
	_, err = f.c.Payments.Pix(ctx, PixParams{OfferID: "offer-basic", ExternalReference: "o-bad", Customer: Customer{Name: "x"}})
	if !errors.Is(err, ErrNotExecuted) || errors.Is(err, ErrFailed) {
		t.Errorf("validation: %v, want ErrNotExecuted only", err)
	}
	// Rate limited until the retries run out: not executed.
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultRateLimit, Times: 100})
	_, err = f.c.Payments.Pix(ctx, PixParams{OfferID: "offer-basic", ExternalReference: "o-429", Customer: goodCustomer})
	if !errors.Is(err, ErrNotExecuted) || !errors.Is(err, ErrRateLimited) {
		t.Errorf("429s: %v, want ErrNotExecuted and ErrRateLimited", err)
	}
	f.srv.ClearFaults()
	// A lost answer whose lookups fail (every read after the send answers
	// 500) until the settle wait runs out: unknown.
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThenDrop, Times: 1})
	var once sync.Once
	pol := testPolicy()
	pol.MaxSettleWait = 500 * time.Millisecond
	lost := f.client(t, WithStore(f.store), WithRetryPolicy(pol), WithHook(func(_ context.Context, e Event) {
		if e.Kind == EventSent {
			once.Do(func() { f.srv.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.Fault500NoCommit}) })
		}
	}))
	_, err = lost.Payments.Pix(ctx, PixParams{OfferID: "offer-basic", ExternalReference: "o-lost", Customer: goodCustomer})
	if !errors.Is(err, ErrOutcomeUnknown) || errors.Is(err, ErrFailed) || errors.Is(err, ErrNotExecuted) {
		t.Errorf("lost answer: %v, want ErrOutcomeUnknown only", err)
	}
}

// TestOperationError_UnknownNamesTheStateTheStoreHolds: an "outcome
// unknown" error states the record's state as the store acknowledged it
// (unknown, to be settled), not "not recorded" — an operator reading the
// error must not think the record is missing and start the order again.
func TestOperationError_UnknownNamesTheStateTheStoreHolds(t *testing.T) {
	f := newFixture(t, nil)
	f.warm(t, f.c)
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThen500, Times: 1})
	f.srv.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.Fault500NoCommit})
	ctx, cancel := endAtAnswer(f.ctx)
	_, err := f.c.Payments.Pix(ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-state", Customer: goodCustomer})
	cancel()
	var oe *OperationError
	if !errors.Is(err, ErrOutcomeUnknown) || !errors.As(err, &oe) {
		t.Fatalf("pix: %v, want an outcome-unknown OperationError", err)
	}
	rec, gerr := f.store.Get(f.ctx, f.c.storeID("pix:order-state"))
	if gerr != nil {
		t.Fatal(gerr)
	}
	if oe.State == "" || oe.State != rec.State || oe.Key != rec.Key {
		t.Errorf("error says state %q key %q; the store holds %q key %q (%v)", oe.State, oe.Key, rec.State, rec.Key, err)
	}
}

// outageStore is a memory store whose Create (and, when told, Get) fail
// like a database that went away.
type outageStore struct {
	*keystore.Memory
	createFails, getFails bool
}

func (s *outageStore) Create(ctx context.Context, r keystore.Record, owner string, ttl time.Duration) (keystore.Record, error) {
	if s.createFails {
		return keystore.Record{}, fmt.Errorf("%w: connection refused", keystore.ErrUnavailable)
	}
	return s.Memory.Create(ctx, r, owner, ttl)
}

func (s *outageStore) Get(ctx context.Context, id string) (keystore.Record, error) {
	if s.getFails {
		return keystore.Record{}, fmt.Errorf("%w: connection refused", keystore.ErrUnavailable)
	}
	return s.Memory.Get(ctx, id)
}

// A store that fails before the send proves only that this call sent
// nothing. Called again for an operation whose sale exists, the call said
// "not executed" (found by the shape suite under load: the caller's
// context ran out at the store, on the call after an unknown one); it is
// unknown unless the store answered that no record of the operation
// exists.
func TestOutcomeOf_StoreFailureIsNotExecutedOnlyWithoutAnEarlierRecord(t *testing.T) {
	for _, tc := range []struct {
		name              string
		earlier, getFails bool
		want              Outcome
	}{
		{"no earlier call, record absent", false, false, OutcomeNotExecuted},
		{"no earlier call, store unreadable", false, true, OutcomeUnknown},
		{"earlier call charged, its record found", true, false, OutcomeUnknown},
		{"earlier call charged, store unreadable", true, true, OutcomeUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &outageStore{Memory: keystore.NewMemory()}
			f := newFixture(t, nil, WithStore(st))
			p := PixParams{OperationID: "pix:order-outage", OfferID: "offer-basic", ExternalReference: "order-outage", Customer: goodCustomer}
			if tc.earlier {
				if _, err := f.c.Payments.Pix(f.ctx, p); err != nil {
					t.Fatal(err)
				}
			}
			posts := f.posts("pix")
			st.createFails, st.getFails = true, tc.getFails
			_, err := f.c.Payments.Pix(f.ctx, p)
			if !errors.Is(err, ErrStoreUnavailable) {
				t.Fatalf("got %v, want ErrStoreUnavailable", err)
			}
			if got := OutcomeOf(err); got != tc.want {
				t.Errorf("OutcomeOf = %q, want %q (%v)", got, tc.want, err)
			}
			if n := f.posts("pix"); n != posts {
				t.Errorf("%d POSTs after the store failed, want %d", n, posts)
			}
			sales := 0
			for _, e := range f.srv.Ledger().Effects() {
				if e.Kind == "sale" && e.Successful {
					sales++
				}
			}
			if sales > 0 && OutcomeOf(err) != OutcomeUnknown {
				t.Errorf("answered %q while the operation's sale exists", OutcomeOf(err))
			}
		})
	}
}
