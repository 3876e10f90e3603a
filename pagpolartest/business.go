package pagpolartest

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// The business state. Every field is guarded by Server.mu.

type sale struct {
	v       wire.Sale
	cred    string
	key     string
	created time.Time
	visible time.Time // list lookups see it from here on
	renewal bool
	dec     decision // WithAsync
	// refundReserved is the amount of refunds requested and not yet
	// decided (WithAsync): no other refund may take it.
	refundReserved int64
}

type refund struct {
	v       wire.Refund
	cred    string
	key     string
	created time.Time
	visible time.Time
	sale    *sale
	dec     decision // WithAsync
}

type subscription struct {
	v          wire.Subscription // OfferIdentifier, Amount and PlanChanges are derived by view
	cred       string
	key        string
	created    time.Time
	visible    time.Time
	baseOffer  string // the offer subscribed to
	baseAmount int64
	changes    []*planChange
}

type planChange struct {
	v       wire.PlanChange
	cred    string
	key     string
	created time.Time
	visible time.Time
	amount  int64 // the new plan's price
	sub     *subscription
	dec     decision // WithAsync: scheduled until applied
}

// view renders the subscription at now. With lagged set, plan changes not
// yet visible to lookups are left out (and so is their effect on the offer).
func (sub *subscription) view(now time.Time, lagged bool) wire.Subscription {
	v := sub.v
	v.OfferIdentifier, v.Amount = sub.baseOffer, sub.baseAmount
	v.PlanChanges = []wire.PlanChange{}
	for _, pc := range sub.changes {
		if lagged && now.Before(pc.visible) {
			continue
		}
		v.PlanChanges = append(v.PlanChanges, pc.v)
		if pc.dec.undecided() { // scheduled: the offer moves when it is applied
			v.NextOfferIdentifier = pc.v.OfferIdentifier
			continue
		}
		v.OfferIdentifier, v.Amount = pc.v.OfferIdentifier, pc.amount
	}
	return v
}

// view returns a copy that shares nothing with the stored sale.
func (sl *sale) view() wire.Sale {
	v := sl.v
	if v.Pix != nil {
		p := *v.Pix
		v.Pix = &p
	}
	if v.Boleto != nil {
		b := *v.Boleto
		v.Boleto = &b
	}
	return v
}

// cardDeclinePrefix marks test card tokens that always decline.
const cardDeclinePrefix = "tok_decline"

// result is a processed request's answer.
type result struct {
	status int
	body   []byte
}

func jsonResult(status int, v any) result { return result{status: status, body: mustJSON(v)} }

func errResult(status int, code, format string, args ...any) result {
	return jsonResult(status, wire.Error{Code: code, Message: fmt.Sprintf(format, args...)})
}

// commit processes a validated money request for cred and records its
// effects atomically. lag delays the effects' visibility to lookups; decline
// forces a card payment to decline. It returns the answer.
func (s *Server) commit(rt route, cred, key string, req any, lag time.Duration, decline bool) result {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.Clock.Now()
	s.decideDueLocked(now)
	at := stamp{cred: cred, key: key, now: now, visible: now.Add(lag)}
	switch r := req.(type) {
	case *wire.PixRequest:
		return s.commitCharge(at, wire.MethodPix, r.OfferIdentifier, r.ExternalReference, "", false)
	case *wire.BoletoRequest:
		return s.commitCharge(at, wire.MethodBoleto, r.OfferIdentifier, r.ExternalReference, r.DueDate, false)
	case *wire.CreditCardRequest:
		if s.cfg.async.Cards && !decline {
			return s.commitAsyncCard(at, r)
		}
		declined := decline || strings.HasPrefix(r.Card.Token, cardDeclinePrefix)
		return s.commitCharge(at, wire.MethodCreditCard, r.OfferIdentifier, r.ExternalReference, "", declined)
	case *wire.SubscribeRequest:
		declined := r.PaymentMethod == wire.MethodCreditCard &&
			(decline || (r.Card != nil && strings.HasPrefix(r.Card.Token, cardDeclinePrefix)))
		return s.commitSubscribe(at, rt.id, r, declined)
	case *wire.PlanChangeRequest:
		return s.commitPlanChange(at, rt.id, r)
	case *wire.RefundRequest:
		return s.commitRefund(at, r)
	}
	panic(fmt.Sprintf("pagpolartest: commit of %T", req))
}

