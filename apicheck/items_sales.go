// Items of the sale routes (PIX and card charges): the answer's status,
// method and nested objects.

package apicheck

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// expectedSaleStatus is the status a sale charged by method should have at
// step.
func (r *runner) expectedSaleStatus(method, step string) string {
	if method != wire.MethodCreditCard {
		return wire.SaleStatusPending
	}
	switch {
	case strings.HasPrefix(step, "card/"), step == "refund/sale-before":
		return wire.SaleStatusPaid
	case step == "refund/sale-after-partial":
		return wire.SaleStatusPartiallyRefunded
	case step == "reads":
		switch {
		case r.refunded > 0 && r.refunded >= r.cardTotal:
			return wire.SaleStatusRefunded
		case r.refunded > 0:
			return wire.SaleStatusPartiallyRefunded
		}
		return wire.SaleStatusPaid
	}
	return ""
}

func (r *runner) observeSale(o *observer, body []byte, method, step, where string) {
	obj, err := wire.ParseObject(body)
	if err != nil {
		o.add("sale.identifier", Differs, "not a JSON object: "+o.snip(body), where)
		return
	}
	checkField(o, "sale.identifier", obj, "identifier", wire.AllNames(wire.FID), tString, where)
	if v, ok := checkField(o, "sale.status", obj, "status", wire.AllNames(wire.FStatus), tString, where); ok && method != "" {
		if want := r.expectedSaleStatus(method, step); want != "" {
			if got := strOf(v); got == want {
				o.add("status.sale."+want, Confirmed, "", where)
			} else {
				o.add("status.sale."+want, Differs, strconv.Quote(got), where)
			}
		}
	}
	checkField(o, "sale.external_reference", obj, "external_reference", wire.AllNames(wire.FRef), tString, where)
	if v, ok := checkField(o, "sale.payment_method", obj, "payment_method", wire.AllNames(wire.FMethod), tString, where); ok && method != "" {
		observeMethod(o, strOf(v), method, where)
	} else if !ok && method != "" {
		if s, st := obj.Str(wire.AllNames(wire.FMethod)); st == wire.Read {
			observeMethod(o, s, method, where)
		}
	}
	checkField(o, "sale.amount", obj, "amount", wire.AllNames(wire.FAmount), tInt, where)
	checkField(o, "sale.refunded_amount", obj, "refunded_amount", wire.AllNames(wire.FRefundedAmount), tInt, where)
	checkField(o, "sale.offer_identifier", obj, "offer_identifier", wire.AllNames(wire.FOffer), tString, where)
	checkField(o, "sale.created_at", obj, "created_at", wire.AllNames(wire.FCreated), tTime, where)
	switch method {
	case wire.MethodPix:
		observeNested(o, "sale.pix", obj, "pix", []wire.Field{wire.FPixQRCode, wire.FPixCopyPaste, wire.FPixExpiresAt}, where)
	case wire.MethodBoleto:
		observeNested(o, "sale.boleto", obj, "boleto", []wire.Field{wire.FBoletoURL, wire.FBoletoBarcode, wire.FBoletoDueDate}, where)
	}
}

func observeSubscriptionSale(o *observer, body []byte, where string) {
	obj, err := wire.ParseObject(body)
	if err != nil {
		return
	}
	checkField(o, "sale.subscription_id", obj, "subscription_id", wire.AllNames(wire.FSubscription), tString, where)
}

func observeMethod(o *observer, got, want, where string) {
	if got == want {
		o.add("method."+want, Confirmed, "", where)
		return
	}
	note := "not recognised by the SDK"
	if m, ok := wire.CanonicalMethod(got); ok {
		note = "the SDK reads it as " + m
	}
	o.add("method."+want, Differs, fmt.Sprintf("%q (%s)", got, note), where)
}

func observeNested(o *observer, id string, obj wire.Object, name string, members []wire.Field, where string) {
	v, ok := obj.Get(name)
	if !ok || isNull(v) {
		o.add(id, Absent, "", where)
		return
	}
	if _, err := wire.ParseObject(v); err != nil {
		o.add(id, Differs, "not an object: "+o.snip(v), where)
		return
	}
	// Each member under its documented name, the first of the table's
	// (internal/wire/fields.go): "pix.qr_code" is {"pix":{"qr_code":...}}.
	var missing []string
	for _, f := range members {
		documented := wire.AllNames(f)[:1]
		if s, st := obj.Str(documented); st != wire.Read || s == "" {
			missing = append(missing, strings.TrimPrefix(documented[0], name+"."))
		}
	}
	if len(missing) > 0 {
		o.add(id, Differs, "without "+strings.Join(missing, ", "), where)
		return
	}
	o.add(id, Confirmed, "", where)
}
