// The pre-send snapshot and the shared-key floor: what proves an effect new,
// and when a snapshot proves nothing.

package pagpolar

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// The time rule overrides a snapshot that proves the effect new.
//
// A process that has seen no Date header takes a pre-send snapshot (its
// own GET answers the Date the first send is then placed by). The
// operation's own sale is absent from the snapshot — proof that it is new
// — but attributeFound runs compareTime after the snapshot check, and an
// effect created "before the floor" is excluded as another's. Two ways a
// real deployment gets there, neither visible to the self-test
// (checkClock), which needs a fresh 2xx first:
//   - nginx in front of the API writes its own Date header (it does not
//     pass the upstream's by default) and its clock is 5 s ahead of the
//     database that stamps created_at (> ServerClockTolerance, 2 s);
//   - created_at is São Paulo local time with a "Z" suffix (the classic
//     strftime("%Y-%m-%dT%H:%M:%SZ") on local time): three hours early.
//
// The own sale is excluded, the not-found trusted, the charge resent: two
// sales. Every serverless invocation or freshly deployed process is cold.
func TestSnapshot_AbsenceProvesNewDespiteTheServerClock(t *testing.T) {
	cases := []struct {
		name string
		rw   func(f *fixture) bodyRewrite
	}{
		{"control/no-rewrite", func(f *fixture) bodyRewrite {
			return func(r *http.Request, status int, h http.Header, body []byte) []byte { return body }
		}},
		{"gateway-date-5s-ahead", func(f *fixture) bodyRewrite {
			return func(r *http.Request, status int, h http.Header, body []byte) []byte {
				h.Set("Date", f.srv.Clock.Now().Add(5*time.Second).UTC().Format(http.TimeFormat))
				return body
			}
		}},
		{"created-at-local-time-labelled-utc", func(f *fixture) bodyRewrite {
			brt := time.FixedZone("BRT", -3*3600)
			return func(r *http.Request, status int, h http.Header, body []byte) []byte {
				if status >= 300 {
					return body
				}
				return editObjects(body, func(m map[string]any) {
					if s, ok := m["created_at"].(string); ok {
						if ts, err := time.Parse(time.RFC3339Nano, s); err == nil {
							m["created_at"] = ts.In(brt).Format("2006-01-02T15:04:05.000") + "Z"
						}
					}
				})
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pol := testPolicy()
			pol.ServerClockTolerance = DefaultRetryPolicy.ServerClockTolerance // the production 2 s
			f := newFixture(t, nil, WithRetryPolicy(pol))
			proxy := bodyProxy(t, f, tc.rw(f))
			c := f.client(t, WithStore(f.store), WithBaseURL(proxy), WithRetryPolicy(pol)) // cold: no Date seen yet
			f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThen500, Times: 1})
			ch, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-clock", Customer: goodCustomer})
			id := ""
			if ch != nil {
				id = ch.Sale.ID
			}
			report(t, f, c, "pix:order-clock", id, err)
		})
		// The same record settled by ResumeAll in another process (it
		// reads the floor from the record): not_executed while the sale
		// exists.
		t.Run(tc.name+"/resumeall", func(t *testing.T) {
			pol := testPolicy()
			pol.ServerClockTolerance = DefaultRetryPolicy.ServerClockTolerance
			f := newFixture(t, nil, WithRetryPolicy(pol))
			proxy := bodyProxy(t, f, tc.rw(f))
			ctx1, cancel1 := context.WithCancel(f.ctx)
			defer cancel1()
			c := f.client(t, WithStore(f.store), WithBaseURL(proxy), WithRetryPolicy(pol), WithHook(func(_ context.Context, e Event) {
				if e.Kind == EventSent && e.Attempt == 1 {
					cancel1() // the process dies right after the lost answer
				}
			}))
			f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThenDrop, Times: 1})
			if _, err := c.Payments.Pix(ctx1, PixParams{OfferID: "offer-basic", ExternalReference: "order-clock", Customer: goodCustomer}); !isUnknown(err) {
				t.Fatalf("first call: %v, want unknown", err)
			}
			f.srv.Clock.Advance(time.Second) // past every window
			c2 := f.client(t, WithStore(f.store), WithBaseURL(proxy), WithRetryPolicy(pol))
			rs, err := c2.ResumeAll(f.ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				t.Logf("ResumeAll: %s %s %v", r.OperationID, r.State, r.Err)
				if (r.State == keystore.StateNotExecuted || r.State == keystore.StateFailed) && countMine(f, c2, r.OperationID) > 0 {
					t.Errorf("ResumeAll settled %s %s while its sale exists", r.OperationID, r.State)
				}
			}
		})
	}
}

