package apicheck

import (
	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// Status is what the check found for one assumed shape.
type Status string

// Statuses.
const (
	Confirmed    Status = "confirmed"     // every answer that carries it has it as assumed
	Differs      Status = "differs"       // some answer has it otherwise (Item.Observed says how)
	Absent       Status = "absent"        // no answer that should carry it does
	NotExercised Status = "not exercised" // no call of the check could show it
)

// def is one assumed shape: an ID, what internal/wire assumes, and the
// SDK paths whose outcome depends on it.
type def struct {
	id, assumed string
	documented  bool
	paths       []string
	// unsafe: if it differs or is absent, some path is one the SDK cannot
	// keep safe (a lost answer or a retry can make a second effect):
	// ExitUnknown, whatever the paths ended in.
	unsafe bool
	// optional: no scripted call is sure to show it (a 429/503, a
	// declining card, a webhook, the 409 race); not exercised, it does not
	// keep the run from ExitConfirmed.
	optional bool
}

// defByID finds an item's def.
func defByID(id string) (def, bool) {
	for _, d := range defs {
		if d.id == id {
			return d, true
		}
	}
	return def{}, false
}

// Path groups.
var (
	chargeLookups = []string{"pix/lost-answer", "boleto/lost-answer", "card/lost-answer"}
	chargePaths   = []string{"pix/lost-answer", "pix/replay", "boleto/lost-answer", "boleto/replay", "card/lost-answer", "card/replay"}
	refundPaths   = []string{"refund/lost-answer", "refund/replay", "refund/refused", "refund/answer"}
	subPaths      = []string{"subscribe/lost-answer", "subscribe/replay"}
	pcPaths       = []string{"plan-change/answer", "plan-change/lost-answer", "plan-change/replay"}
	replayPaths   = []string{"pix/replay", "boleto/replay", "card/replay", "refund/replay", "subscribe/replay", "plan-change/replay"}
	lookupPaths   = []string{"pix/lost-answer", "boleto/lost-answer", "card/lost-answer", "refund/lost-answer", "subscribe/lost-answer", "plan-change/lost-answer"}
)

func cat(groups ...[]string) []string {
	var out []string
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

// defs lists every shape the check reports, in report order: every
// assumed (and documented) shape of internal/wire/wire.go that an answer
// can show, and the Date header the SDK reads the API's clock from.
var defs = []def{
	{id: "idempotency.one-effect", assumed: "one key (one operation ID) has one effect: every 2xx answer to it names the same sale, refund, subscription or plan change", documented: true, paths: replayPaths, unsafe: true},
	{id: "replay.header", assumed: wire.HeaderReplayed + ": true on the answer to a repeated key", documented: true, paths: replayPaths, unsafe: true},
	{id: "replay.body", assumed: "a repeated key gets the first answer's status and body", documented: true, paths: replayPaths, unsafe: true},
	{id: "in-progress.409", assumed: "409 \"" + wire.MsgInProgress + "\" while the key is in processing", documented: true, optional: true},
	{id: "missing-key.400", assumed: "400 for a POST without " + wire.HeaderIdempotencyKey + ", nothing created", documented: true},
	{id: "header.retry-after", assumed: wire.HeaderRetryAfter + " (seconds) on 429/503", optional: true},
	{id: "header.request-id", assumed: wire.HeaderRequestID + " on every answer"},
	{id: "header.date", assumed: "a Date header on every answer (the API's clock, servertime.go)", paths: chargePaths},
	{id: "list.current", assumed: "list answers are read from the API, not a stored copy (their Date is not older than an earlier answer's)", paths: lookupPaths},

	{id: "request.pix", assumed: "the PIX body {offer_identifier, external_reference, customer} is accepted", documented: true, paths: []string{"pix/lost-answer"}},
	{id: "request.boleto", assumed: "the boleto body (the PIX body, due_date optional) is accepted", paths: []string{"boleto/lost-answer"}},
	{id: "request.credit-card", assumed: "the card body (the PIX body, card.token, installments) is accepted", paths: []string{"card/lost-answer"}},
	{id: "request.subscribe", assumed: "the subscribe body {external_reference, customer, payment_method} is accepted", paths: []string{"subscribe/lost-answer"}},
	{id: "request.plan-change", assumed: "the plan-change body {offer_identifier} is accepted", paths: []string{"plan-change/answer"}},
	{id: "request.refund", assumed: "the refund body {sale_identifier, amount (centavos), reason} is accepted", paths: []string{"refund/lost-answer"}},
	{id: "http.charge", assumed: "201 on POST /payments/{pix,boleto,credit-card}", paths: chargePaths},
	{id: "http.subscribe", assumed: "201 on POST /plans/offer/{id}/subscribe", paths: subPaths},
	{id: "http.plan-change", assumed: "200 on POST /subscriptions/{id}/plan-change", paths: pcPaths},
	{id: "http.refund", assumed: "201 on POST /refunds", paths: refundPaths},
	{id: "http.declined", assumed: "402 " + wire.CodeDeclined + " for a declined card (needs a declining test card: not run)", optional: true},
	{id: "route.reads", assumed: "GET /sales?external_reference=, /sales/{id}, /refunds?sale_identifier=, /subscriptions/{id} answer 200", documented: true, paths: lookupPaths},
	{id: "route.subscriptions-by-reference", assumed: "GET /subscriptions?external_reference= answers a list", paths: []string{"subscribe/lost-answer"}},
	{id: "list.shape", assumed: `lists are {"data": [...]}, unpaged`, paths: []string{"pix/lost-answer", "boleto/lost-answer", "card/lost-answer", "refund/lost-answer", "subscribe/lost-answer"}},
	{id: "error.shape", assumed: `errors are {"code": ..., "message": ...}`, paths: []string{"refund/refused"}},
	{id: "error.codes", assumed: "error codes are the SDK's known ones (wire.KnownErrorCodes)", paths: []string{"refund/refused"}},

	{id: "method.pix", assumed: `payment_method "` + wire.MethodPix + `"`, paths: cat([]string{"pix/lost-answer", "pix/replay"}, subPaths)},
	{id: "method.boleto", assumed: `payment_method "` + wire.MethodBoleto + `"`, paths: []string{"boleto/lost-answer", "boleto/replay"}},
	{id: "method.credit_card", assumed: `payment_method "` + wire.MethodCreditCard + `"`, paths: []string{"card/lost-answer", "card/replay"}},

	{id: "status.sale.pending", assumed: `a new PIX or boleto sale is "` + wire.SaleStatusPending + `"`, paths: []string{"pix/lost-answer", "pix/replay", "boleto/lost-answer", "boleto/replay"}},
	{id: "status.sale.paid", assumed: `an approved card sale is "` + wire.SaleStatusPaid + `"`, paths: []string{"card/lost-answer", "card/replay"}},
	{id: "status.sale.partially_refunded", assumed: `a partly refunded sale is "` + wire.SaleStatusPartiallyRefunded + `"`},
	{id: "status.sale.refunded", assumed: `a fully refunded sale is "` + wire.SaleStatusRefunded + `"`},
	{id: "status.sale.declined", assumed: `a declined sale is "` + wire.SaleStatusDeclined + `" (needs a declining test card: not run)`, optional: true},
	{id: "status.refund", assumed: `a new refund is "` + wire.RefundStatusPending + `" or "` + wire.RefundStatusCompleted + `"`, paths: refundPaths},
	{id: "status.subscription", assumed: `a new subscription is "` + wire.SubscriptionStatusPending + `" or "` + wire.SubscriptionStatusActive + `"`, paths: subPaths},
	{id: "status.plan-change", assumed: `a plan change is "` + wire.PlanChangeStatusApplied + `"`, paths: pcPaths},

	{id: "sale.identifier", assumed: "sale.identifier (string)", paths: chargePaths},
	{id: "sale.status", assumed: "sale.status (string)", paths: chargePaths},
	{id: "sale.external_reference", assumed: "sale.external_reference (string)", paths: chargePaths},
	{id: "sale.payment_method", assumed: "sale.payment_method (string)", paths: chargePaths},
	{id: "sale.amount", assumed: "sale.amount (integer centavos)", paths: []string{"refund/refused", "refund/answer"}},
	{id: "sale.refunded_amount", assumed: "sale.refunded_amount (integer centavos)"},
	{id: "sale.offer_identifier", assumed: "sale.offer_identifier (string)", paths: chargeLookups},
	{id: "sale.subscription_id", assumed: "sale.subscription_id on a subscription's sale", paths: chargeLookups},
	{id: "sale.created_at", assumed: "sale.created_at (RFC 3339, UTC, sub-second)", paths: chargeLookups},
	{id: "sale.pix", assumed: "sale.pix {qr_code, copy_paste, expires_at}"},
	{id: "sale.boleto", assumed: "sale.boleto {url, barcode, due_date}"},

	{id: "refund.identifier", assumed: "refund.identifier (string)", paths: refundPaths},
	{id: "refund.sale_identifier", assumed: "refund.sale_identifier (string)", paths: refundPaths},
	{id: "refund.amount", assumed: "refund.amount (integer centavos, as sent)", paths: refundPaths},
	{id: "refund.status", assumed: "refund.status (string)", paths: refundPaths},
	{id: "refund.created_at", assumed: "refund.created_at (RFC 3339, UTC, sub-second)", paths: refundPaths},

	{id: "subscription.id", assumed: "subscription.id (string)", paths: cat(subPaths, pcPaths)},
	{id: "subscription.status", assumed: "subscription.status (string)", paths: subPaths},
	{id: "subscription.external_reference", assumed: "subscription.external_reference (string)", paths: subPaths},
	{id: "subscription.offer_identifier", assumed: "subscription.offer_identifier (string)", paths: cat(subPaths, pcPaths)},
	{id: "subscription.payment_method", assumed: "subscription.payment_method (string)", paths: subPaths},
	{id: "subscription.amount", assumed: "subscription.amount (integer centavos)"},
	{id: "subscription.next_billing_at", assumed: "subscription.next_billing_at (string)"},
	{id: "subscription.created_at", assumed: "subscription.created_at (RFC 3339, UTC, sub-second)", paths: subPaths},
	{id: "subscription.plan_changes", assumed: "subscription.plan_changes (array of plan changes)", paths: []string{"plan-change/lost-answer", "subscribe/lost-answer"}},

	{id: "plan-change.answer", assumed: "POST /subscriptions/{id}/plan-change answers a plan change", paths: []string{"plan-change/answer", "plan-change/replay"}},
	{id: "plan_change.id", assumed: "plan_change.id (string)", paths: pcPaths},
	{id: "plan_change.subscription_id", assumed: "plan_change.subscription_id (string)", paths: pcPaths},
	{id: "plan_change.from_offer_identifier", assumed: "plan_change.from_offer_identifier (string)", paths: pcPaths},
	{id: "plan_change.offer_identifier", assumed: "plan_change.offer_identifier (string)", paths: pcPaths},
	{id: "plan_change.status", assumed: "plan_change.status (string)", paths: pcPaths},
	{id: "plan_change.created_at", assumed: "plan_change.created_at (RFC 3339, UTC, sub-second)", paths: pcPaths},

	{id: "webhooks", assumed: "webhook envelope and events (the check receives none: see examples/webhook)", documented: true, optional: true},
}
