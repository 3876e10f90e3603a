package pagpolartest

import (
	"strings"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

func TestSubscribeAndRenew(t *testing.T) {
	s := NewServer(t)
	c := newClient(t, s)
	var events []string
	s.OnEvent(func(e Event) { events = append(events, e.Name) })

	r := c.do("POST", "/plans/offer/plan-basic/subscribe", "s1", subscribeBody("sub-order-1", wire.MethodCreditCard, "tok_ok"))
	want(t, r, 201)
	sub := decode[wire.Subscription](t, r)
	if !strings.HasPrefix(sub.ID, "sub_") || sub.Status != wire.SubscriptionStatusActive || sub.Amount != 2990 ||
		sub.OfferIdentifier != "plan-basic" || sub.ExternalReference != "sub-order-1" || sub.NextBillingAt == "" {
		t.Fatalf("subscription %+v", sub)
	}
	first := c.salesByRef("sub-order-1")
	if len(first) != 1 || first[0].SubscriptionID != sub.ID || first[0].Status != wire.SaleStatusPaid || first[0].Amount != 2990 {
		t.Fatalf("first sale %+v", first)
	}

	renewal, err := s.Renew(sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	if renewal.Identifier == first[0].Identifier || renewal.SubscriptionID != sub.ID || renewal.ExternalReference != "sub-order-1" {
		t.Fatalf("renewal %+v", renewal)
	}
	sales := c.salesByRef("sub-order-1")
	if len(sales) != 2 || sales[0].Identifier != first[0].Identifier || sales[1].Identifier != renewal.Identifier {
		t.Fatalf("sales by reference, oldest first: %+v", sales)
	}
	g := c.do("GET", "/subscriptions/"+sub.ID, noKey, "")
	want(t, g, 200)
	after := decode[wire.Subscription](t, g)
	t0, _ := time.Parse(time.RFC3339Nano, sub.NextBillingAt)
	t1, _ := time.Parse(time.RFC3339Nano, after.NextBillingAt)
	if !t1.After(t0) {
		t.Fatalf("next_billing_at did not advance: %s → %s", sub.NextBillingAt, after.NextBillingAt)
	}
	l := s.Ledger()
	if !l.Sales[1].Renewal || l.Sales[1].Key != "" || l.Sales[0].Renewal {
		t.Fatalf("ledger renewal flags: %+v", l.Sales)
	}
	if d := l.Duplicates(DefaultGroup); len(d) != 0 {
		t.Fatalf("a renewal counted as a duplicate: %v", d)
	}
	if n := l.CountByKey("s1"); n != 1 {
		t.Fatalf("CountByKey(subscribe) = %d, want 1", n)
	}
	wantEvents := []string{
		wire.EventSubscriptionCreated, wire.EventTransactionCreated, wire.EventTransactionPaid,
		wire.EventSubscriptionRenewed, wire.EventTransactionCreated, wire.EventTransactionPaid,
	}
	if strings.Join(events, ",") != strings.Join(wantEvents, ",") {
		t.Fatalf("events %v, want %v", events, wantEvents)
	}
	if n := len(s.Events()); n != len(wantEvents) {
		t.Fatalf("Events() has %d", n)
	}
	if _, err := s.Renew("sub_nope"); err == nil {
		t.Fatal("Renew of an unknown subscription succeeded")
	}
	checkLog(t, s, c)
}

func TestPixSubscriptionPendingThenPaid(t *testing.T) {
	s := NewServer(t)
	c := newClient(t, s)
	r := c.do("POST", "/plans/offer/plan-pro/subscribe", "s1", subscribeBody("sub-2", wire.MethodPix, ""))
	want(t, r, 201)
	sub := decode[wire.Subscription](t, r)
	if sub.Status != wire.SubscriptionStatusPending {
		t.Fatalf("pix subscription status %q", sub.Status)
	}
	sales := c.salesByRef("sub-2")
	if len(sales) != 1 || sales[0].Status != wire.SaleStatusPending || sales[0].Pix == nil {
		t.Fatalf("sales %+v", sales)
	}
	if err := s.Pay(sales[0].Identifier); err != nil {
		t.Fatal(err)
	}
	if err := s.Pay(sales[0].Identifier); err == nil {
		t.Fatal("paying a paid sale succeeded")
	}
	if err := s.Pay("sale_nope"); err == nil {
		t.Fatal("paying an unknown sale succeeded")
	}
	g := c.do("GET", "/subscriptions/"+sub.ID, noKey, "")
	if got := decode[wire.Subscription](t, g); got.Status != wire.SubscriptionStatusActive {
		t.Fatalf("after payment: %q", got.Status)
	}
	if got := c.salesByRef("sub-2"); got[0].Status != wire.SaleStatusPaid {
		t.Fatalf("sale after Pay: %q", got[0].Status)
	}
	ev := s.Events()
	if last := ev[len(ev)-1]; last.Name != wire.EventTransactionPaid || last.Transaction.Identifier != sales[0].Identifier || last.CredentialID != s.CredentialID {
		t.Fatalf("last event %+v", last)
	}
}

func TestPlanChange(t *testing.T) {
	s := NewServer(t)
	c := newClient(t, s)
	r := c.do("POST", "/plans/offer/plan-basic/subscribe", "s1", subscribeBody("sub-3", wire.MethodCreditCard, "tok_ok"))
	want(t, r, 201)
	sub := decode[wire.Subscription](t, r)
	path := "/subscriptions/" + sub.ID + "/plan-change"

	r = c.do("POST", path, "pc1", `{"offer_identifier":"plan-pro"}`)
	want(t, r, 200)
	pc := decode[wire.PlanChange](t, r)
	if !strings.HasPrefix(pc.ID, "pc_") || pc.FromOfferIdentifier != "plan-basic" || pc.OfferIdentifier != "plan-pro" ||
		pc.SubscriptionID != sub.ID || pc.Status != wire.PlanChangeStatusApplied {
		t.Fatalf("plan change %+v", pc)
	}
	got := decode[wire.Subscription](t, c.do("GET", "/subscriptions/"+sub.ID, noKey, ""))
	if got.OfferIdentifier != "plan-pro" || got.Amount != 5990 || len(got.PlanChanges) != 1 || got.PlanChanges[0].ID != pc.ID {
		t.Fatalf("subscription after the change %+v", got)
	}
	wantError(t, c.do("POST", path, "pc2", `{"offer_identifier":"offer-basic"}`), 422, wire.CodeUnprocessable)
	wantError(t, c.do("POST", path, "pc3", `{"offer_identifier":"plan-pro"}`), 422, wire.CodeUnprocessable)
	wantError(t, c.do("POST", path, "pc4", `{"offer_identifier":"plan-nope"}`), 404, wire.CodeNotFound)
	wantError(t, c.do("POST", "/subscriptions/sub_nope/plan-change", "pc5", `{"offer_identifier":"plan-pro"}`), 404, wire.CodeNotFound)
	// Back to basic: a second change of the same subscription is fine.
	want(t, c.do("POST", path, "pc6", `{"offer_identifier":"plan-basic"}`), 200)

	renewal, err := s.Renew(sub.ID)
	if err != nil || renewal.Amount != 2990 || renewal.OfferIdentifier != "plan-basic" {
		t.Fatalf("renewal after the changes: %+v %v", renewal, err)
	}
	l := s.Ledger()
	if len(l.PlanChanges) != 2 || l.PlanChanges[0].Key != "pc1" || l.PlanChanges[1].Key != "pc6" {
		t.Fatalf("ledger plan changes %+v", l.PlanChanges)
	}
	if len(l.Subscriptions) != 1 || len(l.Subscriptions[0].PlanChanges) != 2 {
		t.Fatalf("ledger subscription %+v", l.Subscriptions)
	}
	checkLog(t, s, c)
}

// TestLaggedPlanChange: a lagged plan change is missing from the
// subscription's plan_changes (the lookup that settles a lost answer).
func TestLaggedPlanChange(t *testing.T) {
	s := NewServer(t)
	c := newClient(t, s)
	sub := decode[wire.Subscription](t, c.do("POST", "/plans/offer/plan-basic/subscribe", "s1", subscribeBody("x", wire.MethodCreditCard, "tok")))
	s.Inject(Fault{Route: "plan_change", ExternalReference: sub.ID, Times: 1, Action: FaultLookupLag, Delay: time.Minute})
	want(t, c.do("POST", "/subscriptions/"+sub.ID+"/plan-change", "pc1", `{"offer_identifier":"plan-pro"}`), 200)
	got := decode[wire.Subscription](t, c.do("GET", "/subscriptions/"+sub.ID, noKey, ""))
	if len(got.PlanChanges) != 0 || got.OfferIdentifier != "plan-basic" {
		t.Fatalf("lagged change visible: %+v", got)
	}
	s.Clock.Advance(time.Minute)
	got = decode[wire.Subscription](t, c.do("GET", "/subscriptions/"+sub.ID, noKey, ""))
	if len(got.PlanChanges) != 1 || got.OfferIdentifier != "plan-pro" {
		t.Fatalf("after the lag: %+v", got)
	}
}

func TestPartialRefunds(t *testing.T) {
	s := NewServer(t)
	c := newClient(t, s)
	r := c.do("POST", wire.RouteCreditCard, "c1", cardBody("offer-basic", "order-r", "tok_ok"))
	want(t, r, 201)
	sale := decode[wire.Sale](t, r)

	rf := decode[wire.Refund](t, c.do("POST", wire.RouteRefunds, "r1", refundBody(sale.Identifier, 1000)))
	if !strings.HasPrefix(rf.Identifier, "rf_") || rf.Status != wire.RefundStatusCompleted || rf.Amount != 1000 {
		t.Fatalf("refund %+v", rf)
	}
	want(t, c.do("POST", wire.RouteRefunds, "r2", refundBody(sale.Identifier, 2000)), 201)
	got := decode[wire.Sale](t, c.do("GET", "/sales/"+sale.Identifier, noKey, ""))
	if got.Status != wire.SaleStatusPartiallyRefunded || got.RefundedAmount != 3000 {
		t.Fatalf("after two partial refunds %+v", got)
	}
	e := wantError(t, c.do("POST", wire.RouteRefunds, "r3", refundBody(sale.Identifier, 7000)), 422, wire.CodeRefundTooLarge)
	if !strings.Contains(e.Message, "amount") {
		t.Fatalf("message %q does not name the field", e.Message)
	}
	want(t, c.do("POST", wire.RouteRefunds, "r3", refundBody(sale.Identifier, 6990)), 201) // key released by the 422
	got = decode[wire.Sale](t, c.do("GET", "/sales/"+sale.Identifier, noKey, ""))
	if got.Status != wire.SaleStatusRefunded || got.RefundedAmount != 9990 {
		t.Fatalf("after the full refund %+v", got)
	}
	wantError(t, c.do("POST", wire.RouteRefunds, "r4", refundBody(sale.Identifier, 1)), 422, wire.CodeUnprocessable)
	list := decode[wire.List[wire.Refund]](t, c.do("GET", wire.RouteRefunds+"?sale_identifier="+sale.Identifier, noKey, ""))
	if len(list.Data) != 3 {
		t.Fatalf("refund list %+v", list.Data)
	}
	var sum int64
	for _, rf := range s.Ledger().Refunds {
		sum += rf.Amount
	}
	if sum != sale.Amount {
		t.Fatalf("refunds sum %d, sale %d", sum, sale.Amount)
	}

	// Pending, declined and unknown sales cannot be refunded.
	pending := decode[wire.Sale](t, c.pix("p1", "order-p"))
	wantError(t, c.do("POST", wire.RouteRefunds, "r5", refundBody(pending.Identifier, 1)), 422, wire.CodeUnprocessable)
	wantError(t, c.do("POST", wire.RouteCreditCard, "c2", cardBody("offer-basic", "order-d", "tok_decline")), 402, wire.CodeDeclined)
	declined := c.salesByRef("order-d")[0]
	wantError(t, c.do("POST", wire.RouteRefunds, "r6", refundBody(declined.Identifier, 1)), 422, wire.CodeUnprocessable)
	wantError(t, c.do("POST", wire.RouteRefunds, "r7", refundBody("sale_nope", 1)), 404, wire.CodeNotFound)
	wantError(t, c.do("GET", wire.RouteRefunds+"?sale_identifier=sale_nope", noKey, ""), 404, wire.CodeNotFound)
	checkLog(t, s, c)
}

func TestBusinessErrors(t *testing.T) {
	s := NewServer(t)
	c := newClient(t, s)
	wantError(t, c.do("POST", wire.RoutePix, "a", pixBody("offer-nope", "o")), 404, wire.CodeNotFound)
	wantError(t, c.do("POST", "/plans/offer/offer-basic/subscribe", "b", subscribeBody("o", wire.MethodPix, "")), 422, wire.CodeUnprocessable)
	wantError(t, c.do("POST", "/plans/offer/nope/subscribe", "c", subscribeBody("o", wire.MethodPix, "")), 404, wire.CodeNotFound)
	wantError(t, c.do("GET", "/sales/sale_nope", noKey, ""), 404, wire.CodeNotFound)
	wantError(t, c.do("GET", "/subscriptions/sub_nope", noKey, ""), 404, wire.CodeNotFound)
	wantError(t, c.do("GET", wire.RouteSales, noKey, ""), 400, wire.CodeValidation)
	wantError(t, c.do("GET", wire.RouteRefunds, noKey, ""), 400, wire.CodeValidation)
	wantError(t, c.do("GET", wire.RouteSubscriptions, noKey, ""), 400, wire.CodeValidation)
	if got := c.salesByRef("nothing-here"); len(got) != 0 {
		t.Fatalf("%+v", got)
	}
	s.AddOffer(Offer{ID: "offer-cheap", Amount: 150})
	if sl := decode[wire.Sale](t, c.do("POST", wire.RoutePix, "d", pixBody("offer-cheap", "o"))); sl.Amount != 150 {
		t.Fatalf("added offer: %+v", sl)
	}
	if n := len(s.Ledger().Sales); n != 1 {
		t.Fatalf("%d sales after business errors, want 1", n)
	}
	checkLog(t, s, c)
}

func TestWithoutSubscriptionLookup(t *testing.T) {
	s := NewServer(t, WithoutSubscriptionLookup())
	c := newClient(t, s)
	sub := decode[wire.Subscription](t, c.do("POST", "/plans/offer/plan-basic/subscribe", "s1", subscribeBody("x", wire.MethodPix, "")))
	wantError(t, c.do("GET", wire.RouteSubscriptions+"?external_reference=x", noKey, ""), 404, wire.CodeNotFound)
	want(t, c.do("GET", "/subscriptions/"+sub.ID, noKey, ""), 200) // the documented lookup still works
}

// TestOnEventMayCallServer: an OnEvent function may call the Server (here
// Pay) without deadlocking; its events follow in order.
func TestOnEventMayCallServer(t *testing.T) {
	s := NewServer(t)
	c := newClient(t, s)
	var names []string
	s.OnEvent(func(e Event) {
		names = append(names, e.Name)
		if e.Name == wire.EventTransactionCreated && e.Transaction.Status == wire.SaleStatusPending {
			if err := s.Pay(e.Transaction.Identifier); err != nil {
				t.Error(err)
			}
		}
	})
	r := c.pix("k1", "o")
	want(t, r, 201)
	if got := strings.Join(names, ","); got != "TRANSACTION_CREATED,TRANSACTION_PAID" {
		t.Fatalf("events %s", got)
	}
	if got := c.salesByRef("o"); got[0].Status != wire.SaleStatusPaid {
		t.Fatalf("sale %+v", got[0])
	}
}
