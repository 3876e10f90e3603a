package pagpolar

import (
	"github.com/pagpolar/pagpolar-go/internal/wire"

	"net/http"
	"strings"
	"testing"
	"time"
)

// The attribution table: every shape variant of a found effect and of a 2xx
// answer, against what is known about the operation (SAFETY rules 5, 7, 11,
// 12). "Exclusion needs proof": only recognised differences, the snapshot,
// a claim and a validated clock exclude; everything unrecognised is
// unclear.

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func ts(d time.Duration) string { return t0.Add(d).Format(time.RFC3339Nano) }

func pixFacts() opFacts {
	return opFacts{kind: kindPix, ref: "o1", offer: "offer-basic", method: "pix", floor: t0, tolerance: 2 * time.Second, shapes: taughtShapes(wire.AnswerList, wire.AnswerPost)}
}

func cardFacts() opFacts {
	f := pixFacts()
	f.kind, f.method = kindCreditCard, "credit_card"
	return f
}

func refundFacts() opFacts {
	return opFacts{kind: kindRefund, saleID: "s1", amount: 1500, snapshotted: true, snapshot: map[string]bool{"rf_old": true},
		floor: t0, tolerance: 2 * time.Second, shapes: taughtShapes(wire.AnswerList, wire.AnswerPost)}
}

func sale(fields string) string {
	return `{"identifier":"s9","external_reference":"o1","offer_identifier":"offer-basic","status":"pending","created_at":"` + ts(time.Second) + `"` + fields + `}`
}

