package apicheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

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

// obs is one observation of a shape.
type obs struct {
	st    Status // Confirmed, Differs or Absent
	value string // what was seen, when not as assumed
	where string
}

// observer gathers observations by item.
type observer struct {
	by map[string][]obs
	rd *redactor
}

// add records an observation; what it says is scrubbed (redactor).
func (o *observer) add(id string, st Status, value, where string) {
	o.by[id] = append(o.by[id], obs{st: st, value: o.rd.scrub(value), where: o.rd.scrub(where)})
}

// route names an exchange's route as wire.go spells it.
func routeOf(x exchange) (name string, kind string) {
	p := x.path
	seg := strings.Split(strings.Trim(p, "/"), "/")
	switch {
	case x.method == http.MethodPost && p == wire.RoutePix:
		return "POST " + p, "pix"
	case x.method == http.MethodPost && p == wire.RouteBoleto:
		return "POST " + p, "boleto"
	case x.method == http.MethodPost && p == wire.RouteCreditCard:
		return "POST " + p, "card"
	case x.method == http.MethodPost && len(seg) == 4 && seg[0] == "plans" && seg[1] == "offer" && seg[3] == "subscribe":
		return "POST " + wire.RouteSubscribe, "subscribe"
	case x.method == http.MethodPost && len(seg) == 3 && seg[0] == "subscriptions" && seg[2] == "plan-change":
		return "POST " + wire.RoutePlanChange, "plan-change"
	case x.method == http.MethodPost && p == wire.RouteRefunds:
		return "POST " + p, "refund"
	case x.method == http.MethodGet && p == wire.RouteSales:
		return "GET " + p + "?external_reference=", "sales"
	case x.method == http.MethodGet && len(seg) == 2 && seg[0] == "sales":
		return "GET " + wire.RouteSale, "sale"
	case x.method == http.MethodGet && p == wire.RouteRefunds:
		return "GET " + p + "?sale_identifier=", "refunds"
	case x.method == http.MethodGet && p == wire.RouteSubscriptions:
		return "GET " + p + "?external_reference=", "subscriptions"
	case x.method == http.MethodGet && len(seg) == 2 && seg[0] == "subscriptions":
		return "GET " + wire.RouteSubscription, "subscription"
	}
	return x.method + " " + p, ""
}