// After a 409, a cold operation's snapshot AND the time rule are both
// dropped: an earlier operation's sale is taken for this one's.
//
// A 409 means another sender of this operation's key is at work (a second
// host deriving the same key: README's answer to "two hosts with separate
// stores"). onAmbiguous records SharedFloor (the other sender began at
// most one window before, on the API's clock), and attribution then stops
// trusting the pre-send snapshot (opFacts.shared). But compareTime returns
// early whenever a snapshot was taken, so SharedFloor is never applied on
// a cold operation: every sale under the reference with the same method
// and offer — here the order's earlier PIX, ten minutes old — is "ours".
// Host B's lookup, while host A's request is still processing, settles the
// operation SUCCEEDED on the earlier operation's sale (an expired PIX the
// customer cannot pay); host A then gets the real one. Warm hosts (no
// snapshot; time excludes by SharedFloor) settle on the real sale: the
// control.
func TestSharedKey_ColdOperationKeepsTheSharedFloor(t *testing.T) {
	t.Parallel()
	for _, cold := range []bool{true, false} {
		name := "cold-hosts"
		if !cold {
			name = "control/warm-hosts"
		}
		t.Run(name, func(t *testing.T) {
			// The server holds the key for 2 s; the clients' window matches the
			// server's (3 s) and an attempt outlasts the hold.
			pol := testPolicy()
			pol.ProcessingWindow, pol.AttemptTimeout, pol.LeaseTTL = 3*time.Second, 3*time.Second, 20*time.Second
			f := newFixture(t, []pagpolartest.Option{pagpolartest.WithProcessingWindow(3 * time.Second)}, WithRetryPolicy(pol))
			ref := "order-shared"
			earlier, err := f.c.Payments.Pix(f.ctx, PixParams{OperationID: "pix:" + ref + "-attempt-1", OfferID: "offer-basic", ExternalReference: ref, Customer: goodCustomer})
			if err != nil {
				t.Fatal(err)
			}
			f.srv.Clock.Advance(10 * time.Minute)
			// Two hosts with separate stores send the operation's derived key
			// at once (a barrier right before each send).
			var ready sync.WaitGroup
			ready.Add(2)
			barrier := func(_ context.Context, e Event) {
				if e.Kind == EventSaved && e.Attempt == 1 {
					ready.Done()
					ready.Wait()
				}
			}
			hostA := f.client(t, WithHook(barrier), WithRetryPolicy(pol))
			hostB := f.client(t, WithHook(barrier), WithRetryPolicy(pol))
			if !cold {
				f.warm(t, hostA)
				f.warm(t, hostB)
			}
			f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultHold, Delay: 2 * time.Second, Times: 1})
			p := PixParams{OfferID: "offer-basic", ExternalReference: ref, Customer: goodCustomer}
			ids, errs := concurrently(2, func(i int) (string, error) {
				c := hostA
				if i == 1 {
					c = hostB
				}
				ch, err := c.Payments.Pix(f.ctx, p)
				if err != nil {
					return "", err
				}
				return ch.Sale.ID, nil
			})
			t.Logf("earlier operation's sale %s; host A: %q %v; host B: %q %v", earlier.Sale.ID, ids[0], errs[0], ids[1], errs[1])
			for i, c := range []*Client{hostA, hostB} {
				for _, pr := range ledgerCheck(f, c, "pix:"+ref, ids[i], errs[i]) {
					t.Errorf("host %c: %s", 'A'+i, pr)
				}
				if ids[i] == earlier.Sale.ID {
					t.Errorf("host %c settled the operation on the earlier operation's sale %s", 'A'+i, earlier.Sale.ID)
				}
			}
		})
	}
}

