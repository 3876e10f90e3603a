// Items of the refund route: the refund's amount and status.

package apicheck

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

func (r *runner) observeRefund(o *observer, body []byte, sent int64, where string) {
	obj, err := wire.ParseObject(body)
	if err != nil {
		o.add("refund.identifier", Differs, "not a JSON object: "+o.snip(body), where)
		return
	}
	checkField(o, "refund.identifier", obj, "identifier", wire.AllNames(wire.FID), tString, where)
	checkField(o, "refund.sale_identifier", obj, "sale_identifier", wire.AllNames(wire.FSale), tString, where)
	if v, ok := checkField(o, "refund.amount", obj, "amount", wire.AllNames(wire.FAmount), tInt, where); ok {
		n, _ := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
		valid := []int64{1, r.rest}
		if sent >= 0 {
			valid = []int64{sent}
		}
		if !slices.Contains(valid, n) {
			// replace the confirmation: the amount is not what was sent
			o.by["refund.amount"][len(o.by["refund.amount"])-1] = obs{st: Differs, value: fmt.Sprintf("%d, sent %v centavos", n, valid), where: where}
		}
	}
	if v, ok := checkField(o, "refund.status", obj, "status", wire.AllNames(wire.FStatus), tString, where); ok {
		if got := strOf(v); got == wire.RefundStatusPending || got == wire.RefundStatusCompleted {
			o.add("status.refund", Confirmed, "", where)
		} else {
			o.add("status.refund", Differs, fmt.Sprintf("%q (%s)", got, statusNote(wire.RefundStatuses, got)), where)
		}
	}
	checkField(o, "refund.created_at", obj, "created_at", wire.AllNames(wire.FCreated), tTime, where)
}

func statusNote(table map[string]wire.StatusClass, raw string) string {
	switch wire.ClassifyStatus(table, raw) {
	case wire.StatusCreated:
		return "the SDK reads it as created"
	case wire.StatusRefused:
		return "the SDK reads it as refused"
	}
	return "neither success nor refusal to the SDK"
}