func TestAttributeFound(t *testing.T) {
	learnedZZ := &shapes{}
	learnedZZ.learnMethod("zz", "pix")
	echo := taughtShapes(wire.AnswerList)
	cases := []struct {
		name  string
		kind  effectKind
		body  string
		facts func() opFacts
		want  attribution
	}{
		// Charges.
		{"today's shape, after the first send", effSale, sale(`,"payment_method":"pix"`), pixFacts, attrOurs},
		{"created well before the first send", effSale, strings.Replace(sale(`,"payment_method":"pix"`), ts(time.Second), ts(-10*time.Second), 1), pixFacts, attrOther},
		{"created within the tolerance before", effSale, strings.Replace(sale(`,"payment_method":"pix"`), ts(time.Second), ts(-time.Second), 1), pixFacts, attrOurs},
		{"whole seconds, within tolerance plus precision", effSale, strings.Replace(sale(`,"payment_method":"pix"`), ts(time.Second), t0.Add(-2500*time.Millisecond).Truncate(time.Second).Format(time.RFC3339), 1), pixFacts, attrOurs},
		{"created in São Paulo's offset", effSale, strings.Replace(sale(`,"payment_method":"pix"`), ts(time.Second), t0.Add(time.Second).In(time.FixedZone("BRT", -3*3600)).Format(time.RFC3339Nano), 1), pixFacts, attrOurs},
		{"no creation time, no snapshot", effSale, `{"identifier":"s9","payment_method":"pix","status":"pending"}`, pixFacts, attrUnclear},
		{"no creation time, snapshot", effSale, `{"identifier":"s9","external_reference":"o1","payment_method":"pix","status":"pending"}`, func() opFacts { f := pixFacts(); f.snapshotted = true; return f }, attrOurs},
		{"no reference: the list's filter unchecked", effSale, `{"identifier":"s9","payment_method":"pix","status":"pending","created_at":"` + ts(time.Second) + `"}`, func() opFacts { f := pixFacts(); f.snapshotted = true; return f }, attrUnclear},
		{"time without a zone", effSale, strings.Replace(sale(`,"payment_method":"pix"`), ts(time.Second), "2026-12-01T12:00:01", 1), pixFacts, attrUnclear},
		{"no validated clock, no snapshot", effSale, sale(`,"payment_method":"pix"`), func() opFacts { f := pixFacts(); f.floor = time.Time{}; return f }, attrUnclear},
		{"snapshot wins over time", effSale, strings.Replace(sale(`,"payment_method":"pix"`), ts(time.Second), ts(-time.Hour), 1), func() opFacts { f := pixFacts(); f.snapshotted = true; return f }, attrOurs},
		{"in the snapshot", effSale, sale(`,"payment_method":"pix"`), func() opFacts { f := pixFacts(); f.snapshot = map[string]bool{"s9": true}; return f }, attrOther},
		{"in the snapshot, after a 409 from another sender", effSale, sale(`,"payment_method":"pix"`), func() opFacts {
			f := pixFacts()
			f.snapshot, f.shared = map[string]bool{"s9": true}, true
			return f
		}, attrOurs},
		{"claimed by another operation", effSale, sale(`,"payment_method":"pix"`), func() opFacts { f := pixFacts(); f.claimed = map[string]bool{"s9": true}; return f }, attrOther},
		{"method credit-card", effSale, sale(`,"payment_method":"credit-card","status":"paid"`), cardFacts, attrOurs},
		{"method CREDIT_CARD", effSale, sale(`,"payment_method":"CREDIT_CARD","status":"paid"`), cardFacts, attrOurs},
		{"method card", effSale, sale(`,"payment_method":"card","status":"paid"`), cardFacts, attrOurs},
		{"method boleto for a PIX charge", effSale, sale(`,"payment_method":"boleto"`), pixFacts, attrOther},
		{"debit card for a card charge (same family)", effSale, sale(`,"payment_method":"debit_card","status":"paid"`), cardFacts, attrUnclear},
		{"unknown method", effSale, sale(`,"payment_method":"zz"`), pixFacts, attrUnclear},
		{"learned method, same", effSale, sale(`,"payment_method":"zz"`), func() opFacts { f := pixFacts(); f.shapes = learnedZZ; return f }, attrOurs},
		{"learned method is no proof of another", effSale, sale(`,"payment_method":"zz"`), func() opFacts { f := cardFacts(); f.shapes = learnedZZ; return f }, attrUnclear},
		{"no method, no snapshot", effSale, sale(``), pixFacts, attrUnclear},
		// New since the snapshot is not ours: another operation on the
		// reference may have made it; only the method tells them apart.
		{"no method, snapshot", effSale, sale(``), func() opFacts { f := pixFacts(); f.snapshotted = true; return f }, attrUnclear},
		{"another reference (filter ignored?)", effSale, strings.Replace(sale(`,"payment_method":"pix"`), `"o1"`, `"o2"`, 1), pixFacts, attrUnclear},
		{"a subscription's sale", effSale, sale(`,"payment_method":"pix","subscription_id":"sub_1"`), pixFacts, attrOther},
		{"subscription_id 0 is none", effSale, sale(`,"payment_method":"pix","subscription_id":0`), pixFacts, attrOurs},
		{"another offer, echo not learned", effSale, strings.Replace(sale(`,"payment_method":"pix"`), "offer-basic", "offer-premium", 1), func() opFacts { f := pixFacts(); f.shapes = &shapes{}; return f }, attrUnclear},
		{"another offer, echo learned", effSale, strings.Replace(sale(`,"payment_method":"pix"`), "offer-basic", "offer-premium", 1), func() opFacts { f := pixFacts(); f.shapes = echo; return f }, attrOther},
		{"declined", effSale, sale(`,"payment_method":"credit_card","status":"declined"`), cardFacts, attrOursRefused},
		{"card in analysis: ours, undecided", effSale, sale(`,"payment_method":"credit_card","status":"in_analysis"`), cardFacts, attrOurs},
		{"status nobody documented: ours, unrecognized", effSale, sale(`,"payment_method":"credit_card","status":"zz_new"`), cardFacts, attrOurs},
		{"Portuguese refusal", effSale, sale(`,"payment_method":"credit_card","status":"Recusado"`), cardFacts, attrOursRefused},
		{"no identifier", effSale, `{"payment_method":"pix","status":"pending"}`, pixFacts, attrUnclear},
		{"field-id shape", effSale, strings.Replace(sale(`,"payment_method":"pix"`), `"identifier"`, `"id"`, 1), pixFacts, attrOurs},
		// Refunds.
		{"refund, today", effRefund, `{"identifier":"rf_9","sale_identifier":"s1","amount":1500,"status":"completed"}`, refundFacts, attrOurs},
		{"refund in reais", effRefund, `{"identifier":"rf_9","sale_identifier":"s1","amount":15,"status":"completed"}`, refundFacts, attrOurs},
		{"refund as a float of centavos", effRefund, `{"identifier":"rf_9","sale_identifier":"s1","amount":1500.0,"status":"completed"}`, refundFacts, attrOurs},
		// A refund's amount never proves another refund (its "amount" may
		// be the sale's; a full refund's echo looks like proof).
		{"refund of another amount: unclear", effRefund, `{"identifier":"rf_9","sale_identifier":"s1","amount":700,"status":"completed"}`, refundFacts, attrUnclear},
		{"refund without sale identifier: the list's filter unchecked", effRefund, `{"identifier":"rf_9","amount":1500,"status":"completed"}`, refundFacts, attrUnclear},
		{"refund without amount", effRefund, `{"identifier":"rf_9","sale_identifier":"s1","status":"completed"}`, refundFacts, attrUnclear},
		{"refund of another sale", effRefund, `{"identifier":"rf_9","sale_identifier":"s2","amount":1500,"status":"completed"}`, refundFacts, attrOther},
		{"refund in the snapshot", effRefund, `{"identifier":"rf_old","sale_identifier":"s1","amount":1500,"status":"completed"}`, refundFacts, attrOther},
		// A status is the decision, never a reason to be unclear (SAFETY
		// rule 3): a requested refund is ours, undecided.
		{"refund requested", effRefund, `{"identifier":"rf_9","sale_identifier":"s1","amount":1500,"status":"requested"}`, refundFacts, attrOurs},
		{"refund failed", effRefund, `{"identifier":"rf_9","sale_identifier":"s1","amount":1500,"status":"failed"}`, refundFacts, attrOursRefused},
		// Subscriptions and plan changes.
		{"subscription changed plan since", effSubscription, `{"id":"sub_9","external_reference":"o1","offer_identifier":"plan-pro","payment_method":"pix","status":"active","created_at":"` + ts(time.Second) + `","plan_changes":[{"id":"pc1","from_offer_identifier":"offer-basic","offer_identifier":"plan-pro"}]}`,
			func() opFacts { f := pixFacts(); f.kind = kindSubscribe; return f }, attrOurs},
		{"subscription without created_at and method, snapshot", effSubscription, `{"id":"sub_9","external_reference":"o1","offer_identifier":"offer-basic","status":"active"}`,
			func() opFacts { f := pixFacts(); f.kind, f.snapshotted = kindSubscribe, true; return f }, attrUnclear},
		{"subscription without created_at and method, no snapshot", effSubscription, `{"id":"sub_9","external_reference":"o1","offer_identifier":"offer-basic","status":"active"}`,
			func() opFacts { f := pixFacts(); f.kind = kindSubscribe; return f }, attrUnclear},
		{"plan change to another offer", effPlanChange, `{"id":"pc9","offer_identifier":"plan-basic","status":"applied","created_at":"` + ts(time.Second) + `"}`,
			func() opFacts {
				return opFacts{kind: kindPlanChange, subID: "sub_1", offer: "plan-pro", snapshotted: true, shapes: &shapes{}}
			}, attrUnclear},
		{"plan change scheduled", effPlanChange, `{"id":"pc9","offer_identifier":"plan-pro","status":"scheduled"}`,
			func() opFacts {
				return opFacts{kind: kindPlanChange, subID: "sub_1", offer: "plan-pro", snapshotted: true, shapes: &shapes{}}
			}, attrOurs},
	}
	for _, c := range cases {
		e, err := readEffect(c.kind, wire.AnswerList, []byte(c.body))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got, why := attributeFound(e, c.facts()); got != c.want {
			t.Errorf("%s: %s (%s), want %s", c.name, got, why, c.want)
		}
	}
}

