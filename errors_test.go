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
		{"reused ID, other params, while the first succeeded", &OperationError{OperationID: "op", State: keystore.StateSucceeded, Err: ErrParamsMismatch}, OutcomeUnknown},
		{"reused ID, other params, after the first failed", &OperationError{OperationID: "op", State: keystore.StateFailed, Err: ErrParamsMismatch}, OutcomeFailed},
		{"rate limited", &OperationError{OperationID: "op", State: keystore.StateNotExecuted, Err: notExecutedError{ErrRateLimited}}, OutcomeNotExecuted},
		{"rate limited, not recorded: the lease ran out meanwhile", &OperationError{OperationID: "op", State: keystore.StatePending, Err: &OutcomeUnknownError{OperationID: "op", Err: fmt.Errorf("%w (recording it: %w)", ErrRateLimited, ErrLeaseLost)}}, OutcomeUnknown},
		{"an error the SDK did not place, the record succeeded", &OperationError{OperationID: "op", State: keystore.StateSucceeded, Err: errors.New("stored result unreadable")}, OutcomeUnknown},
		{"an error the SDK did not place, nothing recorded", &OperationError{OperationID: "op", Err: errors.New("pagpolar: something unforeseen")}, OutcomeUnknown},
		{"an unsettled record whose metadata is unreadable", &OperationError{OperationID: "op", State: keystore.StateUnknown, Err: errors.New("record metadata unreadable")}, OutcomeUnknown},
		{"no store, no record of the operation", &OperationError{OperationID: "op", Err: notExecutedError{fmt.Errorf("%w: nothing was sent", ErrStoreUnavailable)}}, OutcomeNotExecuted},
		{"no store, an earlier call's record unread", &OperationError{OperationID: "op", Err: ErrStoreUnavailable}, OutcomeUnknown},
		{"no store while the operation was recorded unknown", &OperationError{OperationID: "op", State: keystore.StateUnknown, Err: ErrStoreUnavailable}, OutcomeUnknown},
		{"amnesia", &OperationError{OperationID: "op", Err: fmt.Errorf("%w: %w", ErrStoreUnavailable, keystore.ErrAmnesia)}, OutcomeUnknown},
		{"store history unproven, the lookup before the first send not conclusive", &OperationError{OperationID: "op", State: keystore.StatePending, Err: fmt.Errorf("%w: not conclusive", ErrStoreUnproven)}, OutcomeUnknown},
		{"401", &OperationError{OperationID: "op", State: keystore.StateNotExecuted, Err: notExecutedError{&APIError{StatusCode: 401, FromAPI: true}}}, OutcomeNotExecuted},
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

// leaseTheftStore lets another worker take the operation just before this
// call writes "not executed": the lease ran out while the call waited out
// its 429s, and a worker that found it expired acquired it (and may send).
type leaseTheftStore struct {
	*keystore.Memory
	clk    *pagpolartest.Clock
	ttl    time.Duration
	on     keystore.State // the write before which the lease is taken
	stolen bool
}

func (s *leaseTheftStore) Update(ctx context.Context, r keystore.Record) (keystore.Record, error) {
	if r.State == s.on && !s.stolen {
		s.stolen = true
		s.clk.Advance(s.ttl + time.Second)
		if _, err := s.Memory.Acquire(ctx, r.OperationID, "another-worker", s.ttl); err != nil {
			return keystore.Record{}, fmt.Errorf("test store: taking the lease: %w", err)
		}
	}
	return s.Memory.Update(ctx, r)
}

// "Not executed" is an answer only once written: a call whose attempts
// were all refused before processing, but whose record could not take that
// because its lease had passed to another worker, cannot say nothing was
// processed — the other worker holds the operation and may send it. It is
// unknown, and still says why (the 429s); a later call settles it.
func TestOutcomeOf_NotExecutedUnwrittenIsUnknown(t *testing.T) {
	clk := pagpolartest.NewClock()
	st := &leaseTheftStore{Memory: keystore.NewMemoryWithClock(clk), clk: clk, ttl: testPolicy().LeaseTTL, on: keystore.StateNotExecuted}
	f := newFixture(t, []pagpolartest.Option{pagpolartest.WithClock(clk)}, WithStore(st), WithClock(clk))
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultRateLimit, Times: 100})
	p := PixParams{OperationID: "pix:order-theft", OfferID: "offer-basic", ExternalReference: "order-theft", Customer: goodCustomer}
	_, err := f.c.Payments.Pix(f.ctx, p)
	if !st.stolen {
		t.Fatalf("the call never wrote not_executed (%v)", err)
	}
	if got := OutcomeOf(err); got != OutcomeUnknown {
		t.Fatalf("OutcomeOf = %q, want unknown: another worker holds the operation (%v)", got, err)
	}
	if !errors.Is(err, ErrOutcomeUnknown) || errors.Is(err, ErrNotExecuted) || !errors.Is(err, ErrRateLimited) {
		t.Errorf("err %v: want ErrOutcomeUnknown and ErrRateLimited, not ErrNotExecuted", err)
	}
	var oe *OperationError
	if !errors.As(err, &oe) || oe.State == keystore.StateNotExecuted {
		t.Errorf("OperationError.State = %q: the store never took not_executed", oe.State)
	}
	// The same ID, once the API takes requests and the lease is free
	// again, charges once.
	f.srv.ClearFaults()
	clk.Advance(st.ttl + time.Second)
	if _, err := f.c.Payments.Pix(f.ctx, p); err != nil {
		t.Fatal(err)
	}
	f.assertNoDuplicates(t)
	if n := f.successful("sale"); n != 1 {
		t.Errorf("%d successful sales, want 1", n)
	}
}

