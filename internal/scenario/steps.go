package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// step runs one step (index is 1-based).
func (r *runner) step(index int, st Step) {
	actor := st.Actor % len(r.hosts)
	r.mu.Lock()
	c := r.cls[actor]
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), callBudget)
	defer cancel()
	if st.GiveUp {
		ctx = context.WithValue(ctx, giveUpKey{}, cancel)
	}
	// No call past its context: once its context ends, a call returns,
	// give or take the bounded store writes that record what it knows.
	var endedAt atomic.Int64
	stop := context.AfterFunc(ctx, func() { endedAt.Store(time.Now().UnixNano()) })
	defer func() {
		stop()
		if e := endedAt.Load(); e != 0 && st.Do.isCall() {
			if late := time.Since(time.Unix(0, e)); late > contextGrace {
				r.mu.Lock()
				r.late = append(r.late, fmt.Sprintf("step %d (%s) returned %s after its context ended", index, st.Do, late))
				r.mu.Unlock()
			}
		}
	}()
	switch st.Do {
	case DoPix, DoBoleto, DoCard, DoSubscribe, DoRefund, DoPlanChange:
		op := opID(st.Do, st.Order, st.N)
		id, key, decision, err := r.call(ctx, c, st)
		r.noteKey(op, key)
		r.noteKey(op, keyOf(err))
		r.keyFromStore(op)
		r.report(Report{Step: index, OpID: op, Outcome: classify(err), EffectID: id, Decision: decision, At: r.clock.Now(), Err: err})
	case DoResume:
		op := opID(st.Of, st.Order, st.N)
		if op == "" {
			return
		}
		res, err := c.Resume(ctx, op)
		if err == nil {
			r.noteKey(op, res.Key)
			r.report(Report{Step: index, OpID: op, Outcome: fromState(res.State), EffectID: res.Ref, Decision: res.Decision, At: r.clock.Now(), Err: res.Err})
		}
	case DoResumeAll:
		r.resumeAll(ctx, c, index)
	case DoAcceptLoss:
		r.resumeAll(ctx, c, index)
		if r.store.AcceptLoss(ctx, "scenario: unfinished operations settled by ResumeAll") == nil {
			r.acceptedLoss()
		}
	case DoRestart:
		if nc, err := r.newClient(actor); err == nil {
			r.mu.Lock()
			r.cls[actor] = nc
			r.mu.Unlock()
		}
	case DoAdvance:
		r.clock.Advance(st.Advance)
	case DoClientStep:
		r.hosts[actor].skew.Add(int64(st.Advance))
	case DoWebhooks:
		r.webhooks(ctx, c, index, st.Events)
	case DoPay:
		ref := orderRef(st.Order)
		for _, s := range r.srv.Ledger().Sales {
			if s.ExternalReference == ref && (s.PaymentMethod == "pix" || s.PaymentMethod == "boleto") && s.Status == "pending" {
				_ = r.srv.Pay(s.Identifier)
			}
		}
	case DoDeploy:
		r.tap.deployed.Store(true)
	case DoAPIStep:
		r.mu.Lock()
		r.apiOff += st.Advance
		r.apiMaxOff = max(r.apiMaxOff, r.apiOff)
		r.mu.Unlock()
		r.srv.StepClock(st.Advance)
	case DoAmnesia:
		r.store.Forget()
	case DoForgetOne:
		// An async failover loses the newest writes, not an old record
		// beside newer ones (which no store can tell from a deletion).
		recs, err := r.store.List(ctx, keystore.Filter{Limit: 1000})
		if err == nil && len(recs) > 0 {
			sort.Slice(recs, func(i, j int) bool { return recs[i].CreatedAt.Before(recs[j].CreatedAt) })
			r.store.Forget(recs[len(recs)-1].OperationID)
		}
	}
}

// acceptedLoss marks the operations whose record the store lost and the
// operator gave up on: nothing remembers that they were sent, so calling
// one again sends it as new (an exposure the operator accepted, see
// TestAmnesia_AcceptedLossChargesAgain).
func (r *runner) acceptedLoss() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for op := range r.keys {
		if _, err := r.store.Get(context.Background(), pagpolar.RecordID(r.srv.CredentialID, op)); err != nil {
			r.exposed[op] = true
		}
	}
}

func (r *runner) resumeAll(ctx context.Context, c *pagpolar.Client, index int) {
	res, _ := c.ResumeAll(ctx)
	for _, rr := range res {
		r.noteKey(rr.OperationID, rr.Key)
		r.report(Report{Step: index, OpID: rr.OperationID, Outcome: fromState(rr.State), EffectID: rr.Ref, Decision: rr.Decision, At: r.clock.Now(), Err: rr.Err})
	}
}

// webhooks delivers the picked events, as the API's sender would: late,
// again, out of order.
func (r *runner) webhooks(ctx context.Context, c *pagpolar.Client, index int, picks []int) {
	evs := r.srv.Events()
	if len(evs) == 0 {
		return
	}
	for _, p := range picks {
		body, err := json.Marshal(pagpolartest.EnvelopeFor(evs[p%len(evs)]))
		if err != nil {
			continue
		}
		res, _ := c.SettleFromWebhook(ctx, body)
		for _, rr := range res {
			r.noteKey(rr.OperationID, rr.Key)
			r.report(Report{Step: index, OpID: rr.OperationID, Outcome: fromState(rr.State), EffectID: rr.Ref, Decision: rr.Decision, At: r.clock.Now(), Err: rr.Err})
		}
	}
}

