// The observer every route's items share: it records what each exchange
// showed, and checks headers, status codes, replays, error answers and one
// effect per key.

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
	case x.method == http.MethodGet && len(seg) == 2 && seg[0] == "sales" && strings.HasPrefix(seg[1], wire.ClockProbePrefix):
		return "GET " + wire.RouteSale, "" // the SDK's clock probe: its 404 is the point
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
				if id, _ := obj.Str(wire.AllNames(wire.FID)); id != "" {
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
				id, _ := obj.Str(wire.AllNames(wire.FID))
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
						if id, _ := obj.Str(wire.AllNames(wire.FID)); methodOf[id] != "" {
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
		if ref, st := obj.Str(wire.AllNames(wire.FRef)); st == wire.Read && ref != r.ref("no-key") {
			continue
		}
		if id, _ := obj.Str(wire.AllNames(wire.FID)); id != "" {
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
			if id, _ := obj.Str(wire.AllNames(wire.FID)); id != "" {
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
