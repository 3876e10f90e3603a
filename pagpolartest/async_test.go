package pagpolartest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// decideAfter is long enough that real time never reaches it in a test:
// only Clock.Advance does.
const decideAfter = time.Hour

// eventNames returns the names of the server's events about id (a sale's
// identifier or a subscription's ID).
func eventNames(s *Server, id string) []string {
	var out []string
	for _, e := range s.Events() {
		if (e.Transaction != nil && e.Transaction.Identifier == id) || (e.Subscription != nil && e.Subscription.ID == id) {
			out = append(out, e.Name)
		}
	}
	return out
}

func wantNames(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: events %v, want %v", what, got, want)
	}
}

func TestAsync_CardSaleAnsweredUndecidedThenDecided(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cardStatus string // Async.CardStatus
		token      string
		decide     func(t *testing.T, s *Server, saleID string)
		wantStatus string
		wantEvent  string
	}{
		{"clock approves", "", "tok_ok", advanceDecide, wire.SaleStatusPaid, wire.EventTransactionPaid},
		{"clock declines tok_decline", wire.SaleStatusInAnalysis, "tok_decline_1", advanceDecide, wire.SaleStatusDeclined, wire.EventTransactionDeclined},
		{"Decide approves", wire.SaleStatusInAnalysis, "tok_ok", explicitDecide(true), wire.SaleStatusPaid, wire.EventTransactionPaid},
		{"Decide declines", "", "tok_ok", explicitDecide(false), wire.SaleStatusDeclined, wire.EventTransactionDeclined},
		{"Decide overrides tok_decline", "", "tok_decline_2", explicitDecide(true), wire.SaleStatusPaid, wire.EventTransactionPaid},
		{"an undocumented status", "under_review", "tok_ok", advanceDecide, wire.SaleStatusPaid, wire.EventTransactionPaid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewServer(t, WithAsync(Async{Cards: true, CardStatus: tc.cardStatus, DecideAfter: decideAfter}))
			c := newClient(t, s)
			undecided := tc.cardStatus
			if undecided == "" {
				undecided = wire.SaleStatusPending
			}
			r := c.do("POST", wire.RouteCreditCard, "k1", cardBody("offer-basic", "order-1", tc.token))
			want(t, r, 201)
			sale := decode[wire.Sale](t, r)
			if sale.Status != undecided {
				t.Fatalf("first answer status %q, want %q", sale.Status, undecided)
			}
			wantSaleStatus(t, c, sale.Identifier, "order-1", undecided)
			if st, und, ok := s.Ledger().StatusOf(sale.Identifier); !ok || st != undecided || !und {
				t.Fatalf("ledger before the decision: %q undecided=%v ok=%v", st, und, ok)
			}
			wantNames(t, "before the decision", eventNames(s, sale.Identifier), wire.EventTransactionCreated)

			tc.decide(t, s, sale.Identifier)

			wantSaleStatus(t, c, sale.Identifier, "order-1", tc.wantStatus)
			if st, und, _ := s.Ledger().StatusOf(sale.Identifier); st != tc.wantStatus || und {
				t.Fatalf("ledger after the decision: %q undecided=%v", st, und)
			}
			if err := s.Decide(sale.Identifier, true); !errors.Is(err, ErrDecided) {
				t.Fatalf("second Decide: %v, want ErrDecided", err)
			}
			s.Clock.Advance(2 * decideAfter) // nothing is decided twice
			wantNames(t, "after the decision", eventNames(s, sale.Identifier), wire.EventTransactionCreated, tc.wantEvent)
			// A replay answers the first answer, as documented.
			rr := c.do("POST", wire.RouteCreditCard, "k1", cardBody("offer-basic", "order-1", tc.token))
			if want(t, rr, 201); !rr.replayed() || decode[wire.Sale](t, rr).Status != undecided {
				t.Fatalf("replay %s", rr.body)
			}
			e := s.Ledger().Effects()[0]
			if e.Successful != (tc.wantStatus == wire.SaleStatusPaid) || e.Undecided {
				t.Fatalf("effect after the decision %+v", e)
			}
			checkLog(t, s, c)
		})
	}
}

