package pagpolar

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// faultCase is one fault of the kinds docs/SAFETY.md names and what the caller must
// see. Every case asserts on the fake's ledger: exactly one successful effect
// for the operation, never two.
type faultCase struct {
	name  string
	fault pagpolartest.Fault
	// want: "ok" (the effect, exactly once) or "declined".
	want string
	// source the result must come from ("" = any).
	source Source
}

var faultCases = []faultCase{
	{name: "none", want: "ok", source: SourceResponse},
	{name: "CommitThenDrop", fault: pagpolartest.Fault{Action: pagpolartest.FaultCommitThenDrop}, want: "ok", source: SourceLookup},
	{name: "CommitDropRelease", fault: pagpolartest.Fault{Action: pagpolartest.FaultCommitDropRelease}, want: "ok", source: SourceLookup},
	{name: "DropBeforeProcessing", fault: pagpolartest.Fault{Action: pagpolartest.FaultDropBeforeProcessing}, want: "ok", source: SourceResponse},
	{name: "CommitThen500", fault: pagpolartest.Fault{Action: pagpolartest.FaultCommitThen500}, want: "ok", source: SourceLookup},
	{name: "CommitThen500After", fault: pagpolartest.Fault{Action: pagpolartest.FaultCommitThen500After, Delay: 150 * time.Millisecond}, want: "ok", source: SourceLookup},
	{name: "500NoCommit", fault: pagpolartest.Fault{Action: pagpolartest.Fault500NoCommit}, want: "ok", source: SourceResponse},
	{name: "Hold", fault: pagpolartest.Fault{Action: pagpolartest.FaultHold, Delay: 100 * time.Millisecond}, want: "ok", source: SourceResponse},
	{name: "LookupLagShorterThanSettleDelay", fault: pagpolartest.Fault{Action: pagpolartest.FaultLookupLag, Delay: 30 * time.Millisecond}, want: "ok", source: SourceResponse},
	{name: "Gateway502", fault: pagpolartest.Fault{Action: pagpolartest.FaultGateway, Status: 502}, want: "ok", source: SourceResponse},
	{name: "Gateway503HTML", fault: pagpolartest.Fault{Action: pagpolartest.FaultGateway, Status: 503}, want: "ok", source: SourceResponse},
	{name: "Gateway504AfterCommit", fault: pagpolartest.Fault{Action: pagpolartest.FaultGatewayAfterCommit, Status: 504}, want: "ok", source: SourceLookup},
	{name: "RateLimitBurst", fault: pagpolartest.Fault{Action: pagpolartest.FaultRateLimit, Times: 3}, want: "ok", source: SourceResponse},
	{name: "Unavailable503Burst", fault: pagpolartest.Fault{Action: pagpolartest.FaultUnavailable, Times: 3}, want: "ok", source: SourceResponse},
	{name: "Latency", fault: pagpolartest.Fault{Action: pagpolartest.FaultLatency, Delay: 50 * time.Millisecond}, want: "ok", source: SourceResponse},
}

// TestEveryRouteEveryFault drives each money route through each fault and
// checks the ledger: one successful effect, the caller told the right answer.
func TestEveryRouteEveryFault(t *testing.T) {
	for _, r := range routes {
		for _, fc := range faultCases {
			r, fc := r, fc
			t.Run(r.name+"/"+fc.name, func(t *testing.T) {
				t.Parallel()
				f := newFixture(t, nil)
				var state any
				if r.setup != nil {
					state = r.setup(t, f)
				}
				before := f.successful(r.effect)
				ref := "order-" + fc.name
				if fc.fault.Action != 0 {
					flt := fc.fault
					flt.Route = r.name
					if flt.Times == 0 {
						flt.Times = 1
					}
					flt.ExternalReference = faultRef(r, state, ref)
					f.srv.Inject(flt)
				}
				id, op, err := r.call(f, f.c, state, ref)
				if err != nil {
					t.Fatalf("call: %v", err)
				}
				if id == "" {
					t.Fatal("no effect identifier returned")
				}
				if fc.source != "" && op.Source != fc.source && !(fc.source == SourceLookup && op.Source == SourceReplay) {
					t.Errorf("result source %s, want %s", op.Source, fc.source)
				}
				if got := f.successful(r.effect) - before; got != 1 {
					t.Fatalf("ledger holds %d new successful %s effects, want exactly 1", got, r.effect)
				}
				f.assertNoDuplicates(t)
				// Calling again answers from the store, with no request.
				posts := f.posts(r.name)
				id2, op2, err := r.call(f, f.c, state, ref)
				if err != nil || id2 != id || op2.Source != SourceLocalRecord {
					t.Fatalf("second call: id %q source %s err %v; want %q from the local record", id2, op2.Source, err, id)
				}
				if f.posts(r.name) != posts {
					t.Fatal("second call of a settled operation sent a request")
				}
			})
		}
	}
}

