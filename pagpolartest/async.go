package pagpolartest

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// Async makes the server decide some effects after answering, as acquirers
// that run antifraud, process refunds in batches or bill plan changes at the
// next cycle do (CONTRACT.md, "Decisions may come later"). The request
// takes effect at once — the effect is in the Ledger and in every lookup
// from the first answer — but the answer carries an undecided status, and
// the decision comes later with its event. The zero value decides
// everything synchronously, as a Server does without WithAsync.
//
// A decision is made when DecideAfter has passed on the server's Clock
// since the effect was created, or by an explicit call (Decide,
// CompleteRefund, FailRefund, ApplyPlanChanges, Renew), whichever comes
// first. Due decisions are made, in the order they fell due, by every
// request and every method of the Server before it reads or changes
// anything, and by a goroutine of the server waiting on the Clock (so
// that their webhook events go out without a request): after
// Clock.Advance, the next request, Ledger or Events already sees them.
// Each decision is made once and emits its event once.
type Async struct {
	// Cards answers POST /payments/credit-card with 201 and a sale in
	// CardStatus; the sale is later decided "paid" (TRANSACTION_PAID) or
	// "declined" (TRANSACTION_DECLINED). A sale with FaultDecline is still
	// refused at once (402), as an issuer's immediate refusal is. A card
	// subscribe's first sale stays synchronous (paid, or 402).
	Cards bool
	// CardStatus is the status of an undecided card sale:
	// wire.SaleStatusPending (default) or wire.SaleStatusInAnalysis. Any
	// other string is answered as given, to prove a client tolerates a
	// status nobody documented.
	CardStatus string
	// Refunds answers POST /refunds with 201 and a refund in RefundStatus;
	// it is later "completed" (the sale's refunded amount and status move,
	// TRANSACTION_REFUNDED with the sale) or "failed" (FailRefund only; no
	// event). The amount is reserved from the request on: another refund
	// cannot exceed what is left after every refund not failed.
	Refunds bool
	// RefundStatus is the status of an undecided refund:
	// wire.RefundStatusRequested (default), wire.RefundStatusProcessing, or
	// any other string.
	RefundStatus string
	// PlanChanges answers POST /subscriptions/{id}/plan-change with 200 and
	// a plan change in PlanChangeStatus (with ShapePlanChangeAsSubscription:
	// the subscription, still on the old offer). Until it is applied the
	// subscription keeps its offer and amount, shows the new offer in
	// next_offer_identifier and lists the change in plan_changes with its
	// undecided status. Applying it (the next cycle: DecideAfter,
	// ApplyPlanChanges or Renew) sets status "applied", moves the offer and
	// emits SUBSCRIPTION_PLAN_CHANGED.
	PlanChanges bool
	// PlanChangeStatus is the status of a plan change not yet applied:
	// wire.PlanChangeStatusScheduled (default) or any other string.
	PlanChangeStatus string
	// DecideAfter is how long after its creation an undecided effect is
	// decided on the server's Clock; 0 means only by the explicit calls.
	DecideAfter time.Duration
	// DeclineEvery, when positive, makes about one in DeclineEvery
	// undecided card sales end declined when DecideAfter passes: those
	// whose hash of the seed (WithSeed), external reference and card token
	// is a multiple of it, so the same sales in every run with the same
	// seed, whatever the order requests arrive in (a new card for the same
	// order gets a new coin). A card whose token starts with "tok_decline"
	// always ends declined (asynchronously, not 402). Decide overrides both.
	DeclineEvery int
}

// WithAsync makes the server decide the effects chosen in a after
// answering (see Async). Default: every decision is synchronous.
func WithAsync(a Async) Option {
	return func(cfg *config) {
		if a.CardStatus == "" {
			a.CardStatus = wire.SaleStatusPending
		}
		if a.RefundStatus == "" {
			a.RefundStatus = wire.RefundStatusRequested
		}
		if a.PlanChangeStatus == "" {
			a.PlanChangeStatus = wire.PlanChangeStatusScheduled
		}
		a.DecideAfter = max(a.DecideAfter, 0)
		cfg.async = a
	}
}

