package pagpolar

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// effectKind names what the API created.
type effectKind int

const (
	effSale effectKind = iota
	effRefund
	effSubscription
	effPlanChange
)

func (k effectKind) String() string {
	return [...]string{"sale", "refund", "subscription", "plan change"}[k]
}

// effect is one sale, refund, subscription or plan change as the API
// reported it, read leniently: every field with whether it was absent,
// read, or present in a form the SDK does not read (internal/wire), the
// kind of answer it came in and the name each compared field was read
// under (a field proves only what answers of that kind were seen to carry
// under that name: shapes.go). The decisions in attribute.go take it as
// it is.
type effect struct {
	kind   effectKind
	answer wire.Answer
	obj    wire.Object

	ID, Ref, Method, Offer, FromOffer, SaleID, SubID, Status string

	// NextOffer: a subscription's offer after a scheduled plan change.
	NextOffer   string
	nextOfferSt wire.FieldState

	idSt, refSt, methodSt, offerSt, saleSt, subSt, statusSt wire.FieldState

	// The names Ref, Method, Offer, SaleID and SubID were read under.
	refName, methodName, offerName, saleName, subName string

	Amount     wire.Amount
	Created    time.Time
	CreatedRes time.Duration
	createdSt  wire.FieldState

	// decided: the decision when it is not read from Status (a plan change
	// answered with the subscription); empty otherwise.
	decided Decision

	// Subscriptions: whether the answer lists plan changes at all, and the
	// from-offer of the first one (the offer subscribed to).
	planChanges   []json.RawMessage
	planChangesSt wire.FieldState
}

// readEffect reads one effect of kind, from an answer of kind answer, from
// a JSON object.
func readEffect(kind effectKind, answer wire.Answer, raw []byte) (effect, error) {
	o, err := wire.ParseObject(raw)
	if err != nil {
		return effect{}, fmt.Errorf("not a %s object: %w", kind, err)
	}
	names := func(f wire.Field) []string { return wire.Names(answer, f) }
	e := effect{kind: kind, answer: answer, obj: o}
	e.ID, e.idSt = o.Str(names(wire.FID))
	e.Status, e.statusSt = o.Str(names(wire.FStatus))
	e.Created, e.CreatedRes, e.createdSt = o.Time(names(wire.FCreated))
	e.Amount = o.Amount(names(wire.FAmount))
	e.SubID, e.subName, e.subSt = idField(o, names(wire.FSubscription))
	switch kind {
	case effSale, effSubscription:
		e.Ref, e.refName, e.refSt = o.StrNamed(names(wire.FRef))
		e.Method, e.methodName, e.methodSt = o.StrNamed(names(wire.FMethod))
		e.Offer, e.offerName, e.offerSt = o.StrNamed(names(wire.FOffer))
		if kind == effSubscription {
			e.SubID, e.subName, e.subSt = "", "", wire.Absent // a subscription's own ID is its ID
			e.planChanges, e.planChangesSt = o.Array(names(wire.FPlanChanges))
			e.NextOffer, e.nextOfferSt = o.Str(names(wire.FNextOffer))
			if len(e.planChanges) > 0 {
				if first, err := wire.ParseObject(e.planChanges[0]); err == nil {
					e.FromOffer, _ = first.Str(names(wire.FFromOffer))
				}
			}
		}
	case effRefund:
		e.SaleID, e.saleName, e.saleSt = idField(o, names(wire.FSale))
	case effPlanChange:
		e.Offer, e.offerName, e.offerSt = o.StrNamed(names(wire.FOffer))
		e.FromOffer, _ = o.Str(names(wire.FFromOffer))
	}
	return e, nil
}

// idField reads a reference to another object; a zero ("0", 0) is the
// zero value some backends write for "none", not an identifier.
func idField(o wire.Object, names []string) (string, string, wire.FieldState) {
	v, n, st := o.StrNamed(names)
	if st == wire.Read && strings.Trim(v, "0") == "" {
		return "", "", wire.Absent
	}
	return v, n, st
}

