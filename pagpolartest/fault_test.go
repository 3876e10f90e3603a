package pagpolartest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// Each FaultAction, proven from the client side: what a plain net/http
// client sees, and what the ledger holds.

// lastLog returns the last request the server logged.
func lastLog(t testing.TB, s *Server) RequestLog {
	t.Helper()
	reqs := s.Ledger().Requests
	if len(reqs) == 0 {
		t.Fatal("no request logged")
	}
	return reqs[len(reqs)-1]
}

func wantSales(t testing.TB, s *Server, n int) []LedgerSale {
	t.Helper()
	sales := s.Ledger().Sales
	if len(sales) != n {
		t.Fatalf("ledger holds %d sales, want %d: %+v", len(sales), n, sales)
	}
	return sales
}

func TestFaultCommitThenDrop(t *testing.T) {
	s := NewServer(t)
	c := newClient(t, s)
	s.Inject(Fault{Route: "pix", Times: 1, Action: FaultCommitThenDrop})
	wantDropped(t, c.pix("k1", "order-1"))
	if l := lastLog(t, s); !l.Dropped || l.Status != 0 || l.Fault != "commit_then_drop" {
		t.Fatalf("request log %+v", l)
	}
	sales := wantSales(t, s, 1)
	if sales[0].Key != "k1" || sales[0].ExternalReference != "order-1" {
		t.Fatalf("sale %+v", sales[0])
	}
	// The 2xx was stored: the same key replays it, nothing more is created.
	r := c.pix("k1", "order-1")
	want(t, r, 201)
	if !r.replayed() || decode[wire.Sale](t, r).Identifier != sales[0].Identifier {
		t.Fatalf("want a replay of the dropped sale, got %s", r.body)
	}
	wantSales(t, s, 1)
	checkLog(t, s, c)
}

func TestFaultCommitDropRelease(t *testing.T) {
	s := NewServer(t)
	c := newClient(t, s)
	s.Inject(Fault{Route: "pix", Times: 1, Action: FaultCommitDropRelease})
	wantDropped(t, c.pix("k1", "order-1"))
	wantSales(t, s, 1)
	if got := c.salesByRef("order-1"); len(got) != 1 {
		t.Fatalf("lookup finds %d sales, want the committed one", len(got))
	}
	// The key was released: a blind resend charges again.
	r := c.pix("k1", "order-1")
	if want(t, r, 201); r.replayed() {
		t.Fatal("replayed: the key should have been released")
	}
	wantSales(t, s, 2)
	if d := s.Ledger().Duplicates(DefaultGroup); len(d) != 1 {
		t.Fatalf("Duplicates: %v", d)
	}
	checkLog(t, s, c)
}

func TestFaultDropBeforeProcessing(t *testing.T) {
	s := NewServer(t)
	c := newClient(t, s)
	s.Inject(Fault{Route: "pix", ExternalReference: "order-1", Times: 1, Action: FaultDropBeforeProcessing})
	wantDropped(t, c.pix("k1", "order-1"))
	wantSales(t, s, 0)
	if l := lastLog(t, s); !l.Dropped || l.Fault != "drop_before_processing" || l.ExternalReference != "order-1" {
		t.Fatalf("request log %+v", l)
	}
	r := c.pix("k1", "order-1")
	if want(t, r, 201); r.replayed() {
		t.Fatal("key was registered by a dropped request")
	}
	wantSales(t, s, 1)
	checkLog(t, s, c)
}

func TestFaultCommitThen500(t *testing.T) {
	s := NewServer(t)
	c := newClient(t, s)
	s.Inject(Fault{Route: "pix", Times: 1, Action: FaultCommitThen500})
	wantError(t, c.pix("k1", "order-1"), 500, wire.CodeInternal)
	wantSales(t, s, 1)
	r := c.pix("k1", "order-1")
	if want(t, r, 201); r.replayed() {
		t.Fatal("key not released after 500")
	}
	wantSales(t, s, 2)
	checkLog(t, s, c)
}