// decision is the async state of one effect.
type decision struct {
	async     bool      // answered undecided
	due       time.Time // when it is decided by time; zero: only by an explicit call
	decidedAt time.Time // zero while undecided
	decline   bool      // a card sale decided by time ends declined
}

func (d decision) undecided() bool { return d.async && d.decidedAt.IsZero() }

// asyncState is the queue of undecided effects, guarded by Server.mu.
type asyncState struct {
	pending []pending     // in creation order, so in order of due time
	wake    chan struct{} // tells the decider a new due time exists
	running bool          // the decider goroutine is started
}

// pending is one undecided effect: exactly one of the pointers is set.
type pending struct {
	sale   *sale
	refund *refund
	change *planChange
}

func (p pending) dec() *decision {
	switch {
	case p.sale != nil:
		return &p.sale.dec
	case p.refund != nil:
		return &p.refund.dec
	}
	return &p.change.dec
}

// schedule marks d undecided, due DecideAfter after now, and queues p.
// Called with s.mu held.
func (s *Server) schedule(p pending, now time.Time) {
	d := p.dec()
	d.async = true
	if s.cfg.async.DecideAfter > 0 {
		d.due = now.Add(s.cfg.async.DecideAfter)
	}
	s.async.pending = append(s.async.pending, p)
	if d.due.IsZero() {
		return
	}
	if !s.async.running && !s.closed {
		s.async.running = true
		s.async.wake = make(chan struct{}, 1)
		s.handlers.Add(1) // Close waits for the decider as for a handler
		go s.runDecider(s.async.wake)
	}
	select {
	case s.async.wake <- struct{}{}:
	default:
	}
}

// runDecider makes the decisions that fall due on the Clock without a
// request, so that their events are delivered; it ends on Close.
func (s *Server) runDecider(wake <-chan struct{}) {
	defer s.handlers.Done()
	for {
		s.mu.Lock()
		due, ok := s.nextDueLocked()
		s.mu.Unlock()
		var fire <-chan time.Time
		stop := func() {}
		if ok {
			fire, stop = s.Clock.timerAt(due)
		}
		select {
		case <-fire:
			s.decideDue()
		case <-wake:
		case <-s.ctx.Done():
			stop()
			return
		}
		stop()
	}
}

func (s *Server) nextDueLocked() (time.Time, bool) {
	var first time.Time
	for _, p := range s.async.pending {
		if d := p.dec(); !d.due.IsZero() && (first.IsZero() || d.due.Before(first)) {
			first = d.due
		}
	}
	return first, !first.IsZero()
}

// decideDue makes the due decisions and delivers their events.
func (s *Server) decideDue() {
	s.mu.Lock()
	s.decideDueLocked(s.Clock.Now())
	s.mu.Unlock()
	s.deliverEvents()
}

// decideDueLocked makes every decision due at now, each at its due time
// (its decided_at and its event's At), in order. Called with s.mu held;
// the caller delivers the events.
func (s *Server) decideDueLocked(now time.Time) {
	if len(s.async.pending) == 0 {
		return
	}
	left := s.async.pending[:0]
	for _, p := range s.async.pending {
		d := p.dec()
		switch {
		case !d.undecided(): // decided by an explicit call
			continue
		case d.due.IsZero() || now.Before(d.due):
			left = append(left, p)
			continue
		}
		switch {
		case p.sale != nil:
			s.decideSale(p.sale, !d.decline, d.due)
		case p.refund != nil:
			s.completeRefund(p.refund, d.due)
		default:
			s.applyPlanChange(p.change, d.due)
		}
	}
	clear(s.async.pending[len(left):])
	s.async.pending = left
}

