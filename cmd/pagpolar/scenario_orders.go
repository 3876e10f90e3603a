package main

// The scenario's orders and how a checkout runs them: the operations of an order,
// their outcomes, and the results of a pass.

import (
	"context"
	"errors"
	"fmt"
	mathrand "math/rand"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/internal/report"
	"github.com/pagpolar/pagpolar-go/keystore"
)

// order is one order of the scenario, derived from the seed and its index
// so that every process of a chaos run agrees on it.
type order struct {
	Index   int
	Ref     string // external reference: the order code
	Method  string // pix, boleto, credit_card, or subscribe
	PayBy   string // subscriptions: pix or credit_card
	Offer   string
	Decline bool  // paid with a card token the fake always declines
	Refund  int64 // centavos to refund once charged (card orders only); 0: none
	// NewPlan: a subscription moves to this plan once subscribed; "": no
	// plan change.
	NewPlan string
}

var demoCustomer = pagpolar.Customer{Name: "Ana Souza", Email: "ana@example.com", Document: "529.982.247-25", Phone: "+55 11 91234-5678"}

// orderAt returns order i of the run seeded with seed: 35 % PIX, 20 %
// boleto, 30 % card (one in eight of them declined, one in four of the
// rest partly refunded afterwards), 15 % subscriptions (by card or PIX,
// half of them changing plan afterwards).
func orderAt(seed int64, i int) order {
	rng := mathrand.New(mathrand.NewSource(seed*1_000_003 + int64(i)))
	o := order{Index: i, Ref: fmt.Sprintf("order-%06d", i), Offer: "offer-basic"}
	switch x := rng.Intn(20); {
	case x < 7:
		o.Method = "pix"
	case x < 11:
		o.Method, o.Offer = "boleto", "offer-premium"
	case x < 17:
		o.Method = "credit_card"
		if rng.Intn(2) == 0 {
			o.Offer = "offer-premium"
		}
		switch {
		case rng.Intn(8) == 0:
			o.Decline = true
		case rng.Intn(4) == 0:
			o.Refund = 500 + rng.Int63n(4000)
		}
	default:
		o.Method, o.Offer, o.PayBy = "subscribe", "plan-basic", "pix"
		if rng.Intn(2) == 0 {
			o.PayBy = "credit_card"
		}
		if rng.Intn(2) == 0 {
			o.NewPlan = "plan-pro"
		}
	}
	return o
}

// chargeOpID and refundOpID are the operation IDs the order code uses: the
// SDK's default for charges and subscriptions, one refund or plan change
// per order.
func chargeOpID(o order) string { return o.Method + ":" + o.Ref }
func refundOpID(o order) string { return "refund:" + o.Ref }
func planOpID(o order) string   { return "plan-change:" + o.Ref }

// outcome is how one business operation ended for the order code.
type outcome struct {
	Order     int    `json:"order"`
	OpID      string `json:"op"`
	State     string `json:"state"` // succeeded, declined, failed, unsettled
	Source    string `json:"source,omitempty"`
	Ref       string `json:"ref,omitempty"` // the sale or refund
	Err       string `json:"err,omitempty"`
	Calls     int    `json:"calls"`
	LatencyUS int64  `json:"latency_us"`
	// amnesia: the key store refused the operation because it lost
	// records it had acknowledged; calling again changes nothing until an
	// operator accepts the loss.
	amnesia bool
}

func (o outcome) final() bool { return o.State != "unsettled" }

// orderRunner is order-processing code as a checkout backend writes it: one
// operation per charge and per refund, the same operation ID on every call,
// and a call again for every answer that is not final.
type orderRunner struct {
	c        *pagpolar.Client
	calls    int           // calls per operation before leaving it unsettled; 0: until ctx ends
	deadline time.Duration // time for a whole order; 0: until ctx ends
	pause    time.Duration // base pause before calling again after a refusal
	// awaitPaid: an API that decides later; a charge is refunded only once
	// its decision is paid (AwaitDecision), as a checkout would.
	awaitPaid bool
}

// process runs an order: its charge (or subscription), then its refund or
// plan change if it has one and the first operation succeeded.
func (r *orderRunner) process(ctx context.Context, o order) []outcome {
	if r.deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.deadline)
		defer cancel()
	}
	ch := r.until(ctx, o.Index, chargeOpID(o), func(ctx context.Context) (string, pagpolar.Source, error) {
		return r.charge(ctx, o)
	})
	out := []outcome{ch}
	if r.awaitPaid && ch.State == "succeeded" && o.Refund > 0 {
		rep, err := r.c.AwaitDecision(ctx, chargeOpID(o), pagpolar.AwaitParams{Poll: r.pause, MaxPoll: 4 * r.pause})
		if err != nil || !rep.Decision.Paid() {
			return out // declined later, or not decided in time: nothing to refund
		}
	}
	switch {
	case ch.State == "succeeded" && o.Refund > 0:
		out = append(out, r.until(ctx, o.Index, refundOpID(o), func(ctx context.Context) (string, pagpolar.Source, error) {
			res, err := r.c.Refunds.Create(ctx, pagpolar.RefundParams{OperationID: refundOpID(o), SaleID: ch.Ref, Amount: o.Refund, Reason: "customer asked"})
			if err != nil {
				return "", "", err
			}
			return res.Refund.ID, res.Operation.Source, nil
		}))
	case ch.State == "succeeded" && o.NewPlan != "":
		out = append(out, r.until(ctx, o.Index, planOpID(o), func(ctx context.Context) (string, pagpolar.Source, error) {
			res, err := r.c.Subscriptions.ChangePlan(ctx, pagpolar.ChangePlanParams{OperationID: planOpID(o), SubscriptionID: ch.Ref, NewOfferID: o.NewPlan})
			if err != nil {
				return "", "", err
			}
			return res.PlanChange.ID, res.Operation.Source, nil
		}))
	}
	return out
}