// call makes the step's money call and returns, from a success, the
// effect's ID, the operation's key and the decision the SDK reported.
func (r *runner) call(ctx context.Context, c *pagpolar.Client, st Step) (id, key string, decision pagpolar.Decision, err error) {
	ref := orderRef(st.Order)
	switch st.Do {
	case DoPix:
		res, err := c.Payments.Pix(ctx, pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: ref, Customer: customer})
		if err != nil {
			return "", "", "", err
		}
		return res.Sale.ID, res.Operation.Key, res.Sale.Decision, nil
	case DoBoleto:
		res, err := c.Payments.Boleto(ctx, pagpolar.BoletoParams{OfferID: "offer-premium", ExternalReference: ref, Customer: customer,
			DueDate: time.Date(2027, 1, 10, 0, 0, 0, 0, time.UTC)})
		if err != nil {
			return "", "", "", err
		}
		return res.Sale.ID, res.Operation.Key, res.Sale.Decision, nil
	case DoCard:
		res, err := c.Payments.CreditCard(ctx, pagpolar.CreditCardParams{OfferID: "offer-basic", ExternalReference: ref, Customer: customer, CardToken: "tok_ok", Installments: 2})
		if err != nil {
			return "", "", "", err
		}
		return res.Sale.ID, res.Operation.Key, res.Sale.Decision, nil
	case DoSubscribe:
		res, err := c.Subscriptions.Subscribe(ctx, pagpolar.SubscribeParams{OfferID: "plan-basic", ExternalReference: ref, Customer: customer,
			PaymentMethod: "credit_card", CardToken: "tok_ok"})
		if err != nil {
			return "", "", "", err
		}
		return res.Subscription.ID, res.Operation.Key, res.Subscription.Decision, nil
	case DoRefund:
		res, err := c.Refunds.Create(ctx, pagpolar.RefundParams{OperationID: opID(DoRefund, 0, st.N), SaleID: r.saleID, Amount: refundAmount + 1000*int64(st.N)})
		if err != nil {
			return "", "", "", err
		}
		return res.Refund.ID, res.Operation.Key, res.Refund.Decision, nil
	case DoPlanChange:
		offer := "plan-pro"
		if st.N%2 == 1 {
			offer = "plan-basic"
		}
		res, err := c.Subscriptions.ChangePlan(ctx, pagpolar.ChangePlanParams{OperationID: opID(DoPlanChange, 0, st.N), SubscriptionID: r.subID, NewOfferID: offer})
		if err != nil {
			return "", "", "", err
		}
		return res.PlanChange.ID, res.Operation.Key, res.PlanChange.Decision, nil
	}
	return "", "", "", nil
}

// finish lets every held request end, settles what is open with a fresh
// client, and checks.
func (r *runner) finish() (Result, error) {
	r.srv.ClearFaults()
	r.tap.clearCuts()
	r.warp.Store(true)
	// Held requests end when their time comes: move time on until every
	// request the tap sent has been answered or dropped by the fake.
	for i := 0; i < 300; i++ {
		r.clock.Advance(time.Second)
		r.tap.mu.Lock()
		sent := r.tap.sent
		r.tap.mu.Unlock()
		if int64(sent) <= r.logged.Load() {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.clock.Advance(time.Minute)
	h := &hostClock{base: r.clock, warp: &r.warp, held: r.held}
	r.hosts = append(r.hosts, h)
	settler, err := r.newClient(len(r.hosts) - 1)
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), callBudget)
	defer cancel()
	r.resumeAll(ctx, settler, 0)

	var ops []string
	for op := range r.keys {
		ops = append(ops, op)
	}
	final := storeRecords(ctx, r.store, r.srv.CredentialID, ops)
	res := Result{Reports: r.reports}
	res.Violations = Check(Truth{Ledger: r.srv.Ledger(), Keys: r.keys, Exposed: r.exposed, SetupIDs: r.setup}, r.reports, final)
	for _, l := range r.late {
		res.Violations = append(res.Violations, Violation{OpID: "context", What: l})
	}
	for _, rep := range r.reports {
		if rep.Step > 0 && r.sc.Steps[rep.Step-1].Do.isCall() {
			res.Calls++
			if rep.Outcome == Unknown {
				res.Unknown++
			}
		}
	}
	for _, rec := range final {
		if !rec.State.Settled() {
			res.Unsettled++
		}
	}
	for _, l := range r.srv.Ledger().Requests {
		if l.Panic != "" {
			res.Violations = append(res.Violations, Violation{OpID: "fake", What: "the fake panicked: " + strings.SplitN(l.Panic, "\n", 2)[0]})
		}
	}
	return res, nil
}

// leftGoroutines lists the goroutines still running the SDK's code
// (waits, lease renewals, background settles, a call that never returned,
// whoever started it) once a run has ended. The caller's own goroutine,
// first in the dump, is not one of them.
func leftGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i == 0 {
			continue // the goroutine asking
		}
		if strings.Contains(g, "github.com/pagpolar/pagpolar-go.") || strings.Contains(g, "github.com/pagpolar/pagpolar-go/keystore") {
			out = append(out, g)
		}
	}
	return out
}
