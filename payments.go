package pagpolar

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// PaymentsService creates and reads sales: PIX, boleto and credit card.
type PaymentsService struct{ c *Client }

// Charge is the result of a charge: the sale and how it was obtained.
type Charge struct {
	Sale      *Sale
	Operation Operation
}

// PixParams are the params of Payments.Pix. The offer carries the price.
type PixParams struct {
	OfferID           string   // required
	ExternalReference string   // required: your order code; lookups use it to settle lost answers
	Customer          Customer // required (Phone optional)

	// OperationID names the business operation. Default "pix:" +
	// ExternalReference: one PIX charge per order. To charge the same order
	// again after a definite failure, give a new one, e.g.
	// "retry-{order}-{attempt}" (never a random or time-based value).
	OperationID string
}

// BoletoParams are the params of Payments.Boleto.
type BoletoParams struct {
	OfferID           string
	ExternalReference string
	Customer          Customer
	DueDate           time.Time // optional; only the date is sent
	OperationID       string    // default "boleto:" + ExternalReference
}

// CreditCardParams are the params of Payments.CreditCard.
type CreditCardParams struct {
	OfferID           string
	ExternalReference string
	Customer          Customer
	CardToken         string // required: a token from PagPolar's tokenizer; never card numbers
	Installments      int    // 0 or 1 = one payment; at most 12
	OperationID       string // default "credit_card:" + ExternalReference
}

func validateCharge(offer, ref string, cust Customer, opID string) error {
	if err := identifier("OfferID", offer, maxReference); err != nil {
		return err
	}
	if err := identifier("ExternalReference", ref, maxReference); err != nil {
		return err
	}
	if err := validateCustomer(cust); err != nil {
		return err
	}
	return validateOperationID(opID, false)
}

// orDefault is the operation ID: the given one, or kind + ":" + ref
// (within maxOperationID whatever the reference, so it can be resumed).
func orDefault(opID, kind, ref string) string {
	if opID != "" {
		return opID
	}
	return kind + ":" + ref
}

// Pix creates a PIX sale, at most once per operation (and says which, or
// that it cannot tell yet).
//
// Before sending, the operation is recorded in the key store; a failing
// store returns ErrStoreUnavailable and nothing is sent. Errors:
// *ValidationError (nothing saved or sent); ErrParamsMismatch (the operation
// ID was used with other params; nothing sent); *APIError for a definite
// refusal (errors.Is with ErrValidation, ErrNotFound, ...);
// *OutcomeUnknownError (errors.Is ErrOutcomeUnknown) when the sale may exist
// and could not be confirmed yet: call Pix again with the same params or
// Client.Resume; ErrInProgress when another worker holds the operation;
// ErrBudgetExhausted, ErrRateLimited, ErrUnavailable when nothing was
// processed and the retries ran out (call again later).
func (s *PaymentsService) Pix(ctx context.Context, p PixParams) (*Charge, error) {
	if err := validateCharge(p.OfferID, p.ExternalReference, p.Customer, p.OperationID); err != nil {
		return nil, err
	}
	body := wire.PixRequest{OfferIdentifier: p.OfferID, ExternalReference: p.ExternalReference, Customer: wireCustomer(p.Customer)}
	spec := &opSpec{
		kind: kindPix, id: orDefault(p.OperationID, kindPix, p.ExternalReference), path: wire.RoutePix, body: mustJSON(body),
		fpIn: fields{public: []string{kindPix, p.OfferID, p.ExternalReference}, private: func() []string { return customerFields(p.Customer) }},
		meta: opMeta{ExternalReference: p.ExternalReference, OfferID: p.OfferID, Method: wire.MethodPix},
	}
	return s.charge(ctx, spec)
}