// TestRetryBudgetBoundsOutage: with the API shedding every request, the
// budget stops retries once it drains: from then on the extra attempts stay
// under 10 % of first attempts, and the error says budget, never unknown.
func TestRetryBudgetBoundsOutage(t *testing.T) {
	f := newFixture(t, nil)
	f.ctx = longCtx(t) // 600 calls one after another: a loaded -race run outlasts the fixture's 20 s
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultUnavailable, Delay: time.Millisecond})
	const orders = 600
	budgetErrs, drainedAt, postsAtDrain := 0, -1, 0
	for i := range orders {
		_, err := f.c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: fmt.Sprintf("o-%d", i), Customer: goodCustomer})
		if isUnknown(err) {
			t.Fatalf("order %d: a definitely unprocessed request reported as unknown: %v", i, err)
		}
		if !errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrBudgetExhausted) {
			t.Fatalf("order %d: %v", i, err)
		}
		if errors.Is(err, ErrBudgetExhausted) {
			budgetErrs++
			if drainedAt < 0 {
				drainedAt, postsAtDrain = i+1, f.posts("pix")
			}
		}
	}
	if drainedAt < 0 {
		t.Fatal("no call reported ErrBudgetExhausted")
	}
	total := f.posts("pix")
	after := orders - drainedAt
	extraAfter := (total - postsAtDrain) - after
	t.Logf("outage: %d orders, %d attempts in all; budget drained after %d orders; then %d extra attempts for %d orders (%.1f%%)",
		orders, total, drainedAt, extraAfter, after, 100*float64(extraAfter)/float64(after))
	if extraAfter*10 > after {
		t.Fatalf("%d extra attempts for %d first attempts after the budget drained", extraAfter, after)
	}
	if total-orders > 100 {
		t.Fatalf("%d extra attempts in all: the drain itself cost more than the budget's size", total-orders)
	}
}

// TestTokenNeverLeaks: errors and stored records never carry the token.
func TestTokenNeverLeaks(t *testing.T) {
	f := newFixture(t, nil)
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultGateway, Status: 502})
	ctx, cancel := endAtAnswer(f.ctx)
	defer cancel()
	_, err := f.c.Payments.Pix(ctx, PixParams{OfferID: "offer-basic", ExternalReference: "o-leak", Customer: goodCustomer})
	if err == nil || containsFold(err.Error(), f.srv.Token) {
		t.Fatalf("error %v", err)
	}
	bad, _ := NewClient(f.srv.CredentialID, StaticToken("secret-token-xyz"), WithBaseURL(f.srv.URL), WithRetryPolicy(testPolicy()), WithStore(keystore.NewMemory()))
	_, err = bad.Payments.GetSale(f.ctx, "sale_x")
	if !errors.Is(err, ErrUnauthorized) || containsFold(err.Error(), "secret-token-xyz") {
		t.Fatalf("unauthorized: %v", err)
	}
}

// TestKnownExposure_ServerProcessingPastWindow measures SAFETY's first known
// exposure: a server that keeps processing past its in-processing mark
// commits after the client trusted a "not found" and resent. Two sales. The
// SDK cannot see this from outside; the margin (WindowMargin + SettleDelay)
// is the only defence, and the README says so.
func TestKnownExposure_ServerProcessingPastWindow(t *testing.T) {
	pol := testPolicy()
	pol.AttemptTimeout = 80 * time.Millisecond
	f := newFixture(t, nil, WithRetryPolicy(pol))
	// Held for ten windows: the mark expires at 300 ms, a lookup proves
	// its list newer than the trust moment within about two seconds more
	// (the Date header's whole seconds), the commit lands at 3 s.
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultHold, Delay: 3 * time.Second, Times: 1})
	if _, err := f.c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-late", Customer: goodCustomer}); err != nil {
		t.Fatal(err)
	}
	// Wait for the held request to commit.
	deadline := time.Now().Add(10 * time.Second)
	for f.successful("sale") < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // real time is the subject here: the hold runs on it
	}
	if n := f.successful("sale"); n != 2 {
		t.Fatalf("%d sales; the fake should reproduce the documented exposure (2)", n)
	}
	t.Logf("exposure reproduced: a hold of 3s past a 300ms window gives 2 sales for one operation")
}

