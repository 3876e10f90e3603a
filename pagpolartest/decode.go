package pagpolartest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// maxRefLen bounds external_reference (ASSUMED, like the key's 255).
const maxRefLen = 255

// field is one member of a request body: the documented PIX body (its
// example in the idempotency page) and the SDK's assumed bodies of the
// other routes (internal/wire), member by member.
type field struct {
	name     string
	required bool    // the member must be present
	nonEmpty bool    // and, a string, not empty
	object   []field // its members, when it is an object
}

// customerFields is the documented customer: the docs' example sends all
// four members, with "document": "" and "phone": "" — so all four must be
// present, and name and email not empty.
var customerFields = []field{
	{name: "name", required: true, nonEmpty: true},
	{name: "email", required: true, nonEmpty: true},
	{name: "document", required: true},
	{name: "phone", required: true},
}

var cardFields = []field{{name: "token", required: true, nonEmpty: true}}

// chargeFields is the documented PIX body; boleto and card add to it
// (assumed).
var chargeFields = []field{
	{name: "offer_identifier", required: true, nonEmpty: true},
	{name: "external_reference", required: true, nonEmpty: true},
	{name: "customer", required: true, object: customerFields},
}

// bodyFields lists, per money route, every member its body may have.
var bodyFields = map[string][]field{
	routePix:        chargeFields,
	routeBoleto:     append(append([]field{}, chargeFields...), field{name: "due_date"}),
	routeCreditCard: append(append([]field{}, chargeFields...), field{name: "card", required: true, object: cardFields}, field{name: "installments"}),
	routeSubscribe: {
		{name: "external_reference", required: true, nonEmpty: true},
		{name: "customer", required: true, object: customerFields},
		{name: "payment_method", required: true},
		{name: "card", object: cardFields},
	},
	routePlanChange: {{name: "offer_identifier", required: true, nonEmpty: true}},
	routeRefund: {
		{name: "sale_identifier", required: true, nonEmpty: true},
		{name: "amount", required: true},
		{name: "reason"},
	},
}

// checkMembers checks that raw, the object at path, has only the members
// fields names (an unknown one is a 400 naming it: an "amount" in a PIX
// body would be ignored by a lenient server while the offer sets the
// price) and every required one, present and, where it must be, not empty.
func checkMembers(path string, raw json.RawMessage, fields []field) error {
	name := func(f string) string {
		if path == "" {
			return f
		}
		return path + "." + f
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil || members == nil {
		if path == "" {
			return errors.New("body: must be a JSON object")
		}
		return fmt.Errorf("%s: must be an object", path)
	}
	known := make([]string, len(fields))
	for i, f := range fields {
		known[i] = f.name
	}
	var unknown []string
	for k := range members {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return fmt.Errorf("%s: unknown field (the documented members are %s)", name(unknown[0]), strings.Join(known, ", "))
	}
	for _, f := range fields {
		v, ok := members[f.name]
		switch {
		case !ok && f.required:
			return fmt.Errorf("%s: required", name(f.name))
		case !ok:
			continue
		case string(bytes.TrimSpace(v)) == "null":
			return fmt.Errorf("%s: must not be null", name(f.name))
		case f.object != nil:
			if err := checkMembers(name(f.name), v, f.object); err != nil {
				return err
			}
		case f.nonEmpty:
			var str string
			if json.Unmarshal(v, &str) == nil && strings.TrimSpace(str) == "" {
				return fmt.Errorf("%s: required (empty)", name(f.name))
			}
		}
	}
	return nil
}

// decodeMoney decodes and validates the body of a money route. Its errors
// name the offending field and never echo the values sent (they may be
// personal data).
func decodeMoney(route string, body []byte) (any, error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, errors.New("body: must be a JSON object")
	}
	if !json.Valid(trimmed) {
		var probe any
		return nil, describeJSONError(json.Unmarshal(trimmed, &probe))
	}
	if fields, ok := bodyFields[route]; ok {
		if err := checkMembers("", trimmed, fields); err != nil {
			return nil, err
		}
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