// stamp is who creates an effect, and when.
type stamp struct {
	cred, key    string
	now, visible time.Time
	renewal      bool
	async        bool // a card sale answered undecided (Async.Cards)
}

func (s *Server) commitCharge(at stamp, method, offerID, ref, dueDate string, declined bool) result {
	offer, ok := s.offers[offerID]
	if !ok {
		return errResult(http.StatusNotFound, wire.CodeNotFound, "offer_identifier: offer %q not found", offerID)
	}
	sl := s.recordSale(at, method, offer, ref, dueDate, "", declined)
	if declined {
		return errResult(wire.StatusDeclined, wire.CodeDeclined, "card: payment declined (sale %s)", sl.v.Identifier)
	}
	return jsonResult(wire.StatusChargeCreated, sl.view())
}

// recordSale creates a sale and emits its events: card sales are paid (or
// declined), PIX and boleto sales pending.
func (s *Server) recordSale(at stamp, method string, offer Offer, ref, dueDate, subID string, declined bool) *sale {
	sl := &sale{cred: at.cred, key: at.key, created: at.now, visible: at.visible, renewal: at.renewal}
	sl.v = wire.Sale{
		Identifier:        newID("sale_"),
		Status:            wire.SaleStatusPending,
		ExternalReference: ref,
		PaymentMethod:     method,
		Amount:            offer.Amount,
		OfferIdentifier:   offer.ID,
		SubscriptionID:    subID,
		CreatedAt:         formatTime(s.stepped(at.now)),
	}
	switch {
	case declined:
		sl.v.Status = wire.SaleStatusDeclined
	case at.async:
		sl.v.Status = s.cfg.async.CardStatus
	case method == wire.MethodCreditCard:
		sl.v.Status = wire.SaleStatusPaid
	}
	switch method {
	case wire.MethodPix:
		sl.v.Pix = &wire.Pix{
			QRCode:    "fake-pix-qr:" + sl.v.Identifier,
			CopyPaste: "00020126fakepix" + sl.v.Identifier,
			ExpiresAt: formatTime(at.now.Add(time.Hour)),
		}
	case wire.MethodBoleto:
		if dueDate == "" {
			dueDate = at.now.AddDate(0, 0, 3).Format(time.DateOnly)
		}
		sl.v.Boleto = &wire.Boleto{
			URL:     "https://staging.pagpolar.com/fake/boleto/" + sl.v.Identifier,
			Barcode: "34191.79001 01043.510047 91020.150008 " + sl.v.Identifier[len("sale_"):],
			DueDate: dueDate,
		}
	}
	s.sales = append(s.sales, sl)
	s.saleByID[sl.v.Identifier] = sl
	switch sl.v.Status {
	case wire.SaleStatusDeclined:
		s.emitSale(wire.EventTransactionDeclined, sl, at.now)
	case wire.SaleStatusPaid:
		s.emitSale(wire.EventTransactionCreated, sl, at.now)
		s.emitSale(wire.EventTransactionPaid, sl, at.now)
	default:
		s.emitSale(wire.EventTransactionCreated, sl, at.now)
	}
	return sl
}

