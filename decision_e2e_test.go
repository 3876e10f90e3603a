package pagpolar

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// An API that decides later (a card pending until antifraud decides, a
// refund requested, a plan change scheduled) answers every operation: the
// effect exists from the first answer, and its decision is reported as it
// stands — on every path (first answer, replay, lookup, Resume, webhook) —
// and moves forward by Refresh, AwaitDecision and webhook events.

func asyncFixture(t *testing.T, a pagpolartest.Async, shapes ...pagpolartest.Shape) *fixture {
	t.Helper()
	opts := []pagpolartest.Option{pagpolartest.WithAsync(a)}
	if len(shapes) > 0 {
		opts = append(opts, pagpolartest.WithShapes(shapes...))
	}
	return newFixture(t, opts)
}

func cardParams(ref string) CreditCardParams {
	return CreditCardParams{OfferID: "offer-basic", ExternalReference: ref, Customer: goodCustomer, CardToken: "tok_ok"}
}

func wantDecision(t *testing.T, what string, got, want Decision) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: decision %q, want %q", what, got, want)
	}
}

func TestDecision_PendingCardOnEveryPath(t *testing.T) {
	t.Parallel()
	for _, status := range []string{wire.SaleStatusPending, wire.SaleStatusInAnalysis, "zz_antifraud_queue"} {
		want := decisionOf(effSale, status)
		t.Run(status, func(t *testing.T) {
			t.Run("first answer, then the record", func(t *testing.T) {
				f := asyncFixture(t, pagpolartest.Async{Cards: true, CardStatus: status})
				ch, err := f.c.Payments.CreditCard(f.ctx, cardParams("o-first"))
				if err != nil {
					t.Fatalf("a %s card is an answer: %v", status, err)
				}
				wantDecision(t, "first answer", ch.Decision(), want)
				if ch.Sale.Status != status || ch.Operation.Source != SourceResponse {
					t.Fatalf("status %q source %s", ch.Sale.Status, ch.Operation.Source)
				}
				again, err := f.c.Payments.CreditCard(f.ctx, cardParams("o-first"))
				if err != nil || again.Operation.Source != SourceLocalRecord {
					t.Fatalf("again: %v", err)
				}
				wantDecision(t, "local record", again.Decision(), want)
			})
			t.Run("replay", func(t *testing.T) {
				f := asyncFixture(t, pagpolartest.Async{Cards: true, CardStatus: status})
				if _, err := f.c.Payments.CreditCard(f.ctx, cardParams("o-replay")); err != nil {
					t.Fatal(err)
				}
				other := f.client(t) // another host: its own store, the same derived key
				ch, err := other.Payments.CreditCard(f.ctx, cardParams("o-replay"))
				if err != nil {
					t.Fatalf("replay: %v", err)
				}
				wantDecision(t, "replay", ch.Decision(), want)
			})
			t.Run("lookup after a lost answer", func(t *testing.T) {
				f := asyncFixture(t, pagpolartest.Async{Cards: true, CardStatus: status})
				f.srv.Inject(pagpolartest.Fault{Route: "credit_card", Action: pagpolartest.FaultCommitDropRelease, Times: 1})
				ch, err := f.c.Payments.CreditCard(f.ctx, cardParams("o-lookup"))
				if err != nil {
					t.Fatalf("lookup: %v", err)
				}
				if ch.Operation.Source != SourceLookup {
					t.Fatalf("source %s", ch.Operation.Source)
				}
				wantDecision(t, "lookup", ch.Decision(), want)
				checkNoDoubles(t, f)
			})
			t.Run("resume", func(t *testing.T) {
				f := asyncFixture(t, pagpolartest.Async{Cards: true, CardStatus: status})
				f.srv.Inject(pagpolartest.Fault{Route: "credit_card", Action: pagpolartest.FaultCommitDropRelease, Times: 1})
				c := lookupsFailAfterSend(t, f)
				if _, err := c.Payments.CreditCard(f.ctx, cardParams("o-resume")); !isUnknown(err) {
					t.Fatalf("first call: %v, want unknown (lookups fail)", err)
				}
				f.srv.ClearFaults()
				res, err := f.c.Resume(f.ctx, "credit_card:o-resume")
				if err != nil || res.State != keystore.StateSucceeded {
					t.Fatalf("resume: %+v %v", res, err)
				}
				wantDecision(t, "resume", res.Decision, want)
			})
			t.Run("webhook settles the unknown operation", func(t *testing.T) {
				f := asyncFixture(t, pagpolartest.Async{Cards: true, CardStatus: status})
				f.srv.Inject(pagpolartest.Fault{Route: "credit_card", Action: pagpolartest.FaultCommitDropRelease, Times: 1})
				c := lookupsFailAfterSend(t, f)
				if _, err := c.Payments.CreditCard(f.ctx, cardParams("o-wh")); !isUnknown(err) {
					t.Fatalf("first call: %v, want unknown", err)
				}
				rs, err := f.c.SettleFromWebhook(f.ctx, eventBody(t, f, wire.EventTransactionCreated, "o-wh"))
				if err != nil || len(rs) != 1 || rs[0].State != keystore.StateSucceeded {
					t.Fatalf("settle: %+v %v", rs, err)
				}
				wantDecision(t, "webhook", rs[0].Decision, want)
			})
		})
	}
}