func TestAttributeAnswer(t *testing.T) {
	cases := []struct {
		name   string
		body   string
		facts  func() opFacts
		replay bool
		want   attribution
	}{
		{"fresh, today", sale(`,"payment_method":"pix"`), pixFacts, false, attrOurs},
		{"fresh, another method: our shape guess is wrong", sale(`,"payment_method":"boleto"`), pixFacts, false, attrUnclear},
		{"fresh, declined card", sale(`,"payment_method":"credit_card","status":"declined"`), cardFacts, false, attrOursRefused},
		{"fresh, no identifier", `{"payment_method":"pix","status":"pending"}`, pixFacts, false, attrUnclear},
		{"fresh, no status: the effect exists, its decision unrecognized", `{"identifier":"s9","payment_method":"pix"}`, pixFacts, false, attrOurs},
		{"replay for another reference: collision", strings.Replace(sale(`,"payment_method":"pix"`), `"o1"`, `"o2"`, 1), pixFacts, true, attrOther},
		{"replay, reference differing in case only", strings.Replace(sale(`,"payment_method":"pix"`), `"o1"`, `"O1"`, 1), pixFacts, true, attrUnclear},
		{"replay of a boleto for a PIX operation: collision", sale(`,"payment_method":"boleto"`), pixFacts, true, attrOther},
		{"replay paid by debit card, for a card operation", sale(`,"payment_method":"debit_card","status":"paid"`), cardFacts, true, attrUnclear},
		{"replay in an unknown spelling", sale(`,"payment_method":"zz"`), pixFacts, true, attrUnclear},
		{"replay of a refund of another amount: unclear, never a collision", `{"identifier":"rf_9","sale_identifier":"s1","amount":700,"status":"completed"}`, refundFacts, true, attrUnclear},
		{"replay of a refund as a float of centavos", `{"identifier":"rf_9","sale_identifier":"s1","amount":1500.0,"status":"completed"}`, refundFacts, true, attrOurs},
	}
	for _, c := range cases {
		kind := effSale
		if strings.Contains(c.body, "sale_identifier") {
			kind = effRefund
		}
		e, err := readEffect(kind, wire.AnswerPost, []byte(c.body))
		if err != nil {
			t.Fatal(err)
		}
		if got, why := attributeAnswer(e, c.facts(), c.replay); got != c.want {
			t.Errorf("%s: %s (%s), want %s", c.name, got, why, c.want)
		}
	}
}