func advanceDecide(t *testing.T, s *Server, _ string) {
	t.Helper()
	s.Clock.Advance(decideAfter - time.Minute)
	if l := s.Ledger(); len(l.Sales) > 0 && !l.Sales[0].Undecided {
		t.Fatal("decided before DecideAfter")
	}
	s.Clock.Advance(time.Minute)
}

func explicitDecide(approve bool) func(t *testing.T, s *Server, saleID string) {
	return func(t *testing.T, s *Server, saleID string) {
		t.Helper()
		if err := s.Decide(saleID, approve); err != nil {
			t.Fatal(err)
		}
	}
}

// wantSaleStatus checks both read routes.
func wantSaleStatus(t *testing.T, c *tclient, id, ref, status string) {
	t.Helper()
	g := c.do("GET", "/sales/"+id, noKey, "")
	want(t, g, 200)
	if got := decode[wire.Sale](t, g).Status; got != status {
		t.Fatalf("GET /sales/{id}: %q, want %q", got, status)
	}
	if list := c.salesByRef(ref); len(list) != 1 || list[0].Status != status {
		t.Fatalf("GET /sales?external_reference=: %+v, want one %q", list, status)
	}
}

func TestAsync_DecisionMadeAtItsDueTime(t *testing.T) {
	s := NewServer(t, WithAsync(Async{Cards: true, DecideAfter: decideAfter}))
	c := newClient(t, s)
	want(t, c.do("POST", wire.RouteCreditCard, "k1", cardBody("offer-basic", "o1", "tok_ok")), 201)
	s.Clock.Advance(3 * decideAfter)
	l := s.Ledger()
	d := l.Sales[0].Decision
	if !d.Async || d.Undecided || d.DecidedAt.IsZero() || !d.DecidedAt.Equal(d.DecideAt) || !d.DecideAt.Equal(l.Sales[0].CreatedAt.Add(decideAfter)) {
		t.Fatalf("decision %+v of a sale created at %v", d, l.Sales[0].CreatedAt)
	}
	ev := s.Events()
	if last := ev[len(ev)-1]; last.Name != wire.EventTransactionPaid || !last.At.Equal(d.DecideAt) {
		t.Fatalf("last event %s at %v, want TRANSACTION_PAID at %v", last.Name, last.At, d.DecideAt)
	}
}