// A record this SDK cannot read whole — an unsettled one whose metadata
// does not decode, a succeeded one whose stored result does not — proves
// nothing about the effect: the call is unknown (an *OperationError, so
// errors.Is places it), never "not executed".
func TestOutcomeOf_UnreadableRecordIsUnknown(t *testing.T) {
	for _, tc := range []struct {
		name    string
		unknown bool // the first call ends unknown (its answer lost, lookups failing)
		spoil   func(*keystore.Record)
	}{
		{"unsettled, metadata unreadable", true, func(r *keystore.Record) { r.Meta = []byte("{not json") }},
		{"succeeded, result unreadable", false, func(r *keystore.Record) { r.Result = []byte("{not json") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			p := PixParams{OperationID: "pix:order-spoilt", OfferID: "offer-basic", ExternalReference: "order-spoilt", Customer: goodCustomer}
			c := f.c
			if tc.unknown {
				pol := testPolicy()
				pol.MaxSettleWait = 300 * time.Millisecond
				var once sync.Once
				c = f.client(t, WithStore(f.store), WithRetryPolicy(pol), WithHook(func(_ context.Context, e Event) {
					if e.Kind == EventSent {
						once.Do(func() { f.srv.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.Fault500NoCommit}) })
					}
				}))
				f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThenDrop, Times: 1})
			}
			_, err := c.Payments.Pix(f.ctx, p)
			if tc.unknown != (err != nil) {
				t.Fatalf("first call: %v", err)
			}
			f.srv.ClearFaults()
			id := c.storeID(p.OperationID)
			r, err := f.store.Acquire(f.ctx, id, "test", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			tc.spoil(&r)
			if r, err = f.store.Update(f.ctx, r); err != nil {
				t.Fatal(err)
			}
			if err := f.store.Release(f.ctx, id, r.LeaseToken); err != nil {
				t.Fatal(err)
			}
			posts := f.posts("pix")
			_, err = c.Payments.Pix(f.ctx, p)
			if got := OutcomeOf(err); got != OutcomeUnknown || !errors.Is(err, ErrOutcomeUnknown) || errors.Is(err, ErrNotExecuted) {
				t.Errorf("OutcomeOf = %q (%v), want unknown: the sale exists", got, err)
			}
			if n := f.posts("pix"); n != posts {
				t.Errorf("%d POSTs on a record it could not read, want %d", n, posts)
			}
			f.assertNoDuplicates(t)
			if n := f.successful("sale"); n != 1 {
				t.Errorf("%d successful sales, want 1", n)
			}
		})
	}
}

// A first send that stops at its snapshot sent nothing, and the record
// (no attempt, under this call's lease, in a store whose history is
// proven) says so: not executed, and a later call goes on. On a store
// that cannot prove its history the lookup before the first send fails
// first, and that is unknown.
func TestOutcomeOf_FailedSnapshotIsNotExecuted(t *testing.T) {
	for _, unproven := range []bool{false, true} {
		t.Run(fmt.Sprintf("unproven=%v", unproven), func(t *testing.T) {
			f := newFixture(t, nil)
			if unproven {
				f.store.Unprove()
			}
			pol := testPolicy()
			pol.MaxSettleWait = 300 * time.Millisecond
			cold := f.client(t, WithStore(f.store), WithRetryPolicy(pol)) // a snapshot comes first
			f.srv.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.Fault500NoCommit})
			p := PixParams{OperationID: "pix:order-snap", OfferID: "offer-basic", ExternalReference: "order-snap", Customer: goodCustomer}
			_, err := cold.Payments.Pix(f.ctx, p)
			want := OutcomeNotExecuted
			if unproven {
				want = OutcomeUnknown
			}
			if got := OutcomeOf(err); got != want {
				t.Fatalf("OutcomeOf = %q (%v), want %q", got, err, want)
			}
			if n := f.posts("pix"); n != 0 {
				t.Fatalf("%d POSTs", n)
			}
			if unproven {
				return
			}
			f.srv.ClearFaults()
			if _, err := cold.Payments.Pix(f.ctx, p); err != nil {
				t.Fatal(err)
			}
			if n := f.successful("sale"); n != 1 {
				t.Errorf("%d sales, want 1", n)
			}
		})
	}
}