// Boleto creates a boleto sale, at most once per operation. Errors as Pix.
func (s *PaymentsService) Boleto(ctx context.Context, p BoletoParams) (*Charge, error) {
	if err := validateCharge(p.OfferID, p.ExternalReference, p.Customer, p.OperationID); err != nil {
		return nil, err
	}
	due := ""
	if !p.DueDate.IsZero() {
		due = p.DueDate.Format("2006-01-02")
	}
	body := wire.BoletoRequest{OfferIdentifier: p.OfferID, ExternalReference: p.ExternalReference, Customer: wireCustomer(p.Customer), DueDate: due}
	spec := &opSpec{
		kind: kindBoleto, id: orDefault(p.OperationID, kindBoleto, p.ExternalReference), path: wire.RouteBoleto, body: mustJSON(body),
		fpIn: fields{public: []string{kindBoleto, p.OfferID, p.ExternalReference, due}, private: func() []string { return customerFields(p.Customer) }},
		meta: opMeta{ExternalReference: p.ExternalReference, OfferID: p.OfferID, Method: wire.MethodBoleto},
	}
	return s.charge(ctx, spec)
}

// CreditCard creates a card sale, at most once per operation. A decline
// returns an error matching ErrDeclined; the operation is then failed and a
// new attempt needs a new OperationID. Other errors as Pix.
func (s *PaymentsService) CreditCard(ctx context.Context, p CreditCardParams) (*Charge, error) {
	if err := validateCharge(p.OfferID, p.ExternalReference, p.Customer, p.OperationID); err != nil {
		return nil, err
	}
	if err := required("CardToken", p.CardToken); err != nil {
		return nil, err
	}
	if n := len(digitsOnly(p.CardToken)); n >= 13 && n <= 19 && digits(p.CardToken) == n {
		return nil, &ValidationError{Field: "CardToken", Reason: "looks like a card number; send the tokenizer's token, never the PAN"}
	}
	if p.Installments < 0 || p.Installments > 12 {
		return nil, &ValidationError{Field: "Installments", Reason: "want 0 to 12"}
	}
	body := wire.CreditCardRequest{OfferIdentifier: p.OfferID, ExternalReference: p.ExternalReference, Customer: wireCustomer(p.Customer),
		Card: wire.Card{Token: p.CardToken}, Installments: p.Installments}
	spec := &opSpec{
		kind: kindCreditCard, id: orDefault(p.OperationID, kindCreditCard, p.ExternalReference), path: wire.RouteCreditCard, body: mustJSON(body),
		fpIn: fields{public: []string{kindCreditCard, p.OfferID, p.ExternalReference, strconv.Itoa(p.Installments)}, private: func() []string { return append(customerFields(p.Customer), p.CardToken) }},
		meta: opMeta{ExternalReference: p.ExternalReference, OfferID: p.OfferID, Method: wire.MethodCreditCard},
	}
	return s.charge(ctx, spec)
}

func customerFields(c Customer) []string {
	return []string{c.Name, c.Email, digitsOnly(c.Document), digitsOnly(c.Phone)}
}

func digitsOnly(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

func (s *PaymentsService) charge(ctx context.Context, spec *opSpec) (*Charge, error) {
	res, err := s.c.run(ctx, spec)
	if err != nil {
		return nil, err
	}
	sale, err := resultOf[Sale](spec.id, res)
	if err != nil {
		return nil, err
	}
	return &Charge{Sale: sale, Operation: res.op}, nil
}

// GetSale reads one sale. A 404 matches ErrNotFound.
func (s *PaymentsService) GetSale(ctx context.Context, id string) (*Sale, error) {
	if err := identifier("id", id, maxReference); err != nil {
		return nil, err
	}
	e, err := s.c.getObject(ctx, effSale, strings.Replace(wire.RouteSale, "{identifier}", url.PathEscape(id), 1))
	if err != nil {
		return nil, err
	}
	sale := e.sale(&s.c.shapes)
	return &sale, nil
}

// SalesByExternalReference lists every sale with the reference, oldest first:
// declined attempts and subscription renewals included. A list the API pages
// is read to the end; one the SDK cannot read whole returns what it read and
// an error wrapping ErrIncompleteList.
func (s *PaymentsService) SalesByExternalReference(ctx context.Context, ref string) ([]Sale, error) {
	if err := identifier("ref", ref, maxReference); err != nil {
		return nil, err
	}
	effs, err := s.c.listAll(ctx, effSale, wire.RouteSales, url.Values{"external_reference": {ref}})
	out := make([]Sale, 0, len(effs))
	for _, e := range effs {
		out = append(out, e.sale(&s.c.shapes))
	}
	return out, err
}