func TestAsync_DecidedWithoutARequestWhenDue(t *testing.T) {
	s := NewServer(t, WithAsync(Async{Cards: true, DecideAfter: decideAfter}))
	c := newClient(t, s)
	paid := make(chan string, 4)
	s.OnEvent(func(e Event) {
		if e.Name == wire.EventTransactionPaid {
			paid <- e.Transaction.Identifier
		}
	})
	sale := decode[wire.Sale](t, c.do("POST", wire.RouteCreditCard, "k1", cardBody("offer-basic", "o1", "tok_ok")))
	s.Clock.Advance(decideAfter)
	select { // the server's decider delivers it: no request, no Ledger call
	case id := <-paid:
		if id != sale.Identifier {
			t.Fatalf("paid %s, want %s", id, sale.Identifier)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no TRANSACTION_PAID within 30 s of the due time")
	}
}

func TestAsync_DeclineEveryDependsOnSeedNotOrder(t *testing.T) {
	refs := make([]string, 40)
	for i := range refs {
		refs[i] = "order-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	run := func(order []string) map[string]string {
		s := NewServer(t, WithSeed(7), WithAsync(Async{Cards: true, DecideAfter: decideAfter, DeclineEvery: 3}))
		c := newClient(t, s)
		for _, ref := range order {
			want(t, c.do("POST", wire.RouteCreditCard, "k-"+ref, cardBody("offer-basic", ref, "tok_ok")), 201)
		}
		s.Clock.Advance(decideAfter)
		out := map[string]string{}
		for _, sl := range s.Ledger().Sales {
			out[sl.ExternalReference] = sl.Status
		}
		return out
	}
	first := run(refs)
	reversed := slices.Clone(refs)
	slices.Reverse(reversed)
	second := run(reversed)
	declined := 0
	for _, ref := range refs {
		if first[ref] != second[ref] {
			t.Fatalf("%s: %s in one order, %s in the other", ref, first[ref], second[ref])
		}
		if first[ref] == wire.SaleStatusDeclined {
			declined++
		}
	}
	if declined == 0 || declined == len(refs) {
		t.Fatalf("%d of %d declined with DeclineEvery 3", declined, len(refs))
	}
}

func TestAsync_FaultDeclineStillRefusesAtOnce(t *testing.T) {
	s := NewServer(t, WithAsync(Async{Cards: true, DecideAfter: decideAfter}))
	s.Inject(Fault{Route: routeCreditCard, Action: FaultDecline, Times: 1})
	c := newClient(t, s)
	wantError(t, c.do("POST", wire.RouteCreditCard, "k1", cardBody("offer-basic", "o1", "tok_ok")), wire.StatusDeclined, wire.CodeDeclined)
	if l := s.Ledger(); len(l.Sales) != 1 || l.Sales[0].Status != wire.SaleStatusDeclined || l.Sales[0].Async {
		t.Fatalf("sales %+v", l.Sales)
	}
}

func TestAsync_RefundRequestedThenDecided(t *testing.T) {
	for _, tc := range []struct {
		name   string
		decide func(t *testing.T, s *Server, refundID string)
		status string
	}{
		{"clock completes", func(t *testing.T, s *Server, _ string) { s.Clock.Advance(decideAfter) }, wire.RefundStatusCompleted},
		{"CompleteRefund", func(t *testing.T, s *Server, id string) {
			if err := s.CompleteRefund(id); err != nil {
				t.Fatal(err)
			}
		}, wire.RefundStatusCompleted},
		{"FailRefund", func(t *testing.T, s *Server, id string) {
			if err := s.FailRefund(id); err != nil {
				t.Fatal(err)
			}
		}, wire.RefundStatusFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewServer(t, WithAsync(Async{Refunds: true, DecideAfter: decideAfter}))
			c := newClient(t, s)
			sale := decode[wire.Sale](t, c.do("POST", wire.RouteCreditCard, "k1", cardBody("offer-basic", "o1", "tok_ok")))
			if sale.Status != wire.SaleStatusPaid {
				t.Fatalf("a card sale without Async.Cards is %q", sale.Status)
			}
			r := c.do("POST", wire.RouteRefunds, "r1", refundBody(sale.Identifier, 6000))
			want(t, r, 201)
			rf := decode[wire.Refund](t, r)
			if rf.Status != wire.RefundStatusRequested {
				t.Fatalf("refund answered %q", rf.Status)
			}
			wantRefundStatus(t, c, sale.Identifier, rf.Status)
			// The requested amount is reserved: 3990 are left, not 9990.
			wantError(t, c.do("POST", wire.RouteRefunds, "r2", refundBody(sale.Identifier, 4000)), 422, wire.CodeRefundTooLarge)
			if got := decode[wire.Sale](t, c.do("GET", "/sales/"+sale.Identifier, noKey, "")); got.Status != wire.SaleStatusPaid || got.RefundedAmount != 0 {
				t.Fatalf("sale while the refund is requested: %+v", got)
			}
			wantNames(t, "before the decision", eventNames(s, sale.Identifier), wire.EventTransactionCreated, wire.EventTransactionPaid)
			if e := refundEffect(s, rf.Identifier); !e.Successful || !e.Undecided {
				t.Fatalf("requested refund effect %+v", e)
			}

			tc.decide(t, s, rf.Identifier)

			wantRefundStatus(t, c, sale.Identifier, tc.status)
			got := decode[wire.Sale](t, c.do("GET", "/sales/"+sale.Identifier, noKey, ""))
			s.Clock.Advance(2 * decideAfter)
			names := eventNames(s, sale.Identifier)
			if tc.status == wire.RefundStatusCompleted {
				if got.Status != wire.SaleStatusPartiallyRefunded || got.RefundedAmount != 6000 {
					t.Fatalf("sale after the refund completed: %+v", got)
				}
				wantNames(t, "after completion", names, wire.EventTransactionCreated, wire.EventTransactionPaid, wire.EventTransactionRefunded)
				wantError(t, c.do("POST", wire.RouteRefunds, "r2", refundBody(sale.Identifier, 4000)), 422, wire.CodeRefundTooLarge)
			} else {
				if got.Status != wire.SaleStatusPaid || got.RefundedAmount != 0 {
					t.Fatalf("sale after the refund failed: %+v", got)
				}
				wantNames(t, "after failure", names, wire.EventTransactionCreated, wire.EventTransactionPaid)
				want(t, c.do("POST", wire.RouteRefunds, "r2", refundBody(sale.Identifier, 9990)), 201) // released
			}
			if e := refundEffect(s, rf.Identifier); e.Successful != (tc.status == wire.RefundStatusCompleted) || e.Undecided {
				t.Fatalf("decided refund effect %+v", e)
			}
			for _, f := range []func(string) error{s.CompleteRefund, s.FailRefund} {
				if err := f(rf.Identifier); !errors.Is(err, ErrDecided) {
					t.Fatalf("deciding a decided refund: %v", err)
				}
			}
			if err := s.CompleteRefund("rf_nope"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("unknown refund: %v", err)
			}
			checkLog(t, s, c)
		})
	}
}

