package pagpolar

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/longtest"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// The shape suite: every money route, through the faults that make the SDK
// decide from an answer or a lookup, against the fake answering in every
// plausible shape (pagpolartest.Shape). The assertion is the ledger's, per
// operation: never two successful effects; never reported failed or not
// executed while its effect exists; never succeeded without one. Unknown
// outcomes are allowed and counted — and then a later call (same params,
// faults gone) must settle or stay unknown, under the same three rules.

// shapeFaults are the answers that make the SDK decide (none: the 2xx is
// checked; the rest force a lookup or a resend).
var shapeFaults = []faultCase{
	{name: "none"},
	{name: "CommitThenDrop", fault: pagpolartest.Fault{Action: pagpolartest.FaultCommitThenDrop}},
	{name: "CommitThen500", fault: pagpolartest.Fault{Action: pagpolartest.FaultCommitThen500}},
	{name: "Gateway504AfterCommit", fault: pagpolartest.Fault{Action: pagpolartest.FaultGatewayAfterCommit, Status: 504}},
	{name: "Gateway503AfterCommit", fault: pagpolartest.Fault{Action: pagpolartest.FaultGatewayAfterCommit, Status: 503}},
	{name: "500NoCommit", fault: pagpolartest.Fault{Action: pagpolartest.Fault500NoCommit}},
	{name: "DropBeforeProcessing", fault: pagpolartest.Fault{Action: pagpolartest.FaultDropBeforeProcessing}},
	{name: "Decline", fault: pagpolartest.Fault{Action: pagpolartest.FaultDecline}},
	// Lookups lagging behind the commit: less than SettleDelay after the
	// API's own 500; less than the window after a gateway's 504.
	{name: "CommitThen500Lag", fault: pagpolartest.Fault{Action: pagpolartest.FaultCommitThen500, LookupLag: 40 * time.Millisecond}},
	{name: "Gateway504AfterCommitLag", fault: pagpolartest.Fault{Action: pagpolartest.FaultGatewayAfterCommit, Status: 504, LookupLag: 150 * time.Millisecond}},
}

// shapeTally counts outcomes per shape for the log.
type shapeTally struct {
	mu                        sync.Mutex
	cases, unknownFirst, left int
}

// coldOrWarm is the client states a shape case runs with: both in the long
// run; in the short one, cold and warm in turn (every route and fault
// still meets every shape).
func coldOrWarm(n int) []bool {
	if longtest.Enabled() {
		return []bool{false, true}
	}
	return []bool{n%2 == 0}
}

func TestShapes(t *testing.T) {
	shapes := append([]pagpolartest.Shape{pagpolartest.ShapeToday}, pagpolartest.AllShapes()...)
	for _, shape := range shapes {
		t.Run(string(shape), func(t *testing.T) {
			t.Parallel()
			var tally shapeTally
			var wg sync.WaitGroup
			sem := make(chan struct{}, 12)
			n := 0
			for _, r := range routes {
				for _, fc := range shapeFaults {
					if fc.fault.Action == pagpolartest.FaultDecline && !r.card {
						continue
					}
					n++
					for _, cold := range coldOrWarm(n) {
						wg.Go(func() {
							sem <- struct{}{}
							defer func() { <-sem }()
							name := fmt.Sprintf("%s/%s/%s/cold=%v", shape, r.name, fc.name, cold)
							unknown, stillUnknown, problems := runShapeCase(t, []pagpolartest.Option{pagpolartest.WithShapes(shape)}, r, fc, cold, 0)
							for _, p := range problems {
								t.Errorf("%s: %s", name, p)
							}
							tally.mu.Lock()
							tally.cases++
							if unknown {
								tally.unknownFirst++
							}
							if stillUnknown {
								tally.left++
							}
							tally.mu.Unlock()
						})
					}
				}
			}
			wg.Wait()
			t.Logf("shape %s: %d cases, %d ended unknown on the first call, %d still unknown after a later call", shape, tally.cases, tally.unknownFirst, tally.left)
		})
	}
}