func TestFaultCommitThen500After(t *testing.T) {
	s := NewServer(t)
	c := newClient(t, s)
	s.Inject(Fault{Route: "pix", Times: 1, Action: FaultCommitThen500After, Delay: 30 * time.Second})
	first := async(func() resp { return c.pix("k1", "order-1") })
	waitHolds(t, s, 1)
	// Committed at t: the sale exists and lookups see it, while the key is
	// still in processing.
	wantSales(t, s, 1)
	if got := c.salesByRef("order-1"); len(got) != 1 {
		t.Fatalf("lookup during the delay: %d sales", len(got))
	}
	wantError(t, c.pix("k1", "order-1"), 409, wire.CodeInProgress)
	s.Clock.Advance(30 * time.Second)
	wantError(t, <-first, 500, wire.CodeInternal)
	// The 500 released the key: a resend is processed, a second charge.
	r := c.pix("k1", "order-1")
	if want(t, r, 201); r.replayed() {
		t.Fatal("key not released after the late 500")
	}
	wantSales(t, s, 2)
	checkLog(t, s, c)
}

func TestFault500NoCommit(t *testing.T) {
	s := NewServer(t)
	c := newClient(t, s)
	s.Inject(Fault{Route: "pix", Times: 1, Action: Fault500NoCommit})
	wantError(t, c.pix("k1", "order-1"), 500, wire.CodeInternal)
	wantSales(t, s, 0)
	r := c.pix("k1", "order-1")
	if want(t, r, 201); r.replayed() {
		t.Fatal("key not released")
	}
	wantSales(t, s, 1)
	// On a read route it is a plain 500.
	s.Inject(Fault{Route: "get_sales", Times: 1, Action: Fault500NoCommit})
	wantError(t, c.do("GET", wire.RouteSales+"?external_reference=order-1", noKey, ""), 500, wire.CodeInternal)
	if got := c.salesByRef("order-1"); len(got) != 1 {
		t.Fatalf("lookup after the fault: %d sales", len(got))
	}
	checkLog(t, s, c)
}

func TestFaultHold(t *testing.T) {
	s := NewServer(t)
	c := newClient(t, s)
	s.Inject(Fault{Route: "pix", Times: 1, Action: FaultHold, Delay: 30 * time.Second})
	first := async(func() resp { return c.pix("k1", "order-1") })
	waitHolds(t, s, 1)
	wantSales(t, s, 0) // held before processing
	if got := c.salesByRef("order-1"); len(got) != 0 {
		t.Fatalf("lookup during the hold: %d sales", len(got))
	}
	wantError(t, c.pix("k1", "order-1"), 409, wire.CodeInProgress)
	s.Clock.Advance(30 * time.Second)
	r := <-first
	want(t, r, 201)
	wantSales(t, s, 1)
	again := c.pix("k1", "order-1")
	if want(t, again, 201); !again.replayed() {
		t.Fatal("no replay after the hold")
	}
	checkLog(t, s, c)
}

// TestFaultHoldLongerThanMark: a hold past the 60 s mark lets a same-key
// request be processed while the held one still commits: two sales.
func TestFaultHoldLongerThanMark(t *testing.T) {
	s := NewServer(t)
	c := newClient(t, s)
	s.Inject(Fault{Route: "pix", Times: 1, Action: FaultHold, Delay: 90 * time.Second})
	first := async(func() resp { return c.pix("k1", "order-1") })
	waitHolds(t, s, 1)
	s.Clock.Advance(61 * time.Second)
	want(t, c.pix("k1", "order-1"), 201)
	s.Clock.Advance(29 * time.Second)
	want(t, <-first, 201)
	wantSales(t, s, 2)
	if d := s.Ledger().Duplicates(DefaultGroup); len(d) != 1 {
		t.Fatalf("Duplicates: %v", d)
	}
	checkLog(t, s, c)
}