// TestSafetyRule5_PendingRecordLeftByCrash_EveryRoute: on every money route,
// a process that dies after sending and before storing the answer leaves a
// pending record; the next call settles it by lookup, with no second request
// and one effect.
func TestSafetyRule5_PendingRecordLeftByCrash_EveryRoute(t *testing.T) {
	for _, r := range routes {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			var state any
			if r.setup != nil {
				state = r.setup(t, f)
			}
			before := f.successful(r.effect)
			crashed := f.client(t, WithStore(f.store), WithHook(func(ctx context.Context, e Event) {
				if e.Kind == EventSent {
					panic(errCrash)
				}
			}))
			func() {
				defer func() {
					if rec := recover(); rec != errCrash {
						t.Fatalf("crash hook did not fire: %v", rec)
					}
				}()
				_, _, _ = r.call(f, crashed, state, "crash")
			}()
			posts := f.posts(r.name)
			f.srv.Clock.Advance(testPolicy().LeaseTTL + time.Millisecond)
			id, op, err := r.call(f, f.c, state, "crash")
			if err != nil {
				t.Fatal(err)
			}
			if id == "" || op.Source != SourceLookup {
				t.Errorf("settled %q from %s, want the effect from a lookup", id, op.Source)
			}
			if f.posts(r.name) != posts {
				t.Fatal("the settling call sent the money request again")
			}
			if n := f.successful(r.effect) - before; n != 1 {
				t.Fatalf("%d effects, want 1", n)
			}
		})
	}
}

// TestSafetyRule9_FiftyGoroutines_EveryRoute: 50 goroutines on one operation
// of every money route, the first attempt lost after commit: one effect, and
// every caller gets it.
func TestSafetyRule9_FiftyGoroutines_EveryRoute(t *testing.T) {
	for _, r := range routes {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			var state any
			if r.setup != nil {
				state = r.setup(t, f)
			}
			before := f.successful(r.effect)
			f.srv.Inject(pagpolartest.Fault{Route: r.name, Action: pagpolartest.FaultCommitThenDrop, Times: 1})
			ids, errs := concurrently(50, func(int) (string, error) {
				id, _, err := r.call(f, f.c, state, "fifty")
				return id, err
			})
			for i := range ids {
				if errs[i] != nil || ids[i] != ids[0] || ids[0] == "" {
					t.Fatalf("caller %d: %q %v; want %q", i, ids[i], errs[i], ids[0])
				}
			}
			if n := f.successful(r.effect) - before; n != 1 {
				t.Fatalf("%d effects, want 1", n)
			}
		})
	}
}