// refused reports whether the effect's status is a refusal (a declined
// sale, a failed refund): the only status that fails an operation. Any
// other status — undecided, unknown, or none the SDK can read — is the
// decision of an effect that exists (SAFETY rule 3).
func (e effect) refused() bool {
	if e.decided != "" {
		return e.decided.Refused()
	}
	return e.statusSt == wire.Read && refusal(e.kind, e.Status)
}

// decision is what the effect's status says (decision.go).
func (e effect) decision() Decision {
	if e.decided != "" {
		return e.decided
	}
	if e.statusSt != wire.Read {
		return DecisionUnrecognized
	}
	return decisionOf(e.kind, e.Status)
}

// label names the effect in reasons and errors.
func (e effect) label() string {
	if e.ID == "" {
		return "a " + e.kind.String() + " without an identifier"
	}
	return e.kind.String() + " " + e.ID
}

// The typed results. Methods are reported as the SDK spells them when
// recognised, else as the API sent them; times the SDK cannot read are zero.

func (e effect) sale(sh *shapes) Sale {
	s := Sale{ID: e.ID, Status: e.Status, Decision: e.decision(), ExternalReference: e.Ref, PaymentMethod: reportedMethod(sh, e.Method),
		OfferID: e.Offer, SubscriptionID: e.SubID, Amount: e.Amount.Best(), CreatedAt: e.createdOrZero()}
	names := func(f wire.Field) []string { return wire.Names(e.answer, f) }
	s.RefundedAmount = e.obj.Amount(names(wire.FRefundedAmount)).Best()
	qr, _ := e.obj.Str(names(wire.FPixQRCode))
	cp, _ := e.obj.Str(names(wire.FPixCopyPaste))
	if qr != "" || cp != "" {
		exp, _ := e.obj.Str(names(wire.FPixExpiresAt))
		s.Pix = &PixInfo{QRCode: qr, CopyPaste: cp, ExpiresAt: exp}
	}
	u, _ := e.obj.Str(names(wire.FBoletoURL))
	bc, _ := e.obj.Str(names(wire.FBoletoBarcode))
	if u != "" || bc != "" {
		due, _ := e.obj.Str(names(wire.FBoletoDueDate))
		s.Boleto = &BoletoInfo{URL: u, Barcode: bc, DueDate: due}
	}
	return s
}

func (e effect) refund() Refund {
	return Refund{ID: e.ID, SaleID: e.SaleID, Amount: e.Amount.Best(), Status: e.Status, Decision: e.decision(), CreatedAt: e.createdOrZero()}
}

func (e effect) planChange() PlanChange {
	return PlanChange{ID: e.ID, SubscriptionID: e.SubID, FromOfferID: e.FromOffer, OfferID: e.Offer, Status: e.Status,
		Decision: e.decision(), CreatedAt: e.createdOrZero()}
}

func (e effect) subscription(sh *shapes) Subscription {
	s := Subscription{ID: e.ID, Status: e.Status, Decision: e.decision(), ExternalReference: e.Ref, OfferID: e.Offer,
		PaymentMethod: reportedMethod(sh, e.Method), Amount: e.Amount.Best(), CreatedAt: e.createdOrZero()}
	s.NextBillingAt, _ = e.obj.Str(wire.Names(e.answer, wire.FNextBillingAt))
	for _, raw := range e.planChanges {
		if pc, err := readEffect(effPlanChange, e.answer, raw); err == nil {
			s.PlanChanges = append(s.PlanChanges, pc.planChange())
		}
	}
	return s
}

func (e effect) createdOrZero() time.Time {
	if e.createdSt != wire.Read {
		return time.Time{}
	}
	return e.Created
}

func reportedMethod(sh *shapes, raw string) string {
	if raw == "" {
		return ""
	}
	if m, ok, _ := sh.method(raw); ok {
		return m
	}
	return raw
}
