// Items of the subscription routes: a subscription's answer and a plan
// change's.

package apicheck

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

func (r *runner) observeSubscription(o *observer, body []byte, where string, fresh bool) {
	obj, err := wire.ParseObject(body)
	if err != nil {
		o.add("subscription.id", Differs, "not a JSON object: "+o.snip(body), where)
		return
	}
	checkField(o, "subscription.id", obj, "id", wire.AllNames(wire.FID), tString, where)
	if v, ok := checkField(o, "subscription.status", obj, "status", wire.AllNames(wire.FStatus), tString, where); ok && fresh {
		if got := strOf(v); got == wire.SubscriptionStatusPending || got == wire.SubscriptionStatusActive {
			o.add("status.subscription", Confirmed, "", where)
		} else {
			o.add("status.subscription", Differs, fmt.Sprintf("%q (%s)", got, statusNote(wire.SubscriptionStatuses, got)), where)
		}
	}
	checkField(o, "subscription.external_reference", obj, "external_reference", wire.AllNames(wire.FRef), tString, where)
	checkField(o, "subscription.offer_identifier", obj, "offer_identifier", wire.AllNames(wire.FOffer), tString, where)
	if v, ok := checkField(o, "subscription.payment_method", obj, "payment_method", wire.AllNames(wire.FMethod), tString, where); ok {
		observeMethod(o, strOf(v), wire.MethodPix, where)
	}
	checkField(o, "subscription.amount", obj, "amount", wire.AllNames(wire.FAmount), tInt, where)
	checkField(o, "subscription.next_billing_at", obj, "next_billing_at", wire.AllNames(wire.FNextBillingAt), tString, where)
	checkField(o, "subscription.created_at", obj, "created_at", wire.AllNames(wire.FCreated), tTime, where)
	if v, ok := checkField(o, "subscription.plan_changes", obj, "plan_changes", wire.AllNames(wire.FPlanChanges), tArray, where); ok {
		var items []json.RawMessage
		if json.Unmarshal(v, &items) == nil {
			for _, it := range items {
				observePlanChange(o, it, where+" plan_changes[]")
			}
		}
	}
}

// looksLikeSubscription: a plan-change answer that carries what only a
// subscription has.
func looksLikeSubscription(obj wire.Object) bool {
	return obj.Has(wire.AllNames(wire.FRef)) || obj.Has(wire.AllNames(wire.FPlanChanges)) || obj.Has(wire.AllNames(wire.FNextBillingAt))
}

func (r *runner) observePlanChangeAnswer(o *observer, body []byte, where string) {
	obj, err := wire.ParseObject(body)
	if err != nil {
		o.add("plan-change.answer", Differs, "not a JSON object: "+o.snip(body), where)
		return
	}
	if looksLikeSubscription(obj) {
		var keys []string
		obj.Range(func(k string, _ json.RawMessage) { keys = append(keys, k) })
		o.add("plan-change.answer", Differs, "a subscription {"+strings.Join(keys, ", ")+"}", where)
		r.observeSubscription(o, body, where, false)
		return
	}
	o.add("plan-change.answer", Confirmed, "", where)
	observePlanChange(o, body, where)
}

func observePlanChange(o *observer, body []byte, where string) {
	obj, err := wire.ParseObject(body)
	if err != nil {
		o.add("plan_change.id", Differs, "not a JSON object: "+o.snip(body), where)
		return
	}
	checkField(o, "plan_change.id", obj, "id", wire.AllNames(wire.FID), tString, where)
	checkField(o, "plan_change.subscription_id", obj, "subscription_id", wire.AllNames(wire.FSubscription), tString, where)
	checkField(o, "plan_change.from_offer_identifier", obj, "from_offer_identifier", wire.AllNames(wire.FFromOffer), tString, where)
	checkField(o, "plan_change.offer_identifier", obj, "offer_identifier", wire.AllNames(wire.FOffer), tString, where)
	if v, ok := checkField(o, "plan_change.status", obj, "status", wire.AllNames(wire.FStatus), tString, where); ok {
		if got := strOf(v); got == wire.PlanChangeStatusApplied {
			o.add("status.plan-change", Confirmed, "", where)
		} else {
			o.add("status.plan-change", Differs, fmt.Sprintf("%q (%s)", got, statusNote(wire.PlanChangeStatuses, got)), where)
		}
	}
	checkField(o, "plan_change.created_at", obj, "created_at", wire.AllNames(wire.FCreated), tTime, where)
}