func TestDecide(t *testing.T) {
	j := func(id string, a attribution) judged { return judged{e: effect{ID: id, kind: effSale}, a: a, why: id} }
	cases := []struct {
		name     string
		all      []judged
		complete bool
		want     lookupKind
		ref      string
	}{
		{"nothing", nil, true, lookupNotFound, ""},
		{"only others", []judged{j("a", attrOther)}, true, lookupNotFound, ""},
		{"one ours", []judged{j("a", attrOther), j("b", attrOurs)}, true, lookupSucceeded, "b"},
		{"two could be ours", []judged{j("a", attrOurs), j("b", attrOurs)}, true, lookupUnclear, ""},
		{"ours beside an earlier decline", []judged{j("a", attrOursRefused), j("b", attrOurs)}, true, lookupSucceeded, "b"},
		{"only a decline", []judged{j("a", attrOursRefused)}, true, lookupFailed, "a"},
		{"an unclear one beside ours", []judged{j("a", attrUnclear), j("b", attrOurs)}, true, lookupUnclear, ""},
		{"an incomplete list", []judged{j("b", attrOurs)}, false, lookupUnclear, ""},
		{"an incomplete empty list", nil, false, lookupUnclear, ""},
	}
	for _, c := range cases {
		lo := decide(c.all, c.complete, "incomplete")
		if lo.kind != c.want || (c.ref != "" && lo.ref != c.ref) {
			t.Errorf("%s: kind %v ref %q, want %v %q", c.name, lo.kind, lo.ref, c.want, c.ref)
		}
	}
}