// A refund that ended not_executed was later resent with its old
// snapshot and old first send, and settled on another operation's refund
// made in between: one refund lost, both operations "succeeded".
func TestSnapshot_RetakenAfterNotExecuted(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	sale, err := f.c.Payments.CreditCard(f.ctx, CreditCardParams{OfferID: "offer-premium", ExternalReference: "order-snap", Customer: goodCustomer, CardToken: "tok_ok"})
	if err != nil {
		t.Fatal(err)
	}
	// Operation A is refused by the API's own 503 until its retries run out:
	// not executed.
	f.srv.Inject(pagpolartest.Fault{Route: "refund", Action: pagpolartest.FaultUnavailable, Times: testPolicy().MaxAttempts})
	_, err = f.c.Refunds.Create(f.ctx, RefundParams{OperationID: "rf-A", SaleID: sale.Sale.ID, Amount: 1000})
	if !errors.As(err, new(*OperationError)) || isUnknown(err) {
		t.Fatalf("A: %v, want not executed", err)
	}
	mustState(t, f, f.c, "rf-A", keystore.StateNotExecuted)
	// Operation B refunds the same amount meanwhile.
	if _, err := f.c.Refunds.Create(f.ctx, RefundParams{OperationID: "rf-B", SaleID: sale.Sale.ID, Amount: 1000}); err != nil {
		t.Fatal(err)
	}
	f.srv.Clock.Advance(5 * time.Second)
	// A is called again and its answer is lost before processing.
	f.srv.Inject(pagpolartest.Fault{Route: "refund", Action: pagpolartest.Fault500NoCommit, Times: 1})
	if _, err := f.c.Refunds.Create(f.ctx, RefundParams{OperationID: "rf-A", SaleID: sale.Sale.ID, Amount: 1000}); err != nil {
		t.Fatal(err)
	}
	if n := f.successful("refund"); n != 2 {
		t.Fatalf("%d refunds in the ledger, want 2 (A's and B's)", n)
	}
}

// A snapshot read from a list that lags: another operation's refund,
// made just before, is missing from the snapshot and was later taken for
// this operation's (the ClockSkew allowance working backwards).
func TestSnapshot_RobustToALaggingList(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	sale, err := f.c.Payments.CreditCard(f.ctx, CreditCardParams{OfferID: "offer-premium", ExternalReference: "order-lag", Customer: goodCustomer, CardToken: "tok_ok"})
	if err != nil {
		t.Fatal(err)
	}
	// B's refund lags 40 ms (less than SettleDelay) behind its commit.
	f.srv.Inject(pagpolartest.Fault{Route: "refund", Action: pagpolartest.FaultLookupLag, Delay: 40 * time.Millisecond, Times: 1})
	if _, err := f.c.Refunds.Create(f.ctx, RefundParams{OperationID: "rf-B", SaleID: sale.Sale.ID, Amount: 1000}); err != nil {
		t.Fatal(err)
	}
	// A snapshots at once (B's refund not listed yet) and its request is
	// never processed.
	f.srv.Inject(pagpolartest.Fault{Route: "refund", Action: pagpolartest.Fault500NoCommit, Times: 1})
	if _, err := f.c.Refunds.Create(f.ctx, RefundParams{OperationID: "rf-A", SaleID: sale.Sale.ID, Amount: 1000}); err != nil {
		t.Fatal(err)
	}
	if n := f.successful("refund"); n != 2 {
		t.Fatalf("%d refunds in the ledger, want 2: A settled on B's refund", n)
	}
}

