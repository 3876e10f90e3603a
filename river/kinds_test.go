package pagpolarriver

import (
	"context"
	"database/sql"
	"sync"
	"testing"

	"github.com/riverqueue/river/rivertype"

	pagpolar "github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// Every money operation runs from an intent, each answer lost once after
// the API committed it: boleto, card by token, a card subscription, then
// a refund of the card sale and a plan change of the subscription, each
// with one effect in the ledger and its Result handed to OnSettled.
func TestWorker_EveryOperationKindRunsOnce(t *testing.T) {
	s := newShop(t)
	for _, route := range []string{"boleto", "credit_card", "subscribe", "refund", "plan_change"} {
		s.srv.Inject(pagpolartest.Fault{Route: route, Times: 1, Action: pagpolartest.FaultCommitThenDrop})
	}
	var mu sync.Mutex
	settled := map[string]Result{}
	inner := s.onSettled
	s.onSettledHook = func(ctx context.Context, tx *sql.Tx, r Result) error {
		mu.Lock()
		settled[r.Kind] = r
		mu.Unlock()
		return inner(ctx, tx, r)
	}
	s.checkout("order-b", false, BoletoIntent{OperationID: "boleto:order-b", OrderID: "order-b", OfferID: "offer-basic",
		ExternalReference: "order-b", DueDate: "2030-01-31"}, false)
	s.checkout("order-c", true, CreditCardIntent{OperationID: "card:order-c", OrderID: "order-c", OfferID: "offer-premium",
		ExternalReference: "order-c", Installments: 2}, false)
	s.checkout("order-s", true, SubscribeIntent{OperationID: "subscribe:order-s", OrderID: "order-s", OfferID: "plan-basic",
		ExternalReference: "order-s", PaymentMethod: "credit_card"}, false)
	s.start()
	s.waitFinal()
	mu.Lock()
	card, sub := settled[KindCreditCard], settled[KindSubscribe]
	if card.Charge == nil || sub.Subscription == nil || settled[KindBoleto].Charge == nil {
		t.Fatalf("results %+v", settled)
	}
	mu.Unlock()
	insert := func(in Intent) {
		tx, err := s.db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := InsertTx(context.Background(), s.river, tx, in, nil); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	insert(RefundIntent{OperationID: "refund-1", SaleID: card.EffectID, Amount: 500, Reason: "damaged", OrderID: "order-c"})
	insert(PlanChangeIntent{OperationID: "plan-change-1", SubscriptionID: sub.EffectID, NewOfferID: "plan-pro", OrderID: "order-s"})
	jobs := s.waitFinal()
	mu.Lock()
	defer mu.Unlock()
	if len(jobs) != 5 {
		t.Errorf("%d jobs, want 5", len(jobs))
	}
	for _, j := range jobs {
		if j.State != rivertype.JobStateCompleted {
			t.Errorf("job %s %s: %v", j.Kind, j.State, j.Errors)
		}
	}
	l := s.srv.Ledger()
	if d := l.Duplicates(pagpolartest.DefaultGroup); len(d) > 0 {
		t.Errorf("twice: %v", d)
	}
	for kind, r := range settled {
		if r.JobID == 0 || r.OperationID == "" || r.EffectID == "" || r.Decision == "" {
			t.Errorf("%s: result %+v", kind, r)
		}
		key := pagpolar.DerivedKey(s.srv.CredentialID, r.OperationID)
		if n := l.CountByKey(key); n != 1 {
			t.Errorf("%s: %d effects under its key, want 1", kind, n)
		}
	}
	if r := settled[KindRefund]; r.Refund == nil || r.Refund.Refund.Amount != 500 {
		t.Errorf("refund result %+v", r)
	}
	if r := settled[KindPlanChange]; r.PlanChange == nil {
		t.Errorf("plan change result %+v", r)
	}
}