// TestSafetyRule13_ForgottenStoreSendsNothing: a store that lost what it
// acknowledged (here: everything, as a Redis without persistence loses on a
// restart) refuses every new record, so neither the operation whose record
// was lost nor a new one is sent until the loss is accepted. The control, a
// store that never knew (a fresh empty one), shows the second sale the
// refusal prevents.
func TestSafetyRule13_ForgottenStoreSendsNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.warm(t, f.c)
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThen500, Times: 1})
	f.srv.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.Fault500NoCommit})
	p := PixParams{OfferID: "offer-basic", ExternalReference: "order-forgotten", Customer: goodCustomer}
	ctx, cancel := endAtAnswer(f.ctx)
	_, err := f.c.Payments.Pix(ctx, p)
	cancel()
	if !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("first call: %v, want unknown (its sale exists, its answer was a 500)", err)
	}
	f.srv.ClearFaults()
	if f.successful("sale") != 1 {
		t.Fatalf("%d sales after the first call, want 1", f.successful("sale"))
	}
	posts := f.posts("pix")

	f.store.Forget()
	for _, q := range []PixParams{p, {OfferID: "offer-basic", ExternalReference: "order-new", Customer: goodCustomer}} {
		_, err := f.c.Payments.Pix(f.ctx, q)
		if !errors.Is(err, keystore.ErrAmnesia) || !errors.Is(err, ErrStoreUnavailable) || !strings.Contains(err.Error(), "ops recover") {
			t.Fatalf("%s after the loss: %v; want ErrStoreUnavailable and keystore.ErrAmnesia, naming pagpolar ops recover", q.ExternalReference, err)
		}
	}
	if n := f.posts("pix"); n != posts || f.successful("sale") != 1 {
		t.Fatalf("after the loss: %d POSTs (was %d), %d sales; want nothing sent", n, posts, f.successful("sale"))
	}

	// Control: a store that never knew sends the lost operation again, and
	// the released key makes it a second sale.
	ctl := f.client(t, WithStore(keystore.NewMemory()))
	if _, err := ctl.Payments.Pix(f.ctx, p); err != nil {
		t.Fatalf("control: %v", err)
	}
	if f.successful("sale") != 2 {
		t.Fatalf("control: %d sales; the scenario no longer shows the double charge rule 13 prevents", f.successful("sale"))
	}

	// After the operator accepts the loss, new operations go again.
	if err := f.store.AcceptLoss(f.ctx, "test: settled by hand"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-after", Customer: goodCustomer}); err != nil {
		t.Fatalf("after AcceptLoss: %v", err)
	}
}

// lostCreateReply is a store whose next Create writes the record and then
// answers an error, as a connection lost after the commit does.
type lostCreateReply struct {
	keystore.Store
	armed atomic.Bool
}

func (s *lostCreateReply) Create(ctx context.Context, rec keystore.Record, owner string, ttl time.Duration) (keystore.Record, error) {
	got, err := s.Store.Create(ctx, rec, owner, ttl)
	if err == nil && s.armed.CompareAndSwap(true, false) {
		return keystore.Record{}, fmt.Errorf("connection reset after the write: %w", keystore.ErrUnavailable)
	}
	return got, err
}

// TestLostCreateReplySendsNothingAndFreesTheLease: a Create
// whose reply is lost after it wrote the record ends the call with
// ErrStoreUnavailable and nothing sent; the record's lease is released, so
// the next call (another worker's too) takes it at once instead of waiting
// a LeaseTTL, sends once, and the ledger holds one sale.
func TestLostCreateReplySendsNothingAndFreesTheLease(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ls := &lostCreateReply{Store: f.store}
	ls.armed.Store(true)
	c, err := NewClient(f.srv.CredentialID, StaticToken(f.srv.Token), WithBaseURL(f.srv.URL), WithStore(ls), WithClock(f.srv.Clock),
		WithRetryPolicy(testPolicy()), WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	warmClock(f, c)
	p := PixParams{OperationID: "order-lost-create", OfferID: "offer-basic", ExternalReference: "order-lost-create", Customer: goodCustomer}
	before := f.posts("pix")
	_, err = c.Payments.Pix(f.ctx, p)
	if !errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("want ErrStoreUnavailable, got %v", err)
	}
	if got := f.posts("pix"); got != before {
		t.Fatalf("%d PIX requests sent after a lost Create reply, want 0", got-before)
	}
	rec, err := f.store.Get(f.ctx, RecordID(f.srv.CredentialID, p.OperationID))
	if err != nil {
		t.Fatalf("the record the lost reply wrote: %v", err)
	}
	if rec.LeaseOwner != "" && rec.LeaseExpiresAt.After(f.srv.Clock.Now()) {
		t.Fatalf("the lease is still held by %q until %s: the next call would wait a LeaseTTL", rec.LeaseOwner, rec.LeaseExpiresAt)
	}
	// Another worker (same store) charges it now, once.
	other := f.client(t, WithStore(f.store))
	warmClock(f, other)
	sale, err := other.Payments.Pix(f.ctx, p)
	if err != nil {
		t.Fatalf("the next call: %v", err)
	}
	if sale.Sale == nil || sale.Sale.ID == "" || f.successful("sale") != 1 {
		t.Fatalf("no sale after the next call: %+v", sale)
	}
	if got := f.posts("pix") - before; got != 1 {
		t.Fatalf("%d PIX requests in all, want 1", got)
	}
	f.assertNoDuplicates(t)
}