// commitAsyncCard records an undecided card sale (Async.Cards).
func (s *Server) commitAsyncCard(at stamp, r *wire.CreditCardRequest) result {
	offer, ok := s.offers[r.OfferIdentifier]
	if !ok {
		return errResult(http.StatusNotFound, wire.CodeNotFound, "offer_identifier: offer %q not found", r.OfferIdentifier)
	}
	at.async = true
	sl := s.recordSale(at, wire.MethodCreditCard, offer, r.ExternalReference, "", "", false)
	sl.dec.decline = strings.HasPrefix(r.Card.Token, cardDeclinePrefix) ||
		declineCoin(s.cfg.seed, s.cfg.async.DeclineEvery, r.ExternalReference, r.Card.Token)
	s.schedule(pending{sale: sl}, at.now)
	return jsonResult(wire.StatusChargeCreated, sl.view())
}

// declineCoin reports whether an undecided card sale ends declined under
// Async.DeclineEvery: a hash of seed, reference and token, so independent
// of arrival order.
func declineCoin(seed int64, every int, ref, token string) bool {
	if every <= 0 {
		return false
	}
	h := fnv.New64a()
	h.Write([]byte(strconv.FormatInt(seed, 10) + "\x00" + ref + "\x00" + token))
	return h.Sum64()%uint64(every) == 0
}

// decideSale ends an undecided card sale paid or declined, with its event.
func (s *Server) decideSale(sl *sale, approve bool, at time.Time) {
	sl.dec.decidedAt = at
	if approve {
		sl.v.Status = wire.SaleStatusPaid
		s.emitSale(wire.EventTransactionPaid, sl, at)
		return
	}
	sl.v.Status = wire.SaleStatusDeclined
	s.emitSale(wire.EventTransactionDeclined, sl, at)
}

// requestRefund records an undecided refund (Async.Refunds), reserving its
// amount on the sale.
func (s *Server) requestRefund(sl *sale, rf *refund, now time.Time) result {
	rf.v.Status = s.cfg.async.RefundStatus
	rf.sale = sl
	sl.refundReserved += rf.v.Amount
	s.refunds = append(s.refunds, rf)
	s.schedule(pending{refund: rf}, now)
	return jsonResult(wire.StatusRefundCreated, rf.v)
}

// completeRefund completes an undecided refund: the sale's refunded amount
// and status move, and TRANSACTION_REFUNDED is emitted with the sale.
func (s *Server) completeRefund(rf *refund, at time.Time) {
	sl := rf.sale
	rf.dec.decidedAt = at
	rf.v.Status = wire.RefundStatusCompleted
	sl.refundReserved -= rf.v.Amount
	sl.v.RefundedAmount += rf.v.Amount
	sl.v.Status = wire.SaleStatusPartiallyRefunded
	if sl.v.RefundedAmount == sl.v.Amount {
		sl.v.Status = wire.SaleStatusRefunded
	}
	s.emitSale(wire.EventTransactionRefunded, sl, at)
}

// applyPlanChange applies a scheduled plan change and emits
// SUBSCRIPTION_PLAN_CHANGED.
func (s *Server) applyPlanChange(pc *planChange, at time.Time) {
	pc.dec.decidedAt = at
	pc.v.Status = wire.PlanChangeStatusApplied
	s.emitSub(wire.EventSubscriptionPlanChanged, pc.sub, at)
}

// applyPlanChangesLocked applies every undecided plan change of sub, oldest
// first, at now; it returns how many. Called with s.mu held.
func (s *Server) applyPlanChangesLocked(sub *subscription, now time.Time) int {
	n := 0
	for _, pc := range sub.changes {
		if pc.dec.undecided() {
			s.applyPlanChange(pc, now)
			n++
		}
	}
	return n
}

// Errors of the explicit decisions.
var (
	// ErrNotFound: no effect with that identifier.
	ErrNotFound = errors.New("pagpolartest: not found")
	// ErrDecided: the effect was never undecided (synchronous) or has been
	// decided already, by time or by an earlier call.
	ErrDecided = errors.New("pagpolartest: already decided")
)