// runShapeCase runs one route through one fault, after other operations
// left effects under the same reference (or on the same sale or
// subscription) a few seconds earlier, so that the lookup must tell them
// apart and page through them. cold runs the operation on a new client (no
// Date header seen yet) sharing the store; off is its clock's offset. If
// the first call ends unknown, a later call without faults follows.
func runShapeCase(t *testing.T, srvOpts []pagpolartest.Option, r route, fc faultCase, cold bool, off time.Duration) (unknown, stillUnknown bool, problems []string) {
	f := newFixture(t, srvOpts)
	if off != 0 {
		f.c.clock = offsetClock{base: f.srv.Clock, off: off}
	}
	ref := "order-" + fc.name
	state, err := shapeSetup(f, r, ref)
	if err != nil {
		return false, false, []string{"setup: " + err.Error()}
	}
	f.srv.Clock.Advance(5 * time.Second)
	c := f.c
	if cold {
		c = f.client(t, WithStore(f.store))
		if off != 0 {
			c.clock = offsetClock{base: f.srv.Clock, off: off}
		}
	}
	opID := shapeOpID(r, ref)
	if fc.fault.Action != 0 {
		flt := fc.fault
		flt.Route, flt.Times = r.name, 1
		flt.ExternalReference = faultRef(r, state, ref)
		f.srv.Inject(flt)
	}
	id, _, err := r.call(f, c, state, ref)
	problems = ledgerCheck(f, c, opID, id, err)
	if !isUnknown(err) {
		return false, false, problems
	}
	f.srv.ClearFaults()
	f.srv.Clock.Advance(time.Second) // past every window of the test policy
	id, _, err = r.call(f, c, state, ref)
	problems = append(problems, ledgerCheck(f, c, opID, id, err)...)
	return true, isUnknown(err), problems
}

// shapeSetup is the route's setup (a subscription to change, a sale to
// refund) and the other operations' effects the operation must be told
// apart from, through the SDK on f.c. The others' own outcomes do not
// matter (in some shapes they end unknown).
func shapeSetup(f *fixture, r route, ref string) (any, error) {
	c, ctx := f.c, f.ctx
	switch r.name {
	case "plan_change":
		res, err := c.Subscriptions.Subscribe(ctx, SubscribeParams{OfferID: "plan-basic", ExternalReference: "sub-setup", Customer: customer(), PaymentMethod: "pix"})
		if err != nil {
			return nil, err
		}
		id := res.Subscription.ID
		_, _ = c.Subscriptions.ChangePlan(ctx, ChangePlanParams{OperationID: "noise-pc-1", SubscriptionID: id, NewOfferID: "plan-pro"})
		_, _ = c.Subscriptions.ChangePlan(ctx, ChangePlanParams{OperationID: "noise-pc-2", SubscriptionID: id, NewOfferID: "plan-basic"})
		return id, nil
	case "refund":
		res, err := c.Payments.CreditCard(ctx, CreditCardParams{OfferID: "offer-premium", ExternalReference: "refund-setup", Customer: customer(), CardToken: "tok_ok"})
		if err != nil {
			return nil, err
		}
		id := res.Sale.ID
		_, _ = c.Refunds.Create(ctx, RefundParams{OperationID: "noise-rf-1", SaleID: id, Amount: 1500})
		_, _ = c.Refunds.Create(ctx, RefundParams{OperationID: "noise-rf-2", SaleID: id, Amount: 700})
		return id, nil
	case "subscribe":
		_, _ = c.Subscriptions.Subscribe(ctx, SubscribeParams{OperationID: "noise-sub:" + ref, OfferID: "plan-basic", ExternalReference: ref, Customer: customer(), PaymentMethod: "credit_card", CardToken: "tok_ok"})
		return nil, nil
	}
	// Charges: an earlier charge of the same order by the same method and
	// offer (another operation ID), one by another method, and a decline.
	switch r.name {
	case "pix":
		_, _ = c.Payments.Pix(ctx, PixParams{OperationID: "noise-same:" + ref, OfferID: "offer-basic", ExternalReference: ref, Customer: customer()})
	case "boleto":
		_, _ = c.Payments.Boleto(ctx, BoletoParams{OperationID: "noise-same:" + ref, OfferID: "offer-premium", ExternalReference: ref, Customer: customer()})
	case "credit_card":
		_, _ = c.Payments.CreditCard(ctx, CreditCardParams{OperationID: "noise-same:" + ref, OfferID: "offer-basic", ExternalReference: ref, Customer: customer(), CardToken: "tok_ok", Installments: 3})
	}
	_, _ = c.Payments.Boleto(ctx, BoletoParams{OperationID: "noise-boleto:" + ref, OfferID: "offer-basic", ExternalReference: ref, Customer: customer()})
	_, _ = c.Payments.CreditCard(ctx, CreditCardParams{OperationID: "noise-decline:" + ref, OfferID: "offer-basic", ExternalReference: ref, Customer: customer(), CardToken: "tok_decline_x"})
	return nil, nil
}