func wantRefundStatus(t *testing.T, c *tclient, saleID, status string) {
	t.Helper()
	r := c.do("GET", wire.RouteRefunds+"?sale_identifier="+saleID, noKey, "")
	want(t, r, 200)
	if list := decode[wire.List[wire.Refund]](t, r).Data; len(list) == 0 || list[0].Status != status {
		t.Fatalf("refund list %+v, want the first %q", list, status)
	}
}

func refundEffect(s *Server, id string) Effect {
	for _, e := range s.Ledger().Effects() {
		if e.ID == id {
			return e
		}
	}
	return Effect{}
}

func TestAsync_PlanChangeScheduledThenApplied(t *testing.T) {
	for _, tc := range []struct {
		name   string
		shapes []Shape
		apply  func(t *testing.T, s *Server, subID string)
	}{
		{"clock", nil, func(t *testing.T, s *Server, _ string) { s.Clock.Advance(decideAfter) }},
		{"ApplyPlanChanges", nil, func(t *testing.T, s *Server, id string) {
			if n, err := s.ApplyPlanChanges(id); n != 1 || err != nil {
				t.Fatalf("ApplyPlanChanges = %d, %v", n, err)
			}
		}},
		{"Renew bills the new plan", nil, func(t *testing.T, s *Server, id string) {
			sl, err := s.Renew(id)
			if err != nil || sl.Amount != 5990 || sl.OfferIdentifier != "plan-pro" {
				t.Fatalf("renewal %+v, %v", sl, err)
			}
		}},
		{"answered as the subscription", []Shape{ShapePlanChangeAsSubscription}, func(t *testing.T, s *Server, _ string) { s.Clock.Advance(decideAfter) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewServer(t, WithShapes(tc.shapes...), WithAsync(Async{PlanChanges: true, DecideAfter: decideAfter}))
			c := newClient(t, s)
			sub := decode[wire.Subscription](t, c.do("POST", "/plans/offer/plan-basic/subscribe", "s1", subscribeBody("sub-1", wire.MethodCreditCard, "tok_ok")))
			r := c.do("POST", "/subscriptions/"+sub.ID+"/plan-change", "pc1", `{"offer_identifier":"plan-pro"}`)
			want(t, r, 200)
			if len(tc.shapes) > 0 {
				got := decode[wire.Subscription](t, r)
				if got.OfferIdentifier != "plan-basic" || got.NextOfferIdentifier != "plan-pro" {
					t.Fatalf("answered subscription %+v, want still on plan-basic, next plan-pro", got)
				}
			} else if pc := decode[wire.PlanChange](t, r); pc.Status != wire.PlanChangeStatusScheduled || pc.FromOfferIdentifier != "plan-basic" || pc.OfferIdentifier != "plan-pro" {
				t.Fatalf("plan change answered %+v", pc)
			}
			got := getSub(t, c, sub.ID)
			if got.OfferIdentifier != "plan-basic" || got.Amount != 2990 || got.NextOfferIdentifier != "plan-pro" ||
				len(got.PlanChanges) != 1 || got.PlanChanges[0].Status != wire.PlanChangeStatusScheduled {
				t.Fatalf("subscription while scheduled %+v", got)
			}
			// Changing to the plan already scheduled is no change.
			wantError(t, c.do("POST", "/subscriptions/"+sub.ID+"/plan-change", "pc2", `{"offer_identifier":"plan-pro"}`), 422, wire.CodeUnprocessable)
			wantNames(t, "while scheduled", eventNames(s, sub.ID), wire.EventSubscriptionCreated)
			if st, und, _ := s.Ledger().StatusOf(got.PlanChanges[0].ID); st != wire.PlanChangeStatusScheduled || !und {
				t.Fatalf("ledger while scheduled: %q %v", st, und)
			}

			tc.apply(t, s, sub.ID)

			got = getSub(t, c, sub.ID)
			if got.OfferIdentifier != "plan-pro" || got.Amount != 5990 || got.NextOfferIdentifier != "" ||
				len(got.PlanChanges) != 1 || got.PlanChanges[0].Status != wire.PlanChangeStatusApplied {
				t.Fatalf("subscription after the change %+v", got)
			}
			s.Clock.Advance(2 * decideAfter)
			if n, err := s.ApplyPlanChanges(sub.ID); n != 0 || err != nil {
				t.Fatalf("ApplyPlanChanges after = %d, %v", n, err)
			}
			changed := 0
			for _, n := range eventNames(s, sub.ID) {
				if n == wire.EventSubscriptionPlanChanged {
					changed++
				}
			}
			if changed != 1 {
				t.Fatalf("%d SUBSCRIPTION_PLAN_CHANGED events, want 1", changed)
			}
			if e := s.Ledger().PlanChanges[0]; e.Status != wire.PlanChangeStatusApplied || e.Undecided || e.DecidedAt.IsZero() {
				t.Fatalf("ledger plan change %+v", e)
			}
			if d := s.Ledger().Duplicates(DefaultGroup); len(d) != 0 {
				t.Fatalf("duplicates %v", d)
			}
			checkLog(t, s, c)
		})
	}
	s := NewServer(t)
	if _, err := s.ApplyPlanChanges("sub_nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown subscription: %v", err)
	}
}