func (s *Server) commitSubscribe(at stamp, offerID string, r *wire.SubscribeRequest, declined bool) result {
	offer, ok := s.offers[offerID]
	if !ok {
		return errResult(http.StatusNotFound, wire.CodeNotFound, "offer %q not found", offerID)
	}
	if !offer.Plan {
		return errResult(http.StatusUnprocessableEntity, wire.CodeUnprocessable, "offer %q is not a plan", offerID)
	}
	if declined {
		sl := s.recordSale(at, wire.MethodCreditCard, offer, r.ExternalReference, "", "", true)
		return errResult(wire.StatusDeclined, wire.CodeDeclined, "card: payment declined (sale %s)", sl.v.Identifier)
	}
	sub := &subscription{cred: at.cred, key: at.key, created: at.now, visible: at.visible, baseOffer: offer.ID, baseAmount: offer.Amount}
	sub.v = wire.Subscription{
		ID:                newID("sub_"),
		Status:            wire.SubscriptionStatusPending,
		ExternalReference: r.ExternalReference,
		PaymentMethod:     r.PaymentMethod,
		NextBillingAt:     formatTime(at.now.AddDate(0, 1, 0)),
		CreatedAt:         formatTime(s.stepped(at.now)),
	}
	if r.PaymentMethod == wire.MethodCreditCard {
		sub.v.Status = wire.SubscriptionStatusActive
	}
	s.subs = append(s.subs, sub)
	s.subByID[sub.v.ID] = sub
	s.emitSub(wire.EventSubscriptionCreated, sub, at.now)
	s.recordSale(at, r.PaymentMethod, offer, r.ExternalReference, "", sub.v.ID, false)
	return jsonResult(wire.StatusSubscribed, sub.view(at.now, false))
}

func (s *Server) commitPlanChange(at stamp, subID string, r *wire.PlanChangeRequest) result {
	sub, ok := s.subByID[subID]
	if !ok || sub.cred != at.cred {
		return errResult(http.StatusNotFound, wire.CodeNotFound, "subscription %q not found", subID)
	}
	offer, ok := s.offers[r.OfferIdentifier]
	if !ok {
		return errResult(http.StatusNotFound, wire.CodeNotFound, "offer_identifier: offer %q not found", r.OfferIdentifier)
	}
	if !offer.Plan {
		return errResult(http.StatusUnprocessableEntity, wire.CodeUnprocessable, "offer_identifier: offer %q is not a plan", offer.ID)
	}
	cur := sub.view(at.now, false)
	if cur.Status == wire.SubscriptionStatusCanceled {
		return errResult(http.StatusUnprocessableEntity, wire.CodeUnprocessable, "subscription %q is canceled", subID)
	}
	from := cur.OfferIdentifier
	if cur.NextOfferIdentifier != "" { // a change is scheduled: this one follows it
		from = cur.NextOfferIdentifier
	}
	if from == offer.ID {
		return errResult(http.StatusUnprocessableEntity, wire.CodeUnprocessable, "offer_identifier: subscription is already on %q", offer.ID)
	}
	pc := &planChange{cred: at.cred, key: at.key, created: at.now, visible: at.visible, amount: offer.Amount, sub: sub}
	pc.v = wire.PlanChange{
		ID:                  newID("pc_"),
		SubscriptionID:      sub.v.ID,
		FromOfferIdentifier: from,
		OfferIdentifier:     offer.ID,
		Status:              wire.PlanChangeStatusApplied,
		CreatedAt:           formatTime(s.stepped(at.now)),
	}
	sub.changes = append(sub.changes, pc)
	s.planChanges = append(s.planChanges, pc)
	if s.cfg.async.PlanChanges {
		pc.v.Status = s.cfg.async.PlanChangeStatus
		s.schedule(pending{change: pc}, at.now)
	} else {
		s.emitSub(wire.EventSubscriptionPlanChanged, sub, at.now)
	}
	if s.has(ShapePlanChangeAsSubscription) {
		return jsonResult(wire.StatusPlanChanged, sub.view(at.now, false))
	}
	return jsonResult(wire.StatusPlanChanged, pc.v)
}

