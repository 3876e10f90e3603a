package pagpolar

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
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
	// The fixture's 20 s bound the setup and both calls together; with
	// every shape at once under -race on two cores it ran out in the
	// setup's lookups. The settle waits keep their own bounds.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	f.ctx = ctx
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

// Shapes of answers nobody documented, each driven through a PIX charge,
// cold (a pre-send snapshot) and warm (none), with no fault (the 2xx is
// checked) and with faults that commit, release the key and lose the
// answer (so any resend on a guess creates a second sale).
func TestShapes_UndocumentedAnswers(t *testing.T) {
	cases := []struct {
		name string
		rw   answerRewrite
	}{
		// 2xx answers to the charge.
		{"202-processing", onPixAnswer(func(resp *http.Response, b []byte) []byte {
			resp.StatusCode = http.StatusAccepted
			return editObjects(b, func(m map[string]any) { m["status"] = "processing" })
		})},
		{"200-empty-object", onPixAnswer(func(resp *http.Response, b []byte) []byte { resp.StatusCode = 200; return []byte("{}") })},
		{"204-no-content", onPixAnswer(func(resp *http.Response, b []byte) []byte { resp.StatusCode = 204; return nil })},
		{"201-location-only", onPixAnswer(func(resp *http.Response, b []byte) []byte {
			var s struct{ Identifier string }
			_ = json.Unmarshal(b, &s)
			resp.Header.Set("Location", "/sales/"+s.Identifier)
			return nil
		})},
		{"200-html", onPixAnswer(func(resp *http.Response, b []byte) []byte {
			resp.StatusCode = 200
			resp.Header.Set("Content-Type", "text/html")
			return []byte("<html><body>OK</body></html>")
		})},
		{"wrapped-in-data", onPixAnswer(func(resp *http.Response, b []byte) []byte { return mustMarshal(map[string]json.RawMessage{"data": b}) })},
		{"303-after-commit", onPixAnswer(func(resp *http.Response, b []byte) []byte {
			resp.StatusCode = http.StatusSeeOther
			resp.Header.Set("Location", "/sales?external_reference=x")
			return nil
		})},
		{"huge-answer", onPixAnswer(func(resp *http.Response, b []byte) []byte {
			return editObjects(b, func(m map[string]any) { m["receipt_pdf"] = strings.Repeat("A", 5<<20) })
		})},
		// Statuses in another language or case, in the answer and the lists.
		{"status-PAGO", editSales(func(m map[string]any) { m["status"] = "PAGO" })},
		{"status-pendente", editSales(func(m map[string]any) { m["status"] = "pendente" })},
		{"status-Aprovado", editSales(func(m map[string]any) { m["status"] = "Aprovado" })},
		{"status-SUCCEEDED", editSales(func(m map[string]any) { m["status"] = "SUCCEEDED" })},
		// Times and identifiers in other forms.
		{"created-epoch-millis", editSales(func(m map[string]any) {
			if s, ok := m["created_at"].(string); ok {
				if ts, err := time.Parse(time.RFC3339Nano, s); err == nil {
					m["created_at"] = ts.UnixMilli()
				}
			}
		})},
		{"created-without-zone", editSales(func(m map[string]any) {
			if s, ok := m["created_at"].(string); ok {
				if ts, err := time.Parse(time.RFC3339Nano, s); err == nil {
					m["created_at"] = ts.Format("2006-01-02 15:04:05")
				}
			}
		})},
		{"amount-object", editSales(func(m map[string]any) { m["amount"] = map[string]any{"value": m["amount"], "currency": "BRL"} })},
		// Lists wrapped or paged otherwise.
		{"list-data-items", onSales(func(items []json.RawMessage, _ *http.Response) []byte {
			return mustMarshal(map[string]any{"data": map[string]any{"items": items}})
		})},
		{"list-bare-array", onSales(func(items []json.RawMessage, _ *http.Response) []byte { return mustMarshal(items) })},
		{"list-has-more-no-cursor", onSales(func(items []json.RawMessage, _ *http.Response) []byte {
			return mustMarshal(map[string]any{"results": items, "next": nil, "has_more": true})
		})},
		{"list-total-mismatch", onSales(func(items []json.RawMessage, _ *http.Response) []byte {
			return mustMarshal(map[string]any{"data": items, "total": len(items) + 1})
		})},
		{"list-filter-ignored", onSales(func(items []json.RawMessage, _ *http.Response) []byte {
			other := json.RawMessage(`{"identifier":"sale_other","status":"paid","external_reference":"someone-else","payment_method":"pix","amount":4990,"offer_identifier":"offer-basic","created_at":"2020-01-01T00:00:00Z"}`)
			return mustMarshal(map[string]any{"data": append([]json.RawMessage{other}, items...)})
		})},
		{"list-404-when-empty", onSales(func(items []json.RawMessage, resp *http.Response) []byte {
			if len(items) > 0 {
				return mustMarshal(map[string]any{"data": items})
			}
			resp.StatusCode = http.StatusNotFound
			return []byte(`{"code":"not_found","message":"Nenhuma venda encontrada"}`)
		})},
		{"list-null-when-empty", onSales(func(items []json.RawMessage, _ *http.Response) []byte {
			if len(items) > 0 {
				return mustMarshal(map[string]any{"data": items})
			}
			return []byte(`{"data":null}`)
		})},
		{"list-next-repeats-page", onSales(func(items []json.RawMessage, resp *http.Response) []byte {
			return mustMarshal(map[string]any{"data": items, "links": map[string]any{"next": "/v1/sales?external_reference=x&page=2"}})
		})},
		{"list-huge", onSales(func(items []json.RawMessage, _ *http.Response) []byte {
			return mustMarshal(map[string]any{"data": items, "debug": strings.Repeat("x", 5<<20)})
		})},
	}
	faults := []struct {
		name  string
		fault *pagpolartest.Fault
	}{
		{"none", nil},
		{"CommitDropRelease", &pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitDropRelease, Times: 1}},
		{"Gateway504AfterCommit", &pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultGatewayAfterCommit, Status: 504, Times: 1}},
		{"CommitThen500", &pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThen500, Times: 1}},
	}
	n := 0
	for _, tc := range cases {
		for _, fc := range faults {
			n++
			for _, warm := range coldOrWarm(n) {
				t.Run(fmt.Sprintf("%s/%s/warm=%v", tc.name, fc.name, warm), func(t *testing.T) {
					t.Parallel()
					f := newFixture(t, nil)
					c := proxiedClient(t, f, answerProxy(t, f, tc.rw))
					if warm {
						warmClock(f, c)
					}
					if fc.fault != nil {
						f.srv.Inject(*fc.fault)
					}
					ch, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-unseen", Customer: goodCustomer})
					id := ""
					if err == nil {
						id = ch.Sale.ID
					}
					report(t, f, c, "pix:order-unseen", id, err)
				})
			}
		}
	}
}