// The server-clock bound: a median of lower bounds, switched off for good
// when the API's own answer contradicts it, and validated only by an answer
// that sits comfortably after it.
func TestServerClock(t *testing.T) {
	var sc serverClock
	now := t0
	if _, ok := sc.floor(now); ok {
		t.Fatal("a bound without any Date")
	}
	for i, skew := range []time.Duration{0, time.Second, 10 * time.Minute} { // one answer from a gateway far ahead
		h := map[string][]string{"Date": {now.Add(skew).Format("Mon, 02 Jan 2006 15:04:05 GMT")}}
		at := now.Add(time.Duration(i) * time.Millisecond)
		sc.observe(h, at, at, 2*time.Second)
	}
	f, ok := sc.floor(now.Add(time.Second))
	if !ok || f.After(now.Add(2*time.Second)) {
		t.Fatalf("bound %v (%v): one outlier moved it", f, ok)
	}
	if sc.usable() {
		t.Fatal("usable before any validation")
	}
	sc.check(now.Add(5*time.Second), time.Millisecond, now, time.Time{}, 2*time.Second)
	if !sc.usable() {
		t.Fatal("a consistent own effect must validate the bound")
	}
	if !sc.check(now.Add(-3*time.Second), time.Millisecond, now, time.Time{}, 2*time.Second) || sc.usable() {
		t.Fatal("an own effect the rule would exclude must switch the bound off")
	}
	if _, ok := sc.floor(now); ok {
		t.Fatal("a switched-off bound must not be used")
	}
}

// The upper bound: a Date past what earlier answers allow withdraws the
// validation; a creation time past the moment its answer was read switches
// the estimator off.
func TestServerClockCeiling(t *testing.T) {
	date := func(d time.Time) http.Header { return http.Header{"Date": {d.UTC().Format(http.TimeFormat)}} }
	steps := []struct {
		name string
		d, c time.Time
		tol  time.Duration
		want bool
	}{
		{"same second", t0, t0.Add(time.Second), 2 * time.Second, false},
		{"within tolerance", t0.Add(3 * time.Second), t0.Add(time.Second), 2 * time.Second, false},
		{"an hour ahead", t0.Add(time.Hour), t0.Add(time.Second), 2 * time.Second, true},
		{"just past tolerance", t0.Add(3*time.Second + time.Millisecond), t0.Add(time.Second), 2 * time.Second, true},
		{"behind", t0.Add(-time.Hour), t0.Add(time.Second), 0, false},
	}
	for _, s := range steps {
		if got := stepped(s.d, s.c, s.tol); got != s.want {
			t.Errorf("stepped %s: %v, want %v", s.name, got, s.want)
		}
	}

	var sc serverClock
	sent := t0
	sc.observe(date(t0), sent, sent.Add(100*time.Millisecond), 2*time.Second)
	c, ok := sc.ceiling(sent.Add(time.Minute))
	if !ok || c.Before(t0.Add(time.Minute)) || c.After(t0.Add(time.Minute+2*time.Second)) {
		t.Fatalf("ceiling a minute on: %v (%v)", c, ok)
	}
	sc.check(t0.Add(time.Second), time.Millisecond, t0, time.Time{}, 2*time.Second)
	if !sc.usable() {
		t.Fatal("setup: not validated")
	}
	later := sent.Add(30 * time.Second)
	sc.observe(date(t0.Add(30*time.Second)), later, later.Add(10*time.Millisecond), 2*time.Second)
	if !sc.usable() {
		t.Fatal("a Date consistent with the earlier ones withdrew the validation")
	}
	sc.observe(date(t0.Add(time.Hour)), later, later.Add(10*time.Millisecond), 2*time.Second)
	if sc.usable() {
		t.Fatal("a Date an hour past the earlier answers' bound kept the view validated")
	}

	var ahead serverClock
	ahead.observe(date(t0), t0, t0.Add(50*time.Millisecond), 2*time.Second)
	ceil, _ := ahead.ceiling(t0.Add(50 * time.Millisecond))
	if ahead.check(t0.Add(500*time.Millisecond), time.Millisecond, t0, ceil, 2*time.Second) || !ahead.usable() {
		t.Fatal("a creation time before its answer was read must validate")
	}
	if !ahead.check(t0.Add(3*time.Hour), time.Millisecond, t0, ceil, 2*time.Second) || ahead.usable() {
		t.Fatal("a creation time hours after its answer was read must switch the bound off")
	}
}