// A first send stopped at its snapshot says not executed only once the
// record says so: a worker that held the operation earlier and stalled in
// its own snapshot past the lease would otherwise take the unchanged record
// back and send after this call answered that nothing was sent.
func TestOutcomeOf_FailedSnapshotFencesAStalledWorker(t *testing.T) {
	f := newFixture(t, nil)
	gate, entered := make(chan struct{}), make(chan struct{}, 1)
	client := func(tokens TokenFunc) *Client {
		c, err := NewClient(f.srv.CredentialID, tokens, WithBaseURL(f.srv.URL), WithClock(f.srv.Clock), WithRetryPolicy(testPolicy()),
			WithLogger(quiet), WithStore(f.store))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	stalled := client(func(ctx context.Context) (string, error) {
		select {
		case entered <- struct{}{}:
		default:
		}
		select {
		case <-gate:
			return f.srv.Token, nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	refused := client(func(context.Context) (string, error) {
		return "", errors.New("token service down")
	})
	p := PixParams{OperationID: "pix:order-stall", OfferID: "offer-basic", ExternalReference: "order-stall", Customer: goodCustomer}
	done := make(chan error, 1)
	go func() {
		_, err := stalled.Payments.Pix(f.ctx, p)
		done <- err
	}()
	select {
	case <-entered: // the stalled worker holds the lease, inside its snapshot
	case <-f.ctx.Done():
		t.Fatal("the first worker never reached its snapshot")
	}
	f.srv.Clock.Advance(testPolicy().LeaseTTL + time.Second)
	_, err := refused.Payments.Pix(f.ctx, p)
	if got := OutcomeOf(err); got != OutcomeNotExecuted {
		t.Fatalf("the second call: OutcomeOf = %q (%v), want not executed", got, err)
	}
	close(gate)
	werr := <-done
	if n := f.successful("sale"); n != 0 {
		t.Fatalf("NOT EXECUTED, THEN CHARGED: %d sale(s) after the second call said nothing was sent (the stalled worker: %v)", n, werr)
	}
	if werr == nil {
		t.Fatal("the stalled worker succeeded without a sale")
	}
	// The operation is not over: a call now charges it, once.
	if _, err := f.c.Payments.Pix(f.ctx, p); err != nil {
		t.Fatalf("a call after both: %v", err)
	}
	if n := f.successful("sale"); n != 1 {
		t.Fatalf("%d sales, want 1", n)
	}
}

// Failed, for a request the API refused with a 4xx (no key registered),
// is an answer only once written: a worker that took the lease over looks
// the operation up, finds nothing and may send it again, and that send
// may be accepted. Unwritten, it is unknown, and still says the API's
// answer.
func TestOutcomeOf_RefusalUnwrittenIsUnknown(t *testing.T) {
	clk := pagpolartest.NewClock()
	st := &leaseTheftStore{Memory: keystore.NewMemoryWithClock(clk), clk: clk, ttl: testPolicy().LeaseTTL, on: keystore.StateFailed}
	f := newFixture(t, []pagpolartest.Option{pagpolartest.WithClock(clk)}, WithStore(st), WithClock(clk))
	p := PixParams{OperationID: "pix:order-refused", OfferID: "offer-nope", ExternalReference: "order-refused", Customer: goodCustomer}
	_, err := f.c.Payments.Pix(f.ctx, p)
	if !st.stolen {
		t.Fatalf("the call never wrote failed (%v)", err)
	}
	var ae *APIError
	if OutcomeOf(err) != OutcomeUnknown || errors.Is(err, ErrFailed) || !errors.As(err, &ae) {
		t.Fatalf("OutcomeOf = %q (%v), want unknown, with the API's answer", OutcomeOf(err), err)
	}
	// Written, the same refusal is failed.
	st.on = ""
	clk.Advance(st.ttl + time.Second)
	p.OperationID = "pix:order-refused-2"
	if _, err := f.c.Payments.Pix(f.ctx, p); OutcomeOf(err) != OutcomeFailed {
		t.Fatalf("recorded refusal: %q (%v), want failed", OutcomeOf(err), err)
	}
}