func (s *Server) commitRefund(at stamp, r *wire.RefundRequest) result {
	sl, ok := s.saleByID[r.SaleIdentifier]
	if !ok || sl.cred != at.cred {
		return errResult(http.StatusNotFound, wire.CodeNotFound, "sale_identifier: sale %q not found", r.SaleIdentifier)
	}
	switch sl.v.Status {
	case wire.SaleStatusPaid, wire.SaleStatusPartiallyRefunded:
	default:
		return errResult(http.StatusUnprocessableEntity, wire.CodeUnprocessable,
			"sale_identifier: a %s sale cannot be refunded", sl.v.Status)
	}
	if left := sl.v.Amount - sl.v.RefundedAmount - sl.refundReserved; r.Amount > left {
		return errResult(http.StatusUnprocessableEntity, wire.CodeRefundTooLarge,
			"amount: %d exceeds the %d centavos left to refund on the sale", r.Amount, left)
	}
	rf := &refund{cred: at.cred, key: at.key, created: at.now, visible: at.visible, sale: sl}
	rf.v = wire.Refund{
		Identifier:     newID("rf_"),
		SaleIdentifier: sl.v.Identifier,
		Amount:         r.Amount,
		Status:         wire.RefundStatusCompleted,
		CreatedAt:      formatTime(s.stepped(at.now)),
	}
	if s.cfg.async.Refunds {
		return s.requestRefund(sl, rf, at.now)
	}
	s.refunds = append(s.refunds, rf)
	sl.v.RefundedAmount += r.Amount
	sl.v.Status = wire.SaleStatusPartiallyRefunded
	if sl.v.RefundedAmount == sl.v.Amount {
		sl.v.Status = wire.SaleStatusRefunded
	}
	s.emitSale(wire.EventTransactionRefunded, sl, at.now)
	return jsonResult(wire.StatusRefundCreated, rf.v)
}

// Pay marks a pending sale (PIX or boleto) paid, as the customer paying
// would, and emits TRANSACTION_PAID. The first sale of a pending
// subscription also makes the subscription active.
func (s *Server) Pay(saleID string) error {
	s.mu.Lock()
	err := func() error {
		now := s.Clock.Now()
		s.decideDueLocked(now)
		sl, ok := s.saleByID[saleID]
		if !ok {
			return fmt.Errorf("pagpolartest: Pay: sale %q not found", saleID)
		}
		if sl.dec.undecided() {
			return fmt.Errorf("pagpolartest: Pay: sale %q is an undecided card sale: use Decide", saleID)
		}
		if sl.v.Status != wire.SaleStatusPending {
			return fmt.Errorf("pagpolartest: Pay: sale %q is %s, not pending", saleID, sl.v.Status)
		}
		sl.v.Status = wire.SaleStatusPaid
		s.emitSale(wire.EventTransactionPaid, sl, now)
		if sub, ok := s.subByID[sl.v.SubscriptionID]; ok && sub.v.Status == wire.SubscriptionStatusPending {
			sub.v.Status = wire.SubscriptionStatusActive
		}
		return nil
	}()
	s.mu.Unlock()
	s.deliverEvents()
	return err
}

// Renew bills a subscription's next period: a NEW sale (Renewal in the
// ledger, no key) under the subscription's external reference and
// subscription_id, at the current plan's price, paid for a card and pending
// otherwise; next_billing_at advances one month. It emits
// SUBSCRIPTION_RENEWED and the sale's events, and returns the sale.
func (s *Server) Renew(subscriptionID string) (wire.Sale, error) {
	s.mu.Lock()
	v, err := func() (wire.Sale, error) {
		sub, ok := s.subByID[subscriptionID]
		if !ok {
			return wire.Sale{}, fmt.Errorf("pagpolartest: Renew: subscription %q not found", subscriptionID)
		}
		now := s.Clock.Now()
		s.decideDueLocked(now)
		next, err := time.Parse(time.RFC3339Nano, sub.v.NextBillingAt)
		if err != nil {
			return wire.Sale{}, errors.New("pagpolartest: Renew: unreadable next_billing_at") // never: the fake wrote it
		}
		sub.v.NextBillingAt = formatTime(next.AddDate(0, 1, 0))
		s.applyPlanChangesLocked(sub, now) // the new cycle starts on the scheduled plan
		s.emitSub(wire.EventSubscriptionRenewed, sub, now)
		cur := sub.view(now, false)
		at := stamp{cred: sub.cred, now: now, visible: now, renewal: true}
		sl := s.recordSale(at, cur.PaymentMethod, Offer{ID: cur.OfferIdentifier, Amount: cur.Amount}, cur.ExternalReference, "", sub.v.ID, false)
		return sl.view(), nil
	}()
	s.mu.Unlock()
	s.deliverEvents()
	return v, err
}

