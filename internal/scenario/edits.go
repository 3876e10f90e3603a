package scenario

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Fields the field edits act on: every member the SDK reads from sales,
// refunds, subscriptions and plan changes.
var editFields = []string{
	"identifier", "id", "external_reference", "payment_method", "status", "offer_identifier",
	"amount", "created_at", "sale_identifier", "subscription_id",
}

// renamed is the other name an API version could give a field.
var renamed = map[string]string{
	"identifier": "uuid", "id": "identifier", "external_reference": "externalReference",
	"payment_method": "paymentMethod", "status": "state", "offer_identifier": "offerIdentifier",
	"amount": "value", "created_at": "createdAt", "sale_identifier": "saleIdentifier",
	"subscription_id": "subscriptionId",
}

// lookalike is a field that looks like one the SDK knows but is another,
// with a value that does not match what was sent.
var lookalike = map[string]struct {
	name  string
	value any
}{
	"identifier":         {"id", json.Number("77")},
	"id":                 {"identifier_v2", "x-77"},
	"external_reference": {"reference", "someone-else"},
	"payment_method":     {"method", "boleto"},
	"status":             {"state", "paid"},
	"offer_identifier":   {"offer_id", json.Number("3")},
	"amount":             {"amount_cents", json.Number("1")},
	"created_at":         {"created", "2020-01-01T00:00:00Z"},
	"sale_identifier":    {"sale_id", json.Number("5012")},
	"subscription_id":    {"subscription", json.Number("9")},
}

// applyEdit applies m to a decoded answer of kind and returns the result.
func applyEdit(kind Answers, v any, m Mutation) any {
	switch m.Edit {
	case EditWrap:
		obj, ok := v.(map[string]any)
		if !ok {
			return v
		}
		if kind.isList() {
			if data, ok := obj["data"].([]any); ok {
				obj["data"] = map[string]any{"items": data}
			}
			return obj
		}
		return map[string]any{"data": obj}
	case EditBareList:
		// Only a list with nothing beside its items: a bare array cannot
		// carry paging, and dropping paging would hide pages (a lie no
		// client can see through, not a shape).
		if obj, ok := v.(map[string]any); ok && kind.isList() && len(obj) == 1 {
			if data, ok := obj["data"].([]any); ok {
				return data
			}
		}
		return v
	case EditMoreFlag:
		if obj, ok := v.(map[string]any); ok && kind.isList() {
			if _, has := obj["has_more"]; !has {
				obj["has_more"] = true
			}
		}
		return v
	case EditTotalMore:
		if obj, ok := v.(map[string]any); ok && kind.isList() {
			obj["total"] = json.Number(itoa(len(objects(v)) + 1))
		}
		return v
	case EditCompact:
		if !kind.isList() {
			return v
		}
		for _, o := range objects(v) {
			for k := range o {
				if k != "identifier" && k != "id" && k != "status" {
					delete(o, k)
				}
			}
		}
		return v
	}
	if m.Edit == EditSaleAmount {
		if kind == PostRefund || kind == ListRefunds {
			for _, o := range objects(v) {
				if a, ok := o["amount"]; ok {
					o["refund_amount"], o["amount"] = a, json.Number(strconv.Itoa(setupSaleAmount))
				}
			}
		}
		return v
	}
	for _, o := range objects(v) {
		editField(o, m.Edit, m.Field)
	}
	return v
}

// setupSaleAmount is the amount of the sale the scenarios refund
// (offer-premium).
const setupSaleAmount = 19990

// objects returns the answer's objects: a list's items (in any of the
// forms the body edits give it) or the object itself.
func objects(v any) []map[string]any {
	var items []any
	switch x := v.(type) {
	case []any:
		items = x
	case map[string]any:
		switch d := x["data"].(type) {
		case []any:
			items = d
		case map[string]any:
			if it, ok := d["items"].([]any); ok {
				items = it
			} else {
				return []map[string]any{d}
			}
		default:
			return []map[string]any{x}
		}
	}
	var out []map[string]any
	for _, it := range items {
		if o, ok := it.(map[string]any); ok {
			out = append(out, o)
		}
	}
	return out
}

func editField(o map[string]any, e Edit, field string) {
	val, has := o[field]
	if !has {
		return
	}
	switch e {
	case EditRename:
		if to := renamed[field]; to != "" {
			delete(o, field)
			o[to] = val
		}
	case EditAlias:
		if l, ok := lookalike[field]; ok {
			if _, taken := o[l.name]; !taken {
				o[l.name] = l.value
			}
		}
	case EditRekey:
		if l, ok := lookalike[field]; ok {
			if _, taken := o[l.name]; !taken {
				delete(o, field)
				o[l.name] = l.value
			}
		}
	case EditRemove:
		delete(o, field)
	case EditNumberString:
		if n, ok := val.(json.Number); ok {
			o[field] = n.String()
		}
	case EditStringNumber:
		if s, ok := val.(string); ok && s != "" && strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' }) < 0 {
			o[field] = json.Number(s)
		}
	case EditUpper:
		if s, ok := val.(string); ok {
			o[field] = strings.ToUpper(s)
		}
	case EditTitle:
		if s, ok := val.(string); ok && s != "" {
			r := []rune(strings.ToLower(s))
			r[0] = unicode.ToUpper(r[0])
			o[field] = string(r)
		}
	case EditTimeUnix, EditTimeNoZone, EditTimeOffset:
		s, ok := val.(string)
		if !ok {
			return
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return
		}
		switch e {
		case EditTimeUnix:
			o[field] = json.Number(itoa(int(t.Unix())))
		case EditTimeNoZone:
			o[field] = t.UTC().Format("2006-01-02 15:04:05")
		default:
			o[field] = t.In(time.FixedZone("IST", 5*3600+1800)).Format(time.RFC3339Nano)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