func getSub(t *testing.T, c *tclient, id string) wire.Subscription {
	t.Helper()
	r := c.do("GET", "/subscriptions/"+id, noKey, "")
	want(t, r, 200)
	return decode[wire.Subscription](t, r)
}

// Async with no kind chosen, or no WithAsync at all, decides everything
// in the answer, as before.
func TestAsync_SynchronousUnlessChosen(t *testing.T) {
	for _, opts := range [][]Option{nil, {WithAsync(Async{DecideAfter: time.Second, DeclineEvery: 1})}} {
		s := NewServer(t, opts...)
		c := newClient(t, s)
		sale := decode[wire.Sale](t, c.do("POST", wire.RouteCreditCard, "k1", cardBody("offer-basic", "o1", "tok_ok")))
		wantError(t, c.do("POST", wire.RouteCreditCard, "k2", cardBody("offer-basic", "o2", "tok_decline")), 402, wire.CodeDeclined)
		rf := decode[wire.Refund](t, c.do("POST", wire.RouteRefunds, "r1", refundBody(sale.Identifier, 100)))
		sub := decode[wire.Subscription](t, c.do("POST", "/plans/offer/plan-basic/subscribe", "s1", subscribeBody("sub-1", wire.MethodCreditCard, "tok_ok")))
		pc := decode[wire.PlanChange](t, c.do("POST", "/subscriptions/"+sub.ID+"/plan-change", "pc1", `{"offer_identifier":"plan-pro"}`))
		if sale.Status != wire.SaleStatusPaid || rf.Status != wire.RefundStatusCompleted || pc.Status != wire.PlanChangeStatusApplied {
			t.Fatalf("sale %q, refund %q, plan change %q", sale.Status, rf.Status, pc.Status)
		}
		if got := getSub(t, c, sub.ID); got.OfferIdentifier != "plan-pro" || got.NextOfferIdentifier != "" {
			t.Fatalf("subscription %+v", got)
		}
		if err := s.Decide(sale.Identifier, false); !errors.Is(err, ErrDecided) {
			t.Fatalf("Decide of a synchronous sale: %v", err)
		}
		for _, e := range s.Ledger().Effects() {
			if e.Undecided {
				t.Fatalf("undecided effect %+v", e)
			}
		}
	}
}