// TestFaultHoldClientGivesUp: the hold goes on after the client gave up,
// as a real server's processing would, and commits.
func TestFaultHoldClientGivesUp(t *testing.T) {
	s := NewServer(t)
	c := newClient(t, s)
	s.Inject(Fault{Route: "pix", Times: 1, Action: FaultHold, Delay: 30 * time.Second})
	logged := make(chan RequestLog, 1)
	s.OnRequest(func(l RequestLog) {
		select {
		case logged <- l:
		default:
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	first := async(func() resp { return c.doCtx(ctx, "POST", wire.RoutePix, "k1", pixBody("offer-basic", "o")) })
	waitHolds(t, s, 1)
	cancel()
	wantDropped(t, <-first)
	s.Clock.Advance(30 * time.Second)
	if l := <-logged; l.Status != 201 || l.Fault != "hold" {
		t.Fatalf("held request ended with %+v", l)
	}
	wantSales(t, s, 1)
	r := c.pix("k1", "o")
	if want(t, r, 201); !r.replayed() {
		t.Fatal("the abandoned request's answer was not stored for replay")
	}
}

func TestFaultLookupLag(t *testing.T) {
	s := NewServer(t)
	c := newClient(t, s)
	s.Inject(Fault{Route: "credit_card", Times: 1, Action: FaultLookupLag, Delay: 10 * time.Second})
	r := c.do("POST", wire.RouteCreditCard, "k1", cardBody("offer-basic", "order-1", "tok_ok"))
	want(t, r, 201)
	sale := decode[wire.Sale](t, r)
	wantSales(t, s, 1)
	if got := c.salesByRef("order-1"); len(got) != 0 {
		t.Fatalf("lagged sale visible to the list lookup: %+v", got)
	}
	want(t, c.do("GET", "/sales/"+sale.Identifier, noKey, ""), 200)

	// A lagged refund is invisible to the refund list.
	s.Inject(Fault{Route: "refund", Times: 1, Action: FaultLookupLag, Delay: 10 * time.Second})
	want(t, c.do("POST", wire.RouteRefunds, "rk", refundBody(sale.Identifier, 500)), 201)
	rr := c.do("GET", wire.RouteRefunds+"?sale_identifier="+sale.Identifier, noKey, "")
	want(t, rr, 200)
	if got := decode[wire.List[wire.Refund]](t, rr).Data; len(got) != 0 {
		t.Fatalf("lagged refund visible: %+v", got)
	}

	// A lagged subscription is invisible to the subscription lookup.
	s.Inject(Fault{Route: "subscribe", Times: 1, Action: FaultLookupLag, Delay: 10 * time.Second})
	want(t, c.do("POST", "/plans/offer/plan-basic/subscribe", "sk", subscribeBody("sub-ref", wire.MethodCreditCard, "tok_ok")), 201)
	sr := c.do("GET", wire.RouteSubscriptions+"?external_reference=sub-ref", noKey, "")
	want(t, sr, 200)
	if got := decode[wire.List[wire.Subscription]](t, sr).Data; len(got) != 0 {
		t.Fatalf("lagged subscription visible: %+v", got)
	}

	s.Clock.Advance(10 * time.Second)
	if got := c.salesByRef("order-1"); len(got) != 1 || got[0].Identifier != sale.Identifier {
		t.Fatalf("after the lag: %+v", got)
	}
	rr = c.do("GET", wire.RouteRefunds+"?sale_identifier="+sale.Identifier, noKey, "")
	if got := decode[wire.List[wire.Refund]](t, rr).Data; len(got) != 1 {
		t.Fatalf("refund after the lag: %+v", got)
	}
	sr = c.do("GET", wire.RouteSubscriptions+"?external_reference=sub-ref", noKey, "")
	if got := decode[wire.List[wire.Subscription]](t, sr).Data; len(got) != 1 {
		t.Fatalf("subscription after the lag: %+v", got)
	}
	checkLog(t, s, c)
}

func TestFaultGateway(t *testing.T) {
	for _, st := range []int{502, 503, 504, 0} {
		s := NewServer(t)
		c := newClient(t, s)
		s.Inject(Fault{Route: "pix", Times: 1, Action: FaultGateway, Status: st})
		r := c.pix("k1", "order-1")
		wantStatus := st
		if st == 0 {
			wantStatus = 502
		}
		want(t, r, wantStatus)
		if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") || !strings.Contains(string(r.body), "<html>") {
			t.Fatalf("gateway answer is not HTML: %s %s", ct, r.body)
		}
		wantSales(t, s, 0)
		if r := c.pix("k1", "order-1"); r.replayed() || r.status != 201 {
			t.Fatalf("after the gateway error: %d replayed=%v", r.status, r.replayed())
		}
		checkLog(t, s, c)
	}
}

func TestFaultGatewayAfterCommit(t *testing.T) {
	s := NewServer(t)
	c := newClient(t, s)
	s.Inject(Fault{Route: "pix", Times: 1, Action: FaultGatewayAfterCommit, Status: 504})
	r := c.pix("k1", "order-1")
	want(t, r, 504)
	if !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
		t.Fatalf("not HTML: %s", r.body)
	}
	wantSales(t, s, 1)
	if r := c.pix("k1", "order-1"); r.replayed() {
		t.Fatal("key not released")
	}
	wantSales(t, s, 2)
	checkLog(t, s, c)
}

func TestFaultRateLimit(t *testing.T) {
	s := NewServer(t)
	c := newClient(t, s)
	s.Inject(Fault{Route: "pix", Times: 2, Action: FaultRateLimit, Delay: 7 * time.Second})
	// Before validation: even an invalid body gets the 429.
	r := c.do("POST", wire.RoutePix, noKey, `{not json`)
	wantError(t, r, 429, wire.CodeRateLimited)
	if got := r.header.Get(wire.HeaderRetryAfter); got != "7" {
		t.Fatalf("Retry-After %q, want 7", got)
	}
	wantError(t, c.pix("k1", "o"), 429, wire.CodeRateLimited)
	r = c.pix("k1", "o")
	if want(t, r, 201); r.replayed() {
		t.Fatal("key registered by a 429")
	}
	checkLog(t, s, c)
}

func TestFaultUnavailable(t *testing.T) {
	s := NewServer(t)
	c := newClient(t, s)
	s.Inject(Fault{Times: 1, Action: FaultUnavailable}) // any money route
	r := c.pix("k1", "o")
	wantError(t, r, 503, wire.CodeUnavailable)
	if r.header.Get(wire.HeaderRetryAfter) != "1" {
		t.Fatalf("Retry-After %q", r.header.Get(wire.HeaderRetryAfter))
	}
	wantSales(t, s, 0)
	if r := c.pix("k1", "o"); r.status != 201 || r.replayed() {
		t.Fatalf("after 503: %d replayed=%v", r.status, r.replayed())
	}
	// A fault without Route does not apply to reads.
	s.Inject(Fault{Action: FaultUnavailable})
	want(t, c.do("GET", wire.RouteSales+"?external_reference=o", noKey, ""), 200)
	checkLog(t, s, c)
}

func TestFaultLatency(t *testing.T) {
	s := NewServer(t)
	c := newClient(t, s)
	s.Inject(Fault{Route: "pix", Times: 2, Action: FaultLatency, Delay: 5 * time.Second})
	first := async(func() resp { return c.pix("k1", "o") })
	waitHolds(t, s, 1)
	if n := len(s.Ledger().Requests); n != 0 {
		t.Fatalf("%d requests finished during the latency", n)
	}
	s.Clock.Advance(5 * time.Second)
	want(t, <-first, 201)
	if l := lastLog(t, s); l.Fault != "latency" {
		t.Fatalf("log %+v", l)
	}

	// A client that gives up during the latency sent a request never processed.
	ctx, cancel := context.WithCancel(context.Background())
	second := async(func() resp { return c.doCtx(ctx, "POST", wire.RoutePix, "k2", pixBody("offer-basic", "o2")) })
	waitHolds(t, s, 1)
	cancel()
	wantDropped(t, <-second)
	waitHolds(t, s, 0)
	wantSales(t, s, 1)
}

func TestFaultDecline(t *testing.T) {
	s := NewServer(t)
	c := newClient(t, s)
	s.Inject(Fault{Times: 1, Action: FaultDecline})
	// Not a card payment: the decline does not match a PIX charge.
	want(t, c.pix("p1", "order-pix"), 201)
	wantError(t, c.do("POST", wire.RouteCreditCard, "k1", cardBody("offer-basic", "order-1", "tok_ok")), 402, wire.CodeDeclined)
	got := c.salesByRef("order-1")
	if len(got) != 1 || got[0].Status != wire.SaleStatusDeclined {
		t.Fatalf("declined sale not visible: %+v", got)
	}
	r := c.do("POST", wire.RouteCreditCard, "k1", cardBody("offer-basic", "order-1", "tok_ok"))
	if want(t, r, 201); r.replayed() {
		t.Fatal("key not released after the decline")
	}
	got = c.salesByRef("order-1")
	if len(got) != 2 || got[0].Status != wire.SaleStatusDeclined || got[1].Status != wire.SaleStatusPaid {
		t.Fatalf("sales oldest first: %+v", got)
	}
	if d := s.Ledger().Duplicates(DefaultGroup); len(d) != 0 {
		t.Fatalf("a decline counted as an effect: %v", d)
	}
	// A card subscription declines too.
	s.Inject(Fault{Route: "subscribe", Times: 1, Action: FaultDecline})
	wantError(t, c.do("POST", "/plans/offer/plan-pro/subscribe", "s1", subscribeBody("sub-1", wire.MethodCreditCard, "tok_ok")), 402, wire.CodeDeclined)
	if l := s.Ledger(); len(l.Subscriptions) != 0 || l.Sales[len(l.Sales)-1].Status != wire.SaleStatusDeclined {
		t.Fatalf("declined subscribe: %+v", l.Subscriptions)
	}
	checkLog(t, s, c)
}
