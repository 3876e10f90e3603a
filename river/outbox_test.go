package pagpolarriver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	pagpolar "github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

func pix(order string) PixIntent {
	return PixIntent{OperationID: "pix:" + order, OrderID: order, OfferID: "offer-basic", ExternalReference: order}
}

// Orders whose transaction commits are charged exactly once, even when
// the API loses answers after committing or answers 500 after the
// commit; orders whose transaction rolls back after InsertTx have no job
// and no charge; a second insert of one intent is the same job.
func TestInsertTx_CommittedOrdersChargedOnceRolledBackNever(t *testing.T) {
	s := newShop(t, pagpolartest.WithSeed(7), pagpolartest.WithDeterministicFaults())
	s.srv.Inject(pagpolartest.Fault{Route: "pix", OnlyFirst: 1, Probability: 0.4, Action: pagpolartest.FaultCommitThenDrop})
	s.srv.Inject(pagpolartest.Fault{Route: "pix", OnlyFirst: 1, Probability: 0.4, Action: pagpolartest.FaultCommitThen500})
	committed, rolledBack := map[string]bool{}, map[string]bool{}
	for i := range 12 {
		id := fmt.Sprintf("order-%02d", i)
		rb := i%4 == 3
		s.checkout(id, false, pix(id), rb)
		if rb {
			rolledBack[id] = true
		} else {
			committed[id] = true
		}
	}
	// The same intent inserted again, in its own transaction: one job.
	tx, err := s.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	again, err := InsertTx(context.Background(), s.river, tx, pix("order-00"), nil)
	if err != nil || !again.Duplicate {
		t.Fatalf("second insert of one intent: %+v, %v; want Duplicate", again, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	s.start()
	jobs := s.waitFinal()

	if len(jobs) != len(committed) {
		t.Errorf("%d jobs, want one per committed order (%d)", len(jobs), len(committed))
	}
	for _, j := range jobs {
		if j.State != rivertype.JobStateCompleted {
			t.Errorf("job %d (%s) %s: %v", j.ID, j.EncodedArgs, j.State, j.Errors)
		}
	}
	l := s.srv.Ledger()
	if d := l.Duplicates(pagpolartest.DefaultGroup); len(d) > 0 {
		t.Errorf("charged twice: %v", d)
	}
	faulted := 0
	for _, r := range l.Requests {
		if r.Fault != "" {
			faulted++
		}
	}
	if faulted == 0 {
		t.Error("no fault met: the test proves nothing about lost answers")
	}
	for id := range committed {
		sales := salesOf(l, id)
		row, _ := s.order(id)
		if len(sales) != 1 {
			t.Errorf("%s: %d sales, want 1", id, len(sales))
			continue
		}
		if row.status != "settled" || row.effectID != sales[0].ID {
			t.Errorf("%s: order row %+v, ledger sale %s", id, row, sales[0].ID)
		}
	}
	for id := range rolledBack {
		if n := len(salesOf(l, id)); n != 0 {
			t.Errorf("rolled-back %s charged %d times", id, n)
		}
		if _, ok := s.order(id); ok {
			t.Errorf("rolled-back %s has a row", id)
		}
	}
}

// A second insert of an operation ID with other params is refused: River
// alone would skip it as a duplicate and the order would be charged the
// first intent's offer.
func TestInsertTx_SameOperationOtherParamsRefused(t *testing.T) {
	s := newShop(t)
	s.checkout("order-1", false, pix("order-1"), false)
	tx, err := s.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	other := pix("order-1")
	other.OfferID = "offer-premium"
	_, err = InsertTx(context.Background(), s.river, tx, other, nil)
	if !errors.Is(err, ErrIntentMismatch) || !errors.Is(err, pagpolar.ErrParamsMismatch) {
		t.Fatalf("err = %v, want ErrIntentMismatch", err)
	}
	card := CreditCardIntent{OperationID: "pix:order-1", OrderID: "order-1", OfferID: "offer-basic", ExternalReference: "order-1"}
	if _, err = InsertTx(context.Background(), s.river, tx, card, nil); !errors.Is(err, ErrIntentMismatch) {
		t.Fatalf("another kind under the same operation ID: err = %v, want ErrIntentMismatch", err)
	}
}

// An invalid intent is refused before anything is written, naming the
// field.
func TestInsertTx_InvalidIntentNamesField(t *testing.T) {
	s := newShop(t)
	tx, err := s.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	cases := map[string]Intent{
		"OperationID":  PixIntent{OrderID: "o", OfferID: "offer-basic", ExternalReference: "o"},
		"OrderID":      BoletoIntent{OperationID: "b", OfferID: "offer-basic", ExternalReference: "o"},
		"DueDate":      BoletoIntent{OperationID: "b", OrderID: "o", OfferID: "offer-basic", ExternalReference: "o", DueDate: "31/12/2026"},
		"Installments": CreditCardIntent{OperationID: "c", OrderID: "o", OfferID: "offer-basic", ExternalReference: "o", Installments: 13},
		"Amount":       RefundIntent{OperationID: "r", SaleID: "s"},
		"NewOfferID":   PlanChangeIntent{OperationID: "p", SubscriptionID: "sub"},
		"PaymentMethod": SubscribeIntent{OperationID: "s", OrderID: "o", OfferID: "plan-basic", ExternalReference: "o",
			PaymentMethod: "cash"},
	}
	for field, in := range cases {
		_, err := InsertTx(context.Background(), s.river, tx, in, nil)
		var ve *pagpolar.ValidationError
		if !errors.As(err, &ve) || ve.Field != field {
			t.Errorf("%T: err = %v, want a ValidationError on %s", in, err, field)
		}
	}
	var n int
	if err := tx.QueryRow(`SELECT count(*) FROM river_job`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d jobs written (%v), want none", n, err)
	}
}

// The job rows (args, errors, metadata) never hold the payer's name,
// e-mail, document, phone or card token, whatever became of the job.
func TestJobRows_HoldNoPayerData(t *testing.T) {
	s := newShop(t)
	s.srv.Inject(pagpolartest.Fault{Route: "credit_card", ExternalReference: "order-declined", Action: pagpolartest.FaultDecline})
	s.checkout("order-paid", true, CreditCardIntent{OperationID: "card:order-paid", OrderID: "order-paid", OfferID: "offer-basic",
		ExternalReference: "order-paid", Installments: 3}, false)
	s.checkout("order-declined", true, CreditCardIntent{OperationID: "card:order-declined", OrderID: "order-declined",
		OfferID: "offer-basic", ExternalReference: "order-declined"}, false)
	s.start()
	s.waitFinal()
	rows, err := s.db.Query(`SELECT args, errors, metadata FROM river_job`)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rows.Close() }()
	c := customer(0)
	secrets := []string{c.Name, c.Email, c.Document, "52998224725", c.Phone, "tok_order"}
	n := 0
	for rows.Next() {
		var args, errs, meta []byte
		if err := rows.Scan(&args, &errs, &meta); err != nil {
			t.Fatal(err)
		}
		n++
		row := string(args) + string(errs) + string(meta)
		for _, v := range secrets {
			if strings.Contains(row, v) {
				t.Errorf("job row holds %q: %s", v, row)
			}
		}
	}
	if n != 2 {
		t.Errorf("%d job rows, want 2", n)
	}
}

// A decline cancels the job with the reason, leaves the order as it was,
// and is not charged again.
func TestWorker_DeclineCancelsJob(t *testing.T) {
	s := newShop(t)
	s.srv.Inject(pagpolartest.Fault{Route: "credit_card", Action: pagpolartest.FaultDecline})
	s.checkout("order-1", true, CreditCardIntent{OperationID: "card:order-1", OrderID: "order-1", OfferID: "offer-basic",
		ExternalReference: "order-1"}, false)
	s.start()
	jobs := s.waitFinal()
	if len(jobs) != 1 || jobs[0].State != rivertype.JobStateCancelled {
		t.Fatalf("jobs %+v, want one cancelled", jobs)
	}
	if e := jobs[0].Errors; len(e) == 0 || !strings.Contains(e[len(e)-1].Error, "declined") {
		t.Errorf("cancel reason %+v does not say declined", e)
	}
	if row, _ := s.order("order-1"); row.status != "awaiting_charge" {
		t.Errorf("order %+v, want awaiting_charge", row)
	}
	posts := 0
	for _, r := range s.srv.Ledger().Requests {
		if r.Route == "credit_card" {
			posts++
		}
	}
	if posts != 1 {
		t.Errorf("%d card requests, want 1", posts)
	}
}

// A payer the Resolver cannot ever load cancels the job with nothing sent.
func TestWorker_UnresolvablePayerCancelsUnsent(t *testing.T) {
	s := newShop(t)
	tx, err := s.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := InsertTx(context.Background(), s.river, tx, pix("order-gone"), nil); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	s.start()
	jobs := s.waitFinal()
	if len(jobs) != 1 || jobs[0].State != rivertype.JobStateCancelled {
		t.Fatalf("jobs %+v, want one cancelled", jobs)
	}
	if n := len(s.srv.Ledger().Requests); n != 0 {
		t.Errorf("%d requests sent, want none", n)
	}
}

// OnSettled runs in the transaction that completes the job: when it
// fails, neither the order nor the job moves, and the job's next run
// answers from the SDK's record without sending again.
func TestWorker_OnSettledFailureRollsBackCompletion(t *testing.T) {
	s := newShop(t)
	s.settleFails = 2
	s.checkout("order-1", false, pix("order-1"), false)
	s.start()
	jobs := s.waitFinal()
	if len(jobs) != 1 || jobs[0].State != rivertype.JobStateCompleted {
		t.Fatalf("jobs %+v, want one completed", jobs)
	}
	if s.settleFails != 0 {
		t.Fatalf("OnSettled failures left: %d", s.settleFails)
	}
	posts := 0
	for _, r := range s.srv.Ledger().Requests {
		if r.Route == "pix" {
			posts++
		}
	}
	if posts != 1 {
		t.Errorf("%d PIX requests over three runs, want 1", posts)
	}
	row, _ := s.order("order-1")
	sales := salesOf(s.srv.Ledger(), "order-1")
	if len(sales) != 1 || row.effectID != sales[0].ID || row.decision != string(pagpolar.DecisionPending) {
		t.Errorf("order %+v, sales %+v", row, sales)
	}
}

// A lost answer the SDK cannot settle within its wait (every lookup
// fails) snoozes the job; once the lookups answer, a later run settles
// the same operation: one sale, never a second.
func TestWorker_OutcomeUnknownSnoozesSameOperation(t *testing.T) {
	s := newShop(t)
	// A charge for another order first: the client has read the API's
	// clock, so the job's first run sends without a snapshot (which the
	// failing lookups below would stop: not executed, and River's retries,
	// run after run until a snapshot succeeds).
	if _, err := s.client.Payments.Pix(context.Background(), pagpolar.PixParams{OperationID: "pix:warm-up", OfferID: "offer-basic", ExternalReference: "warm-up",
		Customer: pagpolar.Customer{Name: "Maria Silva", Email: "maria@example.com", Document: "123.456.789-09"}}); err != nil {
		t.Fatalf("warm-up charge: %v", err)
	}
	// The lookups fail until the test clears the faults, after the job
	// has been snoozed at least once.
	s.srv.Inject(pagpolartest.Fault{Route: "pix", Times: 1, Action: pagpolartest.FaultCommitThenDrop})
	s.srv.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.Fault500NoCommit})
	s.checkout("order-1", false, pix("order-1"), false)
	s.start()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		res, err := s.river.JobList(ctx, river.NewJobListParams())
		if err == nil && len(res.Jobs) == 1 && snoozeCount(res.Jobs[0].Metadata) >= 1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the job was not snoozed within 30 s (%v)", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if n := len(s.srv.Ledger().Requests); n == 0 {
		t.Fatal("nothing sent")
	}
	s.srv.ClearFaults()
	jobs := s.waitFinal()
	if len(jobs) != 1 || jobs[0].State != rivertype.JobStateCompleted {
		t.Fatalf("jobs %+v, want one completed", jobs)
	}
	if n := len(salesOf(s.srv.Ledger(), "order-1")); n != 1 {
		t.Errorf("%d sales, want 1", n)
	}
	posts := 0
	for _, r := range s.srv.Ledger().Requests {
		if r.Route == "pix" {
			posts++
		}
	}
	t.Logf("%d PIX requests (resends under the same key are replays, never new sales)", posts)
}
