package pagpolartest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// maxRefLen bounds external_reference (ASSUMED, like the key's 255).
const maxRefLen = 255

// decodeMoney decodes and validates the body of a money route. Its errors
// name the offending field and never echo the values sent (they may be
// personal data).
func decodeMoney(route string, body []byte) (any, error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, errors.New("body: must be a JSON object")
	}
	var v any
	switch route {
	case routePix:
		v = new(wire.PixRequest)
	case routeBoleto:
		v = new(wire.BoletoRequest)
	case routeCreditCard:
		v = new(wire.CreditCardRequest)
	case routeSubscribe:
		v = new(wire.SubscribeRequest)
	case routePlanChange:
		v = new(wire.PlanChangeRequest)
	case routeRefund:
		v = new(wire.RefundRequest)
	default:
		return nil, fmt.Errorf("route %q has no body", route)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return nil, describeJSONError(err)
	}
	if err := validate(v); err != nil {
		return nil, err
	}
	return v, nil
}

func validate(v any) error {
	switch r := v.(type) {
	case *wire.PixRequest:
		return validateCharge(r.OfferIdentifier, r.ExternalReference)
	case *wire.BoletoRequest:
		if err := validateCharge(r.OfferIdentifier, r.ExternalReference); err != nil {
			return err
		}
		if r.DueDate != "" {
			if _, err := time.Parse(time.DateOnly, r.DueDate); err != nil {
				return errors.New("due_date: must be a date YYYY-MM-DD")
			}
		}
	case *wire.CreditCardRequest:
		if err := validateCharge(r.OfferIdentifier, r.ExternalReference); err != nil {
			return err
		}
		if r.Card.Token == "" {
			return errors.New("card.token: required")
		}
		if r.Installments < 0 || r.Installments > 12 {
			return errors.New("installments: must be between 1 and 12")
		}
	case *wire.SubscribeRequest:
		if len(r.ExternalReference) > maxRefLen {
			return fmt.Errorf("external_reference: longer than %d characters", maxRefLen)
		}
		switch r.PaymentMethod {
		case wire.MethodPix, wire.MethodBoleto:
		case wire.MethodCreditCard:
			if r.Card == nil || r.Card.Token == "" {
				return errors.New("card.token: required when payment_method is credit_card")
			}
		case "":
			return errors.New("payment_method: required")
		default:
			return errors.New("payment_method: must be pix, boleto or credit_card")
		}
	case *wire.PlanChangeRequest:
		if r.OfferIdentifier == "" {
			return errors.New("offer_identifier: required")
		}
	case *wire.RefundRequest:
		if r.SaleIdentifier == "" {
			return errors.New("sale_identifier: required")
		}
		if r.Amount <= 0 {
			return errors.New("amount: must be a positive number of centavos")
		}
	}
	return nil
}

func validateCharge(offer, ref string) error {
	if offer == "" {
		return errors.New("offer_identifier: required")
	}
	if len(ref) > maxRefLen {
		return fmt.Errorf("external_reference: longer than %d characters", maxRefLen)
	}
	return nil
}

// describeJSONError turns a decoding error into a message naming the field.
func describeJSONError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Errorf("body: invalid JSON at byte %d", syn.Offset)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return errors.New("body: must be a JSON object")
		}
		return fmt.Errorf("%s: must be %s", typ.Field, kindName(typ.Type.Kind().String()))
	default:
		return errors.New("body: invalid JSON")
	}
}

func kindName(k string) string {
	switch k {
	case "int", "int64":
		return "an integer (amounts in centavos)"
	case "string":
		return "a string"
	case "struct", "ptr":
		return "an object"
	case "bool":
		return "a boolean"
	}
	return "of another type"
}

// matchFields extracts what faults match on, leniently (the body may be
// invalid): the external reference (see Fault.ExternalReference) and
// whether the request pays by card.
func matchFields(rt route, body []byte, r *http.Request) (ref string, card bool) {
	switch rt.name {
	case routeGetSales, routeListSubscriptions:
		return r.URL.Query().Get("external_reference"), false
	case routeGetRefunds:
		return r.URL.Query().Get("sale_identifier"), false
	case routeGetSale, routeGetSubscription, routePlanChange:
		return rt.id, false
	}
	var f struct {
		ExternalReference any `json:"external_reference"`
		SaleIdentifier    any `json:"sale_identifier"`
		PaymentMethod     any `json:"payment_method"`
	}
	_ = json.Unmarshal(body, &f) // lenient: whatever decodes
	str := func(v any) string { s, _ := v.(string); return s }
	switch rt.name {
	case routeRefund:
		return str(f.SaleIdentifier), false
	case routeCreditCard:
		return str(f.ExternalReference), true
	case routeSubscribe:
		return str(f.ExternalReference), str(f.PaymentMethod) == wire.MethodCreditCard
	}
	return str(f.ExternalReference), false
}

// mustJSON marshals the fake's own shapes, which cannot fail.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("pagpolartest: marshal %T: %v", v, err))
	}
	return b
}