// Decide decides an undecided card sale (Async.Cards) now: approve makes
// it "paid" and emits TRANSACTION_PAID, otherwise it becomes "declined"
// with TRANSACTION_DECLINED. It overrides DeclineEvery and the tok_decline
// prefix. It returns an error wrapping ErrNotFound for an unknown sale and
// ErrDecided for a sale that is not undecided (any PIX or boleto sale too:
// those are paid by Pay).
func (s *Server) Decide(saleID string, approve bool) error {
	return s.explicit(func(now time.Time) error {
		sl, ok := s.saleByID[saleID]
		switch {
		case !ok:
			return fmt.Errorf("pagpolartest: Decide: sale %q: %w", saleID, ErrNotFound)
		case !sl.dec.undecided():
			return fmt.Errorf("pagpolartest: Decide: sale %q is %s: %w", saleID, sl.v.Status, ErrDecided)
		}
		s.decideSale(sl, approve, now)
		return nil
	})
}

// CompleteRefund completes an undecided refund (Async.Refunds) now:
// status "completed", the sale's refunded amount and status move, and
// TRANSACTION_REFUNDED is emitted with the sale. Errors wrap ErrNotFound
// or ErrDecided as Decide's do.
func (s *Server) CompleteRefund(refundID string) error {
	return s.explicit(func(now time.Time) error {
		rf, err := s.undecidedRefund("CompleteRefund", refundID)
		if err == nil {
			s.completeRefund(rf, now)
		}
		return err
	})
}

// FailRefund ends an undecided refund (Async.Refunds) "failed" now: its
// reserved amount is released and the sale is unchanged. No event is
// emitted (none is documented or assumed for it); lookups show the status.
// Errors wrap ErrNotFound or ErrDecided as Decide's do.
func (s *Server) FailRefund(refundID string) error {
	return s.explicit(func(now time.Time) error {
		rf, err := s.undecidedRefund("FailRefund", refundID)
		if err == nil {
			rf.dec.decidedAt = now
			rf.v.Status = wire.RefundStatusFailed
			rf.sale.refundReserved -= rf.v.Amount
		}
		return err
	})
}

func (s *Server) undecidedRefund(op, id string) (*refund, error) {
	for _, rf := range s.refunds {
		if rf.v.Identifier != id {
			continue
		}
		if !rf.dec.undecided() {
			return nil, fmt.Errorf("pagpolartest: %s: refund %q is %s: %w", op, id, rf.v.Status, ErrDecided)
		}
		return rf, nil
	}
	return nil, fmt.Errorf("pagpolartest: %s: refund %q: %w", op, id, ErrNotFound)
}

// ApplyPlanChanges applies every scheduled plan change of the subscription
// now, as its next billing cycle would, oldest first, each with its
// SUBSCRIPTION_PLAN_CHANGED event, and returns how many it applied (0 when
// none was scheduled). Renew applies them too, before billing. The error
// wraps ErrNotFound for an unknown subscription.
func (s *Server) ApplyPlanChanges(subscriptionID string) (int, error) {
	n := 0
	err := s.explicit(func(now time.Time) error {
		sub, ok := s.subByID[subscriptionID]
		if !ok {
			return fmt.Errorf("pagpolartest: ApplyPlanChanges: subscription %q: %w", subscriptionID, ErrNotFound)
		}
		n = s.applyPlanChangesLocked(sub, now)
		return nil
	})
	return n, err
}

// explicit runs an explicit decision under s.mu, after the decisions due,
// and delivers the events.
func (s *Server) explicit(f func(now time.Time) error) error {
	s.mu.Lock()
	now := s.Clock.Now()
	s.decideDueLocked(now)
	err := f(now)
	s.mu.Unlock()
	s.deliverEvents()
	return err
}