func TestAsync_WebhookSenderDeliversDecisions(t *testing.T) {
	var mu sync.Mutex
	got := map[string]int{}
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var env wire.WebhookEnvelope
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &env); err == nil && env.Data.Transaction != nil {
			mu.Lock()
			got[env.Event+" "+env.Data.Transaction.Status]++
			mu.Unlock()
		}
	}))
	t.Cleanup(recv.Close)
	s := NewServer(t, WithAsync(Async{Cards: true, Refunds: true, DecideAfter: decideAfter}))
	snd := NewWebhookSenderFor(s, recv.URL, "whk", WithDuplicatePaid())
	t.Cleanup(snd.Close)
	c := newClient(t, s)
	a := decode[wire.Sale](t, c.do("POST", wire.RouteCreditCard, "k1", cardBody("offer-basic", "o1", "tok_ok")))
	decode[wire.Sale](t, c.do("POST", wire.RouteCreditCard, "k2", cardBody("offer-basic", "o2", "tok_decline")))
	if err := s.Decide(a.Identifier, true); err != nil {
		t.Fatal(err)
	}
	want(t, c.do("POST", wire.RouteRefunds, "r1", refundBody(a.Identifier, 100)), 201)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Answered before the Advance, which would otherwise time the answers
	// out (the sender's 10 s are on the same Clock).
	if err := snd.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	s.Clock.Advance(decideAfter) // declines o2, completes the refund
	// The server's decider or the next call hands the two new events over.
	s.Events()
	if err := snd.WaitUntil(ctx, func(st SenderStats) bool { return st.Attempts >= 6 }); err != nil {
		t.Fatal(err)
	}
	if err := snd.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	wantGot := map[string]int{
		"TRANSACTION_CREATED pending":             2,
		"TRANSACTION_PAID paid":                   2, // WithDuplicatePaid
		"TRANSACTION_DECLINED declined":           1,
		"TRANSACTION_REFUNDED partially_refunded": 1,
	}
	for k, n := range wantGot {
		if got[k] != n {
			t.Errorf("%s delivered %d times, want %d (all: %v)", k, got[k], n, got)
		}
	}
	if len(got) != len(wantGot) {
		t.Errorf("delivered %v; attempts %+v", got, snd.Deliveries())
	}
	if strings.Contains(strings.Join(eventNames(s, a.Identifier), ","), wire.EventTransactionDeclined) {
		t.Error("the approved sale was declined")
	}
}