// observe reads every exchange of the run.
func (r *runner) observe() *observer {
	o := &observer{by: map[string][]obs{}, rd: r.rec.rd}
	xs := r.rec.exchanges()
	methodOf := map[string]string{} // sale identifier → the method it was charged with
	first := map[string]exchange{}  // key → its first 2xx answer
	for _, x := range xs {
		if x.status == 0 || x.method != http.MethodPost || x.status < 200 || x.status >= 300 {
			continue
		}
		_, kind := routeOf(x)
		if m := methodOfKind(kind); m != "" {
			if obj, err := wire.ParseObject(x.body); err == nil {
				if id, _ := obj.Str(wire.FieldID); id != "" {
					methodOf[id] = m
				}
			}
		}
	}
	r.observeRequests(o, xs)
	observeOneEffect(o, xs)
	var latest time.Time // the latest Date of the answers so far
	for _, x := range xs {
		if x.status == 0 {
			continue
		}
		name, kind := routeOf(x)
		where := name + " (" + x.step + ")"
		r.observeHeaders(o, x, where)
		latest = observeCurrent(o, x, latest, where)
		ok2xx := x.status >= 200 && x.status < 300
		if !ok2xx {
			r.observeError(o, x, kind, where)
			continue
		}
		if x.method == http.MethodPost && x.key != "" && x.step != "in-progress" { // the race's answers arrive in any order
			if f, seen := first[x.key]; seen {
				observeReplay(o, f, x, where)
			} else {
				first[x.key] = x
				if x.replayed() {
					o.add("replay.header", Differs, "\"true\" on a key's first answer", where)
				}
			}
		}
		if x.step == "missing-key" {
			o.add("missing-key.400", Differs, fmt.Sprintf("%d: the POST was processed without a key", x.status), where)
			continue
		}
		if x.step == "in-progress" {
			continue // the race's winner: a PIX like the others
		}
		fresh := x.method == http.MethodPost && !x.replayed()
		switch kind {
		case "pix", "boleto", "card":
			if fresh {
				statusCode(o, "http.charge", x, wire.StatusChargeCreated, where)
			}
			r.observeSale(o, x.body, methodOfKind(kind), x.step, where)
		case "subscribe":
			if fresh {
				statusCode(o, "http.subscribe", x, wire.StatusSubscribed, where)
			}
			r.observeSubscription(o, x.body, where, true)
		case "plan-change":
			if fresh {
				statusCode(o, "http.plan-change", x, wire.StatusPlanChanged, where)
			}
			r.observePlanChangeAnswer(o, x.body, where)
		case "refund":
			if fresh {
				statusCode(o, "http.refund", x, wire.StatusRefundCreated, where)
			}
			r.observeRefund(o, x.body, r.sentAmount(x.step), where)
		case "sale":
			o.add("route.reads", Confirmed, "", where)
			obj, err := wire.ParseObject(x.body)
			m := ""
			if err == nil {
				id, _ := obj.Str(wire.FieldID)
				m = methodOf[id]
			}
			r.observeSale(o, x.body, m, x.step, where)
		case "sales", "refunds", "subscriptions":
			if kind == "subscriptions" {
				o.add("route.subscriptions-by-reference", Confirmed, "", where)
			} else {
				o.add("route.reads", Confirmed, "", where)
			}
			items := observeList(o, x, where)
			if x.step == "missing-key/lookup" {
				if ids := r.keylessSales(x); len(ids) > 0 {
					o.add("missing-key.400", Differs, fmt.Sprintf("the POST without a key created %s (found by GET %s?external_reference=)", strings.Join(ids, ", "), wire.RouteSales), where)
				}
			}
			for _, it := range items {
				switch kind {
				case "sales":
					m := wire.MethodPix // the subscription's sale: subscribed by PIX
					if obj, err := wire.ParseObject(it); err == nil {
						if id, _ := obj.Str(wire.FieldID); methodOf[id] != "" {
							m = methodOf[id]
						}
					}
					r.observeSale(o, it, m, x.step, where)
					if x.query.Get("external_reference") == r.ref("subscription") {
						observeSubscriptionSale(o, it, where)
					}
				case "refunds":
					r.observeRefund(o, it, -1, where)
				case "subscriptions":
					r.observeSubscription(o, it, where, false)
				}
			}
		case "subscription":
			o.add("route.reads", Confirmed, "", where)
			r.observeSubscription(o, x.body, where, false)
		}
	}
	return o
}