// Nothing is ever sent without a snapshot: a refund whose record was
// settled not_executed before it ever had one (Resume of a crash during its
// snapshot) took none when called again.
func TestSnapshot_NothingSentWithoutOne(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	sale, err := f.c.Payments.CreditCard(f.ctx, CreditCardParams{OfferID: "offer-premium", ExternalReference: "order-nosnap", Customer: goodCustomer, CardToken: "tok_ok"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.Refunds.Create(f.ctx, RefundParams{OperationID: "rf-B", SaleID: sale.Sale.ID, Amount: 1000}); err != nil {
		t.Fatal(err)
	}
	// rf-A's snapshot read fails: nothing sent, record pending with 0
	// attempts; Resume settles it not executed.
	f.srv.Inject(pagpolartest.Fault{Route: "get_refunds", Action: pagpolartest.Fault500NoCommit})
	if _, err := f.c.Refunds.Create(f.ctx, RefundParams{OperationID: "rf-A", SaleID: sale.Sale.ID, Amount: 1000}); err == nil {
		t.Fatal("want the failed snapshot's error")
	}
	if _, err := f.c.Resume(f.ctx, "rf-A"); err != nil {
		t.Fatal(err)
	}
	f.srv.ClearFaults()
	f.srv.Clock.Advance(5 * time.Second)
	f.srv.Inject(pagpolartest.Fault{Route: "refund", Action: pagpolartest.Fault500NoCommit, Times: 1})
	before := len(f.srv.Ledger().Requests)
	if _, err := f.c.Refunds.Create(f.ctx, RefundParams{OperationID: "rf-A", SaleID: sale.Sale.ID, Amount: 1000}); err != nil {
		t.Fatal(err)
	}
	// The call's first request is the snapshot, before any POST.
	reqs := f.srv.Ledger().Requests[before:]
	if len(reqs) == 0 || reqs[0].Route != "get_refunds" {
		t.Fatalf("the refund's first request after it was settled not executed is %s %s, want the snapshot GET /refunds", reqs[0].Method, reqs[0].Path)
	}
	if n := f.successful("refund"); n != 2 {
		t.Fatalf("%d refunds, want 2", n)
	}
}

// An API that sends no Date header, and an operation sent by two hosts
// with stores of their own (one key, derived). A's request commits and
// stays in processing; B's snapshot already lists A's sale, B's send gets
// the documented 409, and A's request then ends in a 500 that releases the
// key. Without a clock reference for the 409, B must still not take the
// snapshot as proof that A's sale is another operation's: a trusted
// not-found would resend the released key and charge twice.
func TestSharedKey_WithoutDateTheSnapshotIsNoProof(t *testing.T) {
	f := newFixture(t, []pagpolartest.Option{pagpolartest.WithShapes(pagpolartest.ShapeNoDate)})
	p := PixParams{OfferID: "offer-basic", ExternalReference: "order-nodate", Customer: goodCustomer}
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThen500After, Delay: 250 * time.Millisecond, Times: 1})
	type out struct {
		id  string
		err error
	}
	aDone := make(chan out, 1)
	go func() {
		ch, err := f.c.Payments.Pix(f.ctx, p)
		if err != nil {
			aDone <- out{"", err}
			return
		}
		aDone <- out{ch.Sale.ID, nil}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for f.successful("sale") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("host A's sale never committed")
		}
		time.Sleep(time.Millisecond)
	}
	b := f.client(t) // its own store, cold
	ch, err := b.Payments.Pix(f.ctx, p)
	bID := ""
	if err == nil {
		bID = ch.Sale.ID
	}
	a := <-aDone
	t.Logf("host A: %q %v; host B: %q %v; POSTs %d", a.id, a.err, bID, err, f.posts("pix"))
	saw409 := false
	for _, r := range f.srv.Ledger().Requests {
		saw409 = saw409 || r.Method == http.MethodPost && r.Status == http.StatusConflict
	}
	if !saw409 {
		t.Fatal("setup: host B's send was not answered 409 (it came after host A's request ended)")
	}
	if n := f.successful("sale"); n != 1 {
		t.Errorf("DOUBLE: %d sales for one operation", n)
	}
	for _, pr := range ledgerCheckStore(f, b, "pix:order-nodate", bID, err) {
		t.Error("host B: " + pr)
	}
}