func (r *orderRunner) charge(ctx context.Context, o order) (string, pagpolar.Source, error) {
	var (
		ch  *pagpolar.Charge
		err error
	)
	switch o.Method {
	case "pix":
		ch, err = r.c.Payments.Pix(ctx, pagpolar.PixParams{OfferID: o.Offer, ExternalReference: o.Ref, Customer: demoCustomer})
	case "boleto":
		ch, err = r.c.Payments.Boleto(ctx, pagpolar.BoletoParams{OfferID: o.Offer, ExternalReference: o.Ref, Customer: demoCustomer})
	case "subscribe":
		p := pagpolar.SubscribeParams{OfferID: o.Offer, ExternalReference: o.Ref, Customer: demoCustomer, PaymentMethod: o.PayBy}
		if o.PayBy == "credit_card" {
			p.CardToken = "tok_ok_" + o.Ref
		}
		res, err := r.c.Subscriptions.Subscribe(ctx, p)
		if err != nil {
			return "", "", err
		}
		return res.Subscription.ID, res.Operation.Source, nil
	default:
		tok := "tok_ok_" + o.Ref
		if o.Decline {
			tok = "tok_decline_" + o.Ref
		}
		ch, err = r.c.Payments.CreditCard(ctx, pagpolar.CreditCardParams{OfferID: o.Offer, ExternalReference: o.Ref, Customer: demoCustomer, CardToken: tok})
	}
	if err != nil {
		return "", "", err
	}
	return ch.Sale.ID, ch.Operation.Source, nil
}

// until calls fn until its answer is final, r.calls times at most.
func (r *orderRunner) until(ctx context.Context, idx int, opID string, fn func(context.Context) (string, pagpolar.Source, error)) outcome {
	start := time.Now()
	o := outcome{Order: idx, OpID: opID, State: "unsettled"}
	pause := r.pause
	for o.Calls = 1; ; o.Calls++ {
		ref, src, err := fn(ctx)
		o.Ref, o.Source, o.Err = ref, string(src), ""
		if err != nil {
			o.Err = err.Error()
		}
		if st := finalState(err); st != "" {
			o.State = st
			break
		}
		if o.amnesia = errors.Is(err, keystore.ErrAmnesia); o.amnesia {
			break
		}
		if (r.calls > 0 && o.Calls >= r.calls) || ctx.Err() != nil {
			break
		}
		if errors.Is(err, pagpolar.ErrStoreUnavailable) || (!errors.Is(err, pagpolar.ErrOutcomeUnknown) && !errors.Is(err, pagpolar.ErrInProgress)) {
			// Refused without effect (budget, throttling) or the store
			// down (its outcome unknown: the store could not say whether
			// an earlier call sent it): wait a little before asking again,
			// longer each time.
			select {
			case <-ctx.Done():
			case <-time.After(pause):
			}
			if pause < 20*r.pause {
				pause *= 2
			}
		}
	}
	o.LatencyUS = time.Since(start).Microseconds()
	return o
}

// finalState classifies a call's answer: "succeeded", "declined" or
// "failed" when it is final, "" when the order code must call again.
func finalState(err error) string {
	var api *pagpolar.APIError
	switch {
	case err == nil:
		return "succeeded"
	case errors.Is(err, pagpolar.ErrDeclined):
		return "declined"
	case errors.Is(err, pagpolar.ErrParamsMismatch), errors.Is(err, pagpolar.ErrValidation):
		return "failed"
	case errors.As(err, &api) && api.StatusCode >= 400 && api.StatusCode < 500 &&
		api.StatusCode != http.StatusConflict && api.StatusCode != http.StatusTooManyRequests &&
		api.StatusCode != http.StatusUnauthorized && api.StatusCode != http.StatusForbidden:
		return "failed"
	}
	return ""
}

// results keeps the latest outcome of every operation.
type results struct {
	mu   sync.Mutex
	ops  map[string]outcome
	lat  report.Latencies
	open atomic.Int64
}

func newResults() *results {
	return &results{ops: map[string]outcome{}}
}

// add records outcomes of the checkout pass (their latency counts).
func (r *results) add(outs ...outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, o := range outs {
		r.ops[o.OpID] = o
		r.lat.Add(time.Duration(o.LatencyUS) * time.Microsecond)
		if !o.final() {
			r.open.Add(1)
		}
	}
}

// set replaces an operation's outcome (reconciliation); it reports
// whether the operation went from unsettled to final.
func (r *results) set(o outcome) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	old, had := r.ops[o.OpID]
	r.ops[o.OpID] = o
	if o.final() && (!had || !old.final()) {
		r.open.Add(-1)
		return true
	}
	return false
}

// unsettledOps returns the operations the order code has no final answer
// for.
func (r *results) unsettledOps() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]bool{}
	for id, o := range r.ops {
		if !o.final() {
			out[id] = true
		}
	}
	return out
}

// obtained counts the operations by how their final answer was obtained.
func (r *results) obtained() report.Counts {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := report.Counts{}
	for _, o := range r.ops {
		switch o.State {
		case "succeeded":
			c[o.Source]++
		case "unsettled":
			c["unsettled"]++
		default:
			c[o.State]++
		}
	}
	return c
}