// keylessSales are the sales a missing-key/lookup answer lists under the
// keyless POST's reference (an item whose reference cannot be read
// counts: the list was asked for that reference only).
func (r *runner) keylessSales(x exchange) []string {
	page, err := wire.ParseList(x.body, x.header)
	if err != nil {
		return nil
	}
	var ids []string
	for _, it := range page.Items {
		obj, err := wire.ParseObject(it)
		if err != nil {
			continue
		}
		if ref, st := obj.Str(wire.FieldExternalReference); st == wire.Read && ref != r.ref("no-key") {
			continue
		}
		if id, _ := obj.Str(wire.FieldID); id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}

// observeOneEffect: per Idempotency-Key sent, the effects its 2xx answers
// name (the identifier; the body when none can be read). A key answered
// 2xx at least twice shows the shape: one effect is confirmed; two or more
// differ, and the fresh answers (no replay header) among them are effects
// the API made twice for one operation.
func observeOneEffect(o *observer, xs []exchange) {
	type answers struct {
		steps   []string
		effects []string
		n       int
		route   string
	}
	by := map[string]*answers{}
	var keys []string
	for _, x := range xs {
		if x.method != http.MethodPost || x.key == "" || x.status < 200 || x.status >= 300 {
			continue
		}
		a := by[x.key]
		if a == nil {
			name, _ := routeOf(x)
			a = &answers{route: name}
			by[x.key] = a
			keys = append(keys, x.key)
		}
		a.n++
		if !slices.Contains(a.steps, x.step) {
			a.steps = append(a.steps, x.step)
		}
		effect := "a body without an identifier: " + o.snip(x.body)
		if obj, err := wire.ParseObject(x.body); err == nil {
			if id, _ := obj.Str(wire.FieldID); id != "" {
				effect = id
			}
		}
		if !slices.Contains(a.effects, effect) {
			a.effects = append(a.effects, effect)
		}
	}
	for _, k := range keys {
		a := by[k]
		if a.n < 2 {
			continue
		}
		where := a.route + " (" + strings.Join(a.steps, ", ") + ")"
		if len(a.effects) == 1 {
			o.add("idempotency.one-effect", Confirmed, "", where)
			continue
		}
		o.add("idempotency.one-effect", Differs, fmt.Sprintf("one key got %d 2xx answers naming %d effects (%s): the API made the operation more than once", a.n, len(a.effects), strings.Join(a.effects, ", ")), where)
	}
}

func methodOfKind(kind string) string {
	switch kind {
	case "pix":
		return wire.MethodPix
	case "boleto":
		return wire.MethodBoleto
	case "card":
		return wire.MethodCreditCard
	}
	return ""
}

// sentAmount is the refund amount a step sent (-1: not known).
func (r *runner) sentAmount(step string) int64 {
	switch step {
	case "refund/lookup", "refund/replay":
		return 1
	case "refund/rest":
		return r.rest
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if n, ok := r.cleanupSent[step]; ok {
		return n
	}
	return -1
}

// observeCurrent reports a list answer whose Date is older than an
// earlier answer's by more than Date's whole second (a cache's stored
// copy, Age or not), and returns the latest Date seen.
func observeCurrent(o *observer, x exchange, latest time.Time, where string) time.Time {
	list := x.method == http.MethodGet && x.status >= 200 && x.status < 300 && (x.query.Has("external_reference") || x.query.Has("sale_identifier"))
	d, err := http.ParseTime(x.header.Get("Date"))
	if err != nil {
		if list {
			o.add("list.current", Absent, "no Date header to tell a stored copy by", where)
		}
		return latest
	}
	if list {
		if !latest.IsZero() && d.Add(2*time.Second).Before(latest) {
			o.add("list.current", Differs, "Date "+x.header.Get("Date")+" after an answer of "+latest.Format(http.TimeFormat), where)
		} else {
			o.add("list.current", Confirmed, "", where)
		}
	}
	if d.After(latest) {
		return d
	}
	return latest
}

func (r *runner) observeHeaders(o *observer, x exchange, where string) {
	switch d := x.header.Get("Date"); {
	case d == "":
		o.add("header.date", Absent, "", where)
	default:
		if _, err := http.ParseTime(d); err != nil {
			o.add("header.date", Differs, d, where)
		} else {
			o.add("header.date", Confirmed, "", where)
		}
	}
	if x.header.Get(wire.HeaderRequestID) == "" {
		o.add("header.request-id", Absent, "", where)
	} else {
		o.add("header.request-id", Confirmed, "", where)
	}
	if x.status == http.StatusTooManyRequests || x.status == http.StatusServiceUnavailable {
		switch v := x.header.Get(wire.HeaderRetryAfter); {
		case v == "":
			o.add("header.retry-after", Absent, "", where)
		default:
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err != nil || n < 0 {
				o.add("header.retry-after", Differs, v, where)
			} else {
				o.add("header.retry-after", Confirmed, "", where)
			}
		}
	}
}

func statusCode(o *observer, id string, x exchange, want int, where string) {
	if x.status == want {
		o.add(id, Confirmed, "", where)
	} else {
		o.add(id, Differs, strconv.Itoa(x.status), where)
	}
}

func observeReplay(o *observer, first, x exchange, where string) {
	if x.replayed() {
		o.add("replay.header", Confirmed, "", where)
	} else if v := x.header.Get(wire.HeaderReplayed); v != "" {
		o.add("replay.header", Differs, wire.HeaderReplayed+": "+v, where)
	} else {
		o.add("replay.header", Absent, "", where)
	}
	switch {
	case x.status != first.status:
		o.add("replay.body", Differs, fmt.Sprintf("status %d, the first answer's %d", x.status, first.status), where)
	case !jsonEqual(first.body, x.body):
		o.add("replay.body", Differs, "a body other than the first answer's: "+o.snip(x.body), where)
	default:
		o.add("replay.body", Confirmed, "", where)
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(x, y)
}

// snip is an answer's bytes on one line, scrubbed (redactor), then cut to
// 120 bytes: the scrub comes first, so a cut cannot leave part of a
// secret that no longer matches.
func (o *observer) snip(b []byte) string { return o.cut(o.rd.scrub(oneLine(string(b)))) }

// snipErr is snip for an error answer (not 2xx): there digits are no
// shape evidence, so runs of six digits or more (a document, a card
// number, a phone an error page echoes) are removed too.
func (o *observer) snipErr(b []byte) string {
	return o.cut(scrubDigits(o.rd.scrub(oneLine(string(b)))))
}

func (o *observer) cut(s string) string {
	if len(s) > 120 {
		cut := 117
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}

func (r *runner) observeError(o *observer, x exchange, kind, where string) {
	switch x.step {
	case "missing-key":
		if x.status == http.StatusBadRequest {
			o.add("missing-key.400", Confirmed, "", where)
		} else {
			o.add("missing-key.400", Differs, strconv.Itoa(x.status)+" "+o.snipErr(x.body), where)
		}
	case "in-progress":
		if x.status == http.StatusConflict {
			if _, msg, _ := wire.APIError(x.header.Get("Content-Type"), x.body); msg == wire.MsgInProgress {
				o.add("in-progress.409", Confirmed, "", where)
			} else {
				o.add("in-progress.409", Differs, "409 "+o.snipErr(x.body), where)
			}
		}
	}
	if kind == "card" && x.status == wire.StatusDeclined {
		o.add("http.declined", Confirmed, "", where) // the test card was declined
	}
	transient := x.status == http.StatusTooManyRequests || x.status >= 500 // says nothing about the route
	switch kind {
	case "sale", "sales", "refunds", "subscription":
		if x.step != "not-found" && !transient {
			o.add("route.reads", Differs, fmt.Sprintf("%d %s", x.status, o.snipErr(x.body)), where)
		}
	case "subscriptions":
		switch {
		case transient:
		case x.status == http.StatusNotFound || x.status == http.StatusMethodNotAllowed || x.status == http.StatusNotImplemented:
			o.add("route.subscriptions-by-reference", Absent, strconv.Itoa(x.status), where)
		default:
			o.add("route.subscriptions-by-reference", Differs, fmt.Sprintf("%d %s", x.status, o.snipErr(x.body)), where)
		}
	}
	// The error body.
	obj, err := wire.ParseObject(x.body)
	if err != nil {
		o.add("error.shape", Differs, fmt.Sprintf("%d %s: %s", x.status, x.header.Get("Content-Type"), o.snipErr(x.body)), where)
		return
	}
	code, cst := obj.Str([]string{"code"})
	_, mst := obj.Str([]string{"message"})
	if cst == wire.Read && mst == wire.Read {
		o.add("error.shape", Confirmed, "", where)
	} else {
		var keys []string
		obj.Range(func(k string, _ json.RawMessage) { keys = append(keys, k) })
		o.add("error.shape", Differs, fmt.Sprintf("%d with members {%s}", x.status, strings.Join(keys, ", ")), where)
	}
	if cst != wire.Read {
		o.add("error.codes", Absent, "", where)
	} else {
		if wire.KnownErrorCodes[code] {
			o.add("error.codes", Confirmed, "", where)
		} else {
			o.add("error.codes", Differs, strconv.Quote(code), where)
		}
	}
}

// observeList checks a list answer's shape and returns its items.
func observeList(o *observer, x exchange, where string) []json.RawMessage {
	b := bytes.TrimSpace(x.body)
	var extras []string
	if len(b) > 0 && b[0] == '[' {
		extras = append(extras, "a bare JSON array")
	} else if obj, err := wire.ParseObject(b); err == nil {
		hasData := false
		obj.Range(func(k string, v json.RawMessage) {
			if k == "data" && len(bytes.TrimSpace(v)) > 0 && bytes.TrimSpace(v)[0] == '[' {
				hasData = true
				return
			}
			extras = append(extras, k)
		})
		if !hasData {
			extras = append([]string{"no \"data\" array"}, extras...)
		}
	}
	if l := x.header.Get("Link"); l != "" {
		extras = append(extras, "Link header "+l)
	}
	page, err := wire.ParseList(x.body, x.header)
	switch {
	case err != nil:
		o.add("list.shape", Differs, "unreadable: "+err.Error(), where)
		return nil
	case len(extras) > 0:
		o.add("list.shape", Differs, "with "+strings.Join(extras, ", "), where)
	default:
		o.add("list.shape", Confirmed, "", where)
	}
	return page.Items
}

// A field check: name present as the assumed type → confirmed; under an
// alias the SDK reads → differs (named so); a wrong type → differs; none
// → absent.
type fieldType int

const (
	tString fieldType = iota
	tInt
	tTime
	tArray
)

func checkField(o *observer, id string, obj wire.Object, name string, aliases []string, t fieldType, where string) (json.RawMessage, bool) {
	v, ok := obj.Get(name)
	if !ok || isNull(v) {
		for _, a := range aliases {
			if a == name {
				continue
			}
			if av, aok := getPath(obj, a); aok && !isNull(av) {
				o.add(id, Differs, fmt.Sprintf("named %q: %s", a, o.snip(av)), where)
				return nil, false
			}
		}
		o.add(id, Absent, "", where)
		return nil, false
	}
	b := bytes.TrimSpace(v)
	switch t {
	case tString:
		var s string
		if json.Unmarshal(b, &s) != nil || strings.TrimSpace(s) == "" {
			o.add(id, Differs, "not a non-empty string: "+o.snip(b), where)
			return v, false
		}
	case tInt:
		if _, err := strconv.ParseInt(string(b), 10, 64); err != nil {
			o.add(id, Differs, "not an integer: "+o.snip(b), where)
			return v, false
		}
	case tTime:
		var s string
		if json.Unmarshal(b, &s) != nil {
			o.add(id, Differs, "not a string: "+o.snip(b), where)
			return v, false
		}
		tm, err := time.Parse(time.RFC3339Nano, s)
		switch {
		case err != nil:
			o.add(id, Differs, "not RFC 3339: "+s, where)
			return v, false
		case !strings.HasSuffix(s, "Z"):
			o.add(id, Differs, fmt.Sprintf("offset %s, not UTC: %s", tm.Format("-07:00"), s), where)
			return v, false
		case !strings.Contains(s, "."):
			o.add(id, Differs, "whole seconds: "+s, where)
			return v, false
		}
	case tArray:
		if len(b) == 0 || b[0] != '[' {
			o.add(id, Differs, "not an array: "+o.snip(b), where)
			return v, false
		}
	}
	o.add(id, Confirmed, "", where)
	return v, true
}

func isNull(v json.RawMessage) bool {
	b := bytes.TrimSpace(v)
	return len(b) == 0 || string(b) == "null"
}

func getPath(o wire.Object, name string) (json.RawMessage, bool) {
	head, rest, nested := strings.Cut(name, ".")
	v, ok := o.Get(head)
	if !ok || !nested {
		return v, ok
	}
	inner, err := wire.ParseObject(v)
	if err != nil {
		return nil, false
	}
	return getPath(inner, rest)
}

func strOf(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	return strings.TrimSpace(string(v))
}

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
	checkField(o, "sale.identifier", obj, "identifier", wire.FieldID, tString, where)
	if v, ok := checkField(o, "sale.status", obj, "status", wire.FieldStatus, tString, where); ok && method != "" {
		if want := r.expectedSaleStatus(method, step); want != "" {
			if got := strOf(v); got == want {
				o.add("status.sale."+want, Confirmed, "", where)
			} else {
				o.add("status.sale."+want, Differs, strconv.Quote(got), where)
			}
		}
	}
	checkField(o, "sale.external_reference", obj, "external_reference", wire.FieldExternalReference, tString, where)
	if v, ok := checkField(o, "sale.payment_method", obj, "payment_method", wire.FieldPaymentMethod, tString, where); ok && method != "" {
		observeMethod(o, strOf(v), method, where)
	} else if !ok && method != "" {
		if s, st := obj.Str(wire.FieldPaymentMethod); st == wire.Read {
			observeMethod(o, s, method, where)
		}
	}
	checkField(o, "sale.amount", obj, "amount", wire.FieldAmount, tInt, where)
	checkField(o, "sale.refunded_amount", obj, "refunded_amount", []string{"refunded_amount", "refundedAmount", "amount_refunded"}, tInt, where)
	checkField(o, "sale.offer_identifier", obj, "offer_identifier", wire.FieldOffer, tString, where)
	checkField(o, "sale.created_at", obj, "created_at", wire.FieldCreatedAt, tTime, where)
	switch method {
	case wire.MethodPix:
		observeNested(o, "sale.pix", obj, "pix", []string{"qr_code", "copy_paste", "expires_at"}, where)
	case wire.MethodBoleto:
		observeNested(o, "sale.boleto", obj, "boleto", []string{"url", "barcode", "due_date"}, where)
	}
}

func observeSubscriptionSale(o *observer, body []byte, where string) {
	obj, err := wire.ParseObject(body)
	if err != nil {
		return
	}
	checkField(o, "sale.subscription_id", obj, "subscription_id", wire.FieldSubscriptionID, tString, where)
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

func observeNested(o *observer, id string, obj wire.Object, name string, members []string, where string) {
	v, ok := obj.Get(name)
	if !ok || isNull(v) {
		o.add(id, Absent, "", where)
		return
	}
	inner, err := wire.ParseObject(v)
	if err != nil {
		o.add(id, Differs, "not an object: "+o.snip(v), where)
		return
	}
	var missing []string
	for _, m := range members {
		if s, st := inner.Str([]string{m}); st != wire.Read || s == "" {
			missing = append(missing, m)
		}
	}
	if len(missing) > 0 {
		o.add(id, Differs, "without "+strings.Join(missing, ", "), where)
		return
	}
	o.add(id, Confirmed, "", where)
}

func (r *runner) observeRefund(o *observer, body []byte, sent int64, where string) {
	obj, err := wire.ParseObject(body)
	if err != nil {
		o.add("refund.identifier", Differs, "not a JSON object: "+o.snip(body), where)
		return
	}
	checkField(o, "refund.identifier", obj, "identifier", wire.FieldID, tString, where)
	checkField(o, "refund.sale_identifier", obj, "sale_identifier", wire.FieldSaleID, tString, where)
	if v, ok := checkField(o, "refund.amount", obj, "amount", wire.FieldAmount, tInt, where); ok {
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
	if v, ok := checkField(o, "refund.status", obj, "status", wire.FieldStatus, tString, where); ok {
		if got := strOf(v); got == wire.RefundStatusPending || got == wire.RefundStatusCompleted {
			o.add("status.refund", Confirmed, "", where)
		} else {
			o.add("status.refund", Differs, fmt.Sprintf("%q (%s)", got, statusNote(wire.RefundStatuses, got)), where)
		}
	}
	checkField(o, "refund.created_at", obj, "created_at", wire.FieldCreatedAt, tTime, where)
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

func (r *runner) observeSubscription(o *observer, body []byte, where string, fresh bool) {
	obj, err := wire.ParseObject(body)
	if err != nil {
		o.add("subscription.id", Differs, "not a JSON object: "+o.snip(body), where)
		return
	}
	checkField(o, "subscription.id", obj, "id", wire.FieldID, tString, where)
	if v, ok := checkField(o, "subscription.status", obj, "status", wire.FieldStatus, tString, where); ok && fresh {
		if got := strOf(v); got == wire.SubscriptionStatusPending || got == wire.SubscriptionStatusActive {
			o.add("status.subscription", Confirmed, "", where)
		} else {
			o.add("status.subscription", Differs, fmt.Sprintf("%q (%s)", got, statusNote(wire.SubscriptionStatuses, got)), where)
		}
	}
	checkField(o, "subscription.external_reference", obj, "external_reference", wire.FieldExternalReference, tString, where)
	checkField(o, "subscription.offer_identifier", obj, "offer_identifier", wire.FieldOffer, tString, where)
	if v, ok := checkField(o, "subscription.payment_method", obj, "payment_method", wire.FieldPaymentMethod, tString, where); ok {
		observeMethod(o, strOf(v), wire.MethodPix, where)
	}
	checkField(o, "subscription.amount", obj, "amount", wire.FieldAmount, tInt, where)
	checkField(o, "subscription.next_billing_at", obj, "next_billing_at", []string{"next_billing_at", "nextBillingAt", "next_charge_at"}, tString, where)
	checkField(o, "subscription.created_at", obj, "created_at", wire.FieldCreatedAt, tTime, where)
	if v, ok := checkField(o, "subscription.plan_changes", obj, "plan_changes", wire.FieldPlanChanges, tArray, where); ok {
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
	return obj.Has(wire.FieldExternalReference) || obj.Has(wire.FieldPlanChanges) || obj.Has([]string{"next_billing_at"})
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
	checkField(o, "plan_change.id", obj, "id", wire.FieldID, tString, where)
	checkField(o, "plan_change.subscription_id", obj, "subscription_id", wire.FieldSubscriptionID, tString, where)
	checkField(o, "plan_change.from_offer_identifier", obj, "from_offer_identifier", wire.FieldFromOffer, tString, where)
	checkField(o, "plan_change.offer_identifier", obj, "offer_identifier", wire.FieldOffer, tString, where)
	if v, ok := checkField(o, "plan_change.status", obj, "status", wire.FieldStatus, tString, where); ok {
		if got := strOf(v); got == wire.PlanChangeStatusApplied {
			o.add("status.plan-change", Confirmed, "", where)
		} else {
			o.add("status.plan-change", Differs, fmt.Sprintf("%q (%s)", got, statusNote(wire.PlanChangeStatuses, got)), where)
		}
	}
	checkField(o, "plan_change.created_at", obj, "created_at", wire.FieldCreatedAt, tTime, where)
}

// requestSteps are the steps whose first POST is a key's first send of
// the SDK's body for a route.
var requestSteps = map[string]string{
	"pix/lookup": "request.pix", "boleto/lookup": "request.boleto", "card/lookup": "request.credit-card",
	"subscribe/lookup": "request.subscribe", "plan-change/answer": "request.plan-change", "refund/lookup": "request.refund",
}

// observeRequests: the API's answer to the first POST of each step that
// sends a route's body for the first time says whether it accepts it.
func (r *runner) observeRequests(o *observer, xs []exchange) {
	done := map[string]bool{}
	for _, x := range xs {
		id, ok := requestSteps[x.step]
		if !ok || x.method != http.MethodPost || done[x.step] || x.status == 0 {
			continue
		}
		done[x.step] = true
		name, _ := routeOf(x)
		where := name + " (" + x.step + ")"
		if x.status >= 200 && x.status < 300 {
			o.add(id, Confirmed, "", where)
			continue
		}
		o.add(id, Differs, fmt.Sprintf("answered %d: %s", x.status, o.snipErr(x.body)), where)
	}
}