// Lookups. Each returns the answer for cred at the Clock's now.

func (s *Server) lookupSales(cred, ref string) result {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.decideDueLocked(s.Clock.Now())
	now := s.Clock.Now()
	out := wire.List[wire.Sale]{Data: []wire.Sale{}}
	for _, sl := range s.sales {
		if sl.cred == cred && sl.v.ExternalReference == ref && !now.Before(sl.visible) {
			out.Data = append(out.Data, sl.view())
		}
	}
	return jsonResult(http.StatusOK, out)
}

func (s *Server) lookupSale(cred, id string) result {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.decideDueLocked(s.Clock.Now())
	sl, ok := s.saleByID[id]
	if !ok || sl.cred != cred {
		return errResult(http.StatusNotFound, wire.CodeNotFound, "sale %q not found", id)
	}
	return jsonResult(http.StatusOK, sl.view())
}

func (s *Server) lookupRefunds(cred, saleID string) result {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.decideDueLocked(s.Clock.Now())
	now := s.Clock.Now()
	if sl, ok := s.saleByID[saleID]; !ok || sl.cred != cred {
		return errResult(http.StatusNotFound, wire.CodeNotFound, "sale_identifier: sale %q not found", saleID)
	}
	out := wire.List[wire.Refund]{Data: []wire.Refund{}}
	for _, rf := range s.refunds {
		if rf.cred == cred && rf.v.SaleIdentifier == saleID && !now.Before(rf.visible) {
			out.Data = append(out.Data, rf.v)
		}
	}
	return jsonResult(http.StatusOK, out)
}

func (s *Server) lookupSubscription(cred, id string) result {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.decideDueLocked(s.Clock.Now())
	sub, ok := s.subByID[id]
	if !ok || sub.cred != cred {
		return errResult(http.StatusNotFound, wire.CodeNotFound, "subscription %q not found", id)
	}
	return jsonResult(http.StatusOK, sub.view(s.Clock.Now(), true))
}

func (s *Server) lookupSubscriptions(cred, ref string) result {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.decideDueLocked(s.Clock.Now())
	now := s.Clock.Now()
	out := wire.List[wire.Subscription]{Data: []wire.Subscription{}}
	for _, sub := range s.subs {
		if sub.cred == cred && sub.v.ExternalReference == ref && !now.Before(sub.visible) {
			out.Data = append(out.Data, sub.view(now, true))
		}
	}
	return jsonResult(http.StatusOK, out)
}

// Ledger returns a snapshot of every effect and request so far.
func (s *Server) Ledger() Ledger {
	s.decideDue()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.Clock.Now()
	var l Ledger
	for _, sl := range s.sales {
		l.Sales = append(l.Sales, LedgerSale{Sale: sl.view(), CredentialID: sl.cred, Key: sl.key,
			CreatedAt: sl.created, VisibleAt: sl.visible, Renewal: sl.renewal, Decision: sl.dec.export()})
	}
	for _, rf := range s.refunds {
		l.Refunds = append(l.Refunds, LedgerRefund{Refund: rf.v, CredentialID: rf.cred, Key: rf.key,
			CreatedAt: rf.created, VisibleAt: rf.visible, Decision: rf.dec.export()})
	}
	for _, sub := range s.subs {
		l.Subscriptions = append(l.Subscriptions, LedgerSubscription{Subscription: sub.view(now, false),
			CredentialID: sub.cred, Key: sub.key, CreatedAt: sub.created, VisibleAt: sub.visible})
	}
	for _, pc := range s.planChanges {
		l.PlanChanges = append(l.PlanChanges, LedgerPlanChange{PlanChange: pc.v, CredentialID: pc.cred,
			Key: pc.key, CreatedAt: pc.created, VisibleAt: pc.visible, Decision: pc.dec.export()})
	}
	l.Requests = append([]RequestLog(nil), s.requests...)
	return l
}

// formatTime is the API's time format (ASSUMED RFC 3339; fractional seconds
// so that a client can order a sale against its own send time).
func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