// lookupsFailAfterSend is a client on f's store whose lookups all fail
// once its first request is sent (the pre-send snapshot passes), with a
// short settle wait: a lost answer then ends unknown.
func lookupsFailAfterSend(t *testing.T, f *fixture) *Client {
	t.Helper()
	var once sync.Once
	pol := testPolicy()
	pol.MaxSettleWait = 300 * time.Millisecond
	return f.client(t, WithStore(f.store), WithRetryPolicy(pol), WithHook(func(_ context.Context, e Event) {
		if e.Kind == EventSent {
			once.Do(func() { f.srv.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.Fault500NoCommit}) })
		}
	}))
}

// eventBody is the delivery of the last event named name about ref.
func eventBody(t *testing.T, f *fixture, name, ref string) []byte {
	t.Helper()
	var found *pagpolartest.Event
	for _, ev := range f.srv.Events() {
		if ev.Name == name && ((ev.Transaction != nil && ev.Transaction.ExternalReference == ref) ||
			(ev.Subscription != nil && ev.Subscription.ExternalReference == ref)) {
			found = &ev
		}
	}
	if found == nil {
		t.Fatalf("no %s event about %s", name, ref)
	}
	body, err := json.Marshal(pagpolartest.EnvelopeFor(*found))
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func checkNoDoubles(t *testing.T, f *fixture) {
	t.Helper()
	for g, effs := range f.srv.Ledger().Duplicates(pagpolartest.DefaultGroup) {
		n := 0
		for _, e := range effs {
			if e.Successful {
				n++
			}
		}
		if n > 1 {
			t.Fatalf("%s: %d successful effects", g, n)
		}
	}
}

// The decision moves forward by a read (Refresh) and by webhook events,
// never backward; a later call answers the newest decision from the record.
func TestDecision_MovesForward(t *testing.T) {
	t.Run("refresh", func(t *testing.T) {
		f := asyncFixture(t, pagpolartest.Async{Cards: true})
		ch, err := f.c.Payments.CreditCard(f.ctx, cardParams("o-refresh"))
		if err != nil {
			t.Fatal(err)
		}
		rep, err := f.c.Refresh(f.ctx, "credit_card:o-refresh")
		if err != nil || rep.Moved || rep.Decision != DecisionPending {
			t.Fatalf("undecided refresh: %+v %v", rep, err)
		}
		if err := f.srv.Decide(ch.Sale.ID, true); err != nil {
			t.Fatal(err)
		}
		rep, err = f.c.Refresh(f.ctx, "credit_card:o-refresh")
		if err != nil || !rep.Moved || rep.Decision != DecisionPaid || rep.Source != SourceRead {
			t.Fatalf("refresh after the decision: %+v %v", rep, err)
		}
		again, err := f.c.Payments.CreditCard(f.ctx, cardParams("o-refresh"))
		if err != nil {
			t.Fatal(err)
		}
		wantDecision(t, "the record after Refresh", again.Decision(), DecisionPaid)
		if !again.Sale.DecisionAt.After(ch.Sale.DecisionAt) && !again.Sale.DecisionAt.Equal(ch.Sale.DecisionAt) {
			t.Fatalf("decision time went back: %v then %v", ch.Sale.DecisionAt, again.Sale.DecisionAt)
		}
	})
	t.Run("webhook, late and out of order", func(t *testing.T) {
		f := asyncFixture(t, pagpolartest.Async{Cards: true})
		ch, err := f.c.Payments.CreditCard(f.ctx, cardParams("o-event"))
		if err != nil {
			t.Fatal(err)
		}
		created := eventBody(t, f, wire.EventTransactionCreated, "o-event")
		if err := f.srv.Decide(ch.Sale.ID, true); err != nil {
			t.Fatal(err)
		}
		paid := eventBody(t, f, wire.EventTransactionPaid, "o-event")
		requests := len(f.srv.Ledger().Requests)
		if _, err := f.c.SettleFromWebhook(f.ctx, paid); err != nil {
			t.Fatal(err)
		}
		if _, err := f.c.SettleFromWebhook(f.ctx, created); err != nil { // late: pending after paid
			t.Fatal(err)
		}
		if len(f.srv.Ledger().Requests) != requests {
			t.Fatal("an event sent a request")
		}
		again, err := f.c.Payments.CreditCard(f.ctx, cardParams("o-event"))
		if err != nil {
			t.Fatal(err)
		}
		wantDecision(t, "after paid then a late created event", again.Decision(), DecisionPaid)
	})
	t.Run("webhook reaches an operation under an ID of the caller's", func(t *testing.T) {
		f := asyncFixture(t, pagpolartest.Async{Cards: true})
		p := cardParams("o-own-id")
		p.OperationID = "retry-o-own-id-2"
		ch, err := f.c.Payments.CreditCard(f.ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.srv.Decide(ch.Sale.ID, true); err != nil {
			t.Fatal(err)
		}
		rs, err := f.c.SettleFromWebhook(f.ctx, eventBody(t, f, wire.EventTransactionPaid, "o-own-id"))
		if err != nil || len(rs) != 1 || rs[0].OperationID != p.OperationID || rs[0].Decision != DecisionPaid {
			t.Fatalf("settle: %+v %v", rs, err)
		}
	})
}

// A card declined after it was answered pending ends failed-declined: the
// caller may charge a new card under a new operation ID, and only one sale
// is ever paid.
func TestDecision_DeclinedAfterPending(t *testing.T) {
	f := asyncFixture(t, pagpolartest.Async{Cards: true})
	ch, err := f.c.Payments.CreditCard(f.ctx, cardParams("o-decl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.srv.Decide(ch.Sale.ID, false); err != nil {
		t.Fatal(err)
	}
	rep, err := f.c.Refresh(f.ctx, "credit_card:o-decl")
	if !errors.Is(err, ErrDeclined) || !errors.Is(err, ErrFailed) || rep == nil || rep.Decision != DecisionDeclined {
		t.Fatalf("refresh: %+v %v, want the declined report and ErrDeclined", rep, err)
	}
	if _, err := f.c.Payments.CreditCard(f.ctx, cardParams("o-decl")); !errors.Is(err, ErrDeclined) || !errors.Is(err, ErrFailed) {
		t.Fatalf("the same operation again: %v, want ErrDeclined", err)
	}
	p := cardParams("o-decl")
	p.OperationID, p.CardToken = "retry-o-decl-2", "tok_ok_2"
	ch2, err := f.c.Payments.CreditCard(f.ctx, p)
	if err != nil || ch2.Sale.ID == ch.Sale.ID {
		t.Fatalf("a new card under a new operation ID: %v", err)
	}
	if err := f.srv.Decide(ch2.Sale.ID, true); err != nil {
		t.Fatal(err)
	}
	rep, err = f.c.AwaitDecision(f.ctx, p.OperationID, AwaitParams{Poll: time.Millisecond})
	if err != nil || rep.Decision != DecisionPaid {
		t.Fatalf("await: %+v %v", rep, err)
	}
	checkNoDoubles(t, f)
}

// AwaitDecision waits, honouring ctx, until the decision is final.
func TestDecision_AwaitDecision(t *testing.T) {
	f := asyncFixture(t, pagpolartest.Async{Cards: true, DecideAfter: time.Hour})
	if _, err := f.c.Payments.CreditCard(f.ctx, cardParams("o-await")); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(f.ctx, 50*time.Millisecond)
	defer cancel()
	rep, err := f.c.AwaitDecision(short, "credit_card:o-await", AwaitParams{Poll: 5 * time.Millisecond})
	if !errors.Is(err, context.DeadlineExceeded) || rep == nil || rep.Decision != DecisionPending {
		t.Fatalf("before the decision: %+v %v, want pending and the deadline", rep, err)
	}
	done := make(chan struct{})
	var got *DecisionReport
	go func() {
		defer close(done)
		got, err = f.c.AwaitDecision(f.ctx, "credit_card:o-await", AwaitParams{Poll: 5 * time.Millisecond, MaxPoll: 20 * time.Millisecond})
	}()
	f.srv.Clock.Advance(time.Hour + time.Second)
	<-done
	if err != nil || got.Decision.Decided() == false {
		t.Fatalf("await: %+v %v", got, err)
	}
	if _, err := f.c.AwaitDecision(f.ctx, "no-such-op", AwaitParams{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown operation: %v", err)
	}
}

// A refund answered "requested" and a plan change scheduled for the next
// cycle are succeeded, and complete later.
func TestDecision_RefundAndPlanChangeLater(t *testing.T) {
	t.Run("refund requested, then completed", func(t *testing.T) {
		f := asyncFixture(t, pagpolartest.Async{Refunds: true})
		ch, err := f.c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "o-rf", Customer: goodCustomer})
		if err != nil {
			t.Fatal(err)
		}
		if err := f.srv.Pay(ch.Sale.ID); err != nil {
			t.Fatal(err)
		}
		r, err := f.c.Refunds.Create(f.ctx, RefundParams{OperationID: "rf-1", SaleID: ch.Sale.ID, Amount: 100})
		if err != nil {
			t.Fatalf("a requested refund is an answer: %v", err)
		}
		wantDecision(t, "refund", r.Decision(), DecisionRequested)
		if err := f.srv.CompleteRefund(r.Refund.ID); err != nil {
			t.Fatal(err)
		}
		rep, err := f.c.Refresh(f.ctx, "rf-1")
		if err != nil || rep.Decision != DecisionCompleted {
			t.Fatalf("refresh: %+v %v", rep, err)
		}
	})
	t.Run("refund requested, lost answer: lookup", func(t *testing.T) {
		f := asyncFixture(t, pagpolartest.Async{Refunds: true})
		ch, err := f.c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "o-rf2", Customer: goodCustomer})
		if err != nil {
			t.Fatal(err)
		}
		if err := f.srv.Pay(ch.Sale.ID); err != nil {
			t.Fatal(err)
		}
		f.srv.Inject(pagpolartest.Fault{Route: "refund", Action: pagpolartest.FaultCommitDropRelease, Times: 1})
		r, err := f.c.Refunds.Create(f.ctx, RefundParams{OperationID: "rf-2", SaleID: ch.Sale.ID, Amount: 100})
		if err != nil || r.Operation.Source != SourceLookup {
			t.Fatalf("lookup: %+v %v", r, err)
		}
		wantDecision(t, "refund lookup", r.Decision(), DecisionRequested)
	})
	for _, shape := range [][]pagpolartest.Shape{nil, {pagpolartest.ShapePlanChangeAsSubscription}} {
		name := "plan change scheduled"
		if shape != nil {
			name += ", answered with the subscription on the old plan"
		}
		t.Run(name, func(t *testing.T) {
			f := asyncFixture(t, pagpolartest.Async{PlanChanges: true}, shape...)
			sub, err := f.c.Subscriptions.Subscribe(f.ctx, SubscribeParams{OfferID: "plan-basic", ExternalReference: "o-pc", Customer: goodCustomer, PaymentMethod: "pix"})
			if err != nil {
				t.Fatal(err)
			}
			pc, err := f.c.Subscriptions.ChangePlan(f.ctx, ChangePlanParams{OperationID: "pc-1", SubscriptionID: sub.Subscription.ID, NewOfferID: "plan-pro"})
			if err != nil {
				t.Fatalf("a scheduled plan change is an answer: %v", err)
			}
			wantDecision(t, "plan change", pc.Decision(), DecisionScheduled)
			if _, err := f.srv.ApplyPlanChanges(sub.Subscription.ID); err != nil {
				t.Fatal(err)
			}
			rep, err := f.c.Refresh(f.ctx, "pc-1")
			if err != nil || rep.Decision != DecisionApplied {
				t.Fatalf("refresh: %+v %v", rep, err)
			}
		})
	}
	t.Run("plan change scheduled, lost answer: the history lists it", func(t *testing.T) {
		f := asyncFixture(t, pagpolartest.Async{PlanChanges: true})
		sub, err := f.c.Subscriptions.Subscribe(f.ctx, SubscribeParams{OfferID: "plan-basic", ExternalReference: "o-pc2", Customer: goodCustomer, PaymentMethod: "pix"})
		if err != nil {
			t.Fatal(err)
		}
		f.srv.Inject(pagpolartest.Fault{Route: "plan_change", Action: pagpolartest.FaultCommitDropRelease, Times: 1})
		pc, err := f.c.Subscriptions.ChangePlan(f.ctx, ChangePlanParams{OperationID: "pc-2", SubscriptionID: sub.Subscription.ID, NewOfferID: "plan-pro"})
		if err != nil || pc.Operation.Source != SourceLookup {
			t.Fatalf("lookup: %+v %v", pc, err)
		}
		wantDecision(t, "plan change lookup", pc.Decision(), DecisionScheduled)
	})
}