func shapeOpID(r route, ref string) string {
	switch r.name {
	case "plan_change":
		return "pc-" + ref
	case "refund":
		return "rf-" + ref
	}
	return r.name + ":" + ref
}

// ledgerCheck is the assertion that matters, for one call's outcome.
func ledgerCheck(f *fixture, c *Client, opID, id string, err error) []string {
	var problems []string
	key := c.idempotencyKey(opID)
	l := f.srv.Ledger()
	var mine []pagpolartest.Effect
	for _, e := range l.Effects() {
		if e.Key != key || !e.Successful || (e.Kind == "sale" && e.SubscriptionID != "" && !e.Renewal) {
			continue // a subscription's first sale is covered by the subscription
		}
		mine = append(mine, e)
	}
	if len(mine) > 1 {
		problems = append(problems, fmt.Sprintf("DOUBLE: %d successful effects under the operation's key: %v", len(mine), effectIDs(mine)))
	}
	switch {
	case err == nil:
		if len(mine) == 0 {
			problems = append(problems, fmt.Sprintf("SUCCEEDED WITHOUT EFFECT: the call returned %q, the ledger has no successful effect under its key", id))
		} else if id != "" && !containsEffect(mine, id) {
			problems = append(problems, fmt.Sprintf("SUCCEEDED ON ANOTHER EFFECT: returned %q, the operation's effect is %v", id, effectIDs(mine)))
		}
	case isUnknown(err):
		// allowed
	default:
		if len(mine) > 0 {
			problems = append(problems, fmt.Sprintf("REPORTED %v WHILE ITS EFFECT EXISTS: %v", err, effectIDs(mine)))
		}
		rec, gerr := f.store.Get(context.Background(), c.storeID(opID))
		if gerr == nil && rec.State == keystore.StateSucceeded {
			problems = append(problems, "the call failed but the record says succeeded")
		}
	}
	return problems
}

func effectIDs(es []pagpolartest.Effect) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	sort.Strings(out)
	return out
}

func containsEffect(es []pagpolartest.Effect, id string) bool {
	for _, e := range es {
		if e.ID == id {
			return true
		}
	}
	return false
}

// The client clock's offset must not matter (SAFETY rule 12): the same
// cases with the client's clock 3 s and 5 min ahead and behind the API's
// (and the store's), warm and cold.
func TestSafetyRule12_ClientClockOffsets(t *testing.T) {
	for _, off := range []time.Duration{3 * time.Second, -3 * time.Second, 5 * time.Minute, -5 * time.Minute} {
		t.Run(off.String(), func(t *testing.T) {
			t.Parallel()
			var wg sync.WaitGroup
			sem := make(chan struct{}, 12)
			n := 0
			for _, r := range routes {
				for _, fc := range shapeFaults {
					if fc.fault.Action == pagpolartest.FaultDecline && !r.card {
						continue
					}
					n++
					for _, cold := range coldOrWarm(n) {
						wg.Go(func() {
							sem <- struct{}{}
							defer func() { <-sem }()
							_, _, problems := runShapeCase(t, nil, r, fc, cold, off)
							for _, p := range problems {
								t.Errorf("%s/%s/%s/cold=%v: %s", off, r.name, fc.name, cold, p)
							}
						})
					}
				}
			}
			wg.Wait()
		})
	}
}

// offsetClock is the fake's clock seen from a client whose clock is off.
type offsetClock struct {
	base *pagpolartest.Clock
	off  time.Duration
}

func (c offsetClock) Now() time.Time                         { return c.base.Now().Add(c.off) }
func (c offsetClock) After(d time.Duration) <-chan time.Time { return c.base.After(d) }
