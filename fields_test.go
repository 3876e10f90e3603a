package pagpolar

import (
	"strings"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// taughtShapes is a client's shapes after answers of the given kinds were
// seen to carry what was sent under the names the fake uses (the first of
// each field's names), for every effect kind.
func taughtShapes(answers ...wire.Answer) *shapes {
	sh := &shapes{}
	for _, a := range answers {
		for _, k := range []effectKind{effSale, effRefund, effSubscription, effPlanChange} {
			for _, f := range []wire.Field{wire.FRef, wire.FMethod, wire.FOffer, wire.FSale, wire.FSubscription} {
				sh.learnEcho(a, k, f, wire.Names(a, f)[0], "x", "x")
			}
		}
	}
	return sh
}

// TestAttributeFound_FieldProvesOnlyWhatItWasSeenToCarry: a value compares
// with what was sent only under a name answers of that same kind were seen
// to carry it under. An alias (sale_id beside sale_identifier, offer_id
// beside offer_identifier) or a name learned in another answer kind makes
// a candidate unclear, never another's.
func TestAttributeFound_FieldProvesOnlyWhatItWasSeenToCarry(t *testing.T) {
	post := taughtShapes(wire.AnswerPost)
	list := taughtShapes(wire.AnswerList)
	refund := func(sh *shapes) func() opFacts {
		return func() opFacts { f := refundFacts(); f.shapes = sh; return f }
	}
	pix := func(sh *shapes) func() opFacts {
		return func() opFacts { f := pixFacts(); f.shapes = sh; return f }
	}
	plan := func(sh *shapes) func() opFacts {
		return func() opFacts {
			return opFacts{kind: kindPlanChange, subID: "sub_abc", offer: "plan-pro", snapshotted: true, shapes: sh}
		}
	}
	offer3 := strings.Replace(sale(`,"payment_method":"pix"`), `"offer_identifier":"offer-basic"`, `"offer_id":3`, 1)
	cases := []struct {
		name  string
		kind  effectKind
		body  string
		facts func() opFacts
		want  attribution
	}{
		// Class: aliases are not the field.
		{"refund naming the sale's numeric key under sale_id", effRefund, `{"identifier":"rf_9","sale_id":5012,"amount":1500,"status":"completed","created_at":"` + ts(time.Second) + `"}`, refund(list), attrUnclear},
		{"refund of another sale under sale_identifier, learned", effRefund, `{"identifier":"rf_9","sale_identifier":"s2","amount":1500,"status":"completed","created_at":"` + ts(time.Second) + `"}`, refund(list), attrOther},
		{"plan change naming the subscription's numeric key", effPlanChange, `{"id":"pc9","subscription_id":77,"offer_identifier":"plan-pro","status":"applied"}`, plan(&shapes{}), attrUnclear},
		{"sale naming the offer as offer_id", effSale, offer3, pix(list), attrUnclear},
		// Class: one answer kind's echo proves nothing in another.
		{"offer echoed by POST answers only", effSale, strings.Replace(sale(`,"payment_method":"pix"`), "offer-basic", "offer-premium", 1), pix(post), attrUnclear},
		{"boleto for PIX, method echoed by POST answers only", effSale, sale(`,"payment_method":"boleto"`), pix(post), attrUnclear},
		{"boleto for PIX, method learned in lists", effSale, sale(`,"payment_method":"boleto"`), pix(list), attrOther},
		{"refund of another sale, learned in POST answers only", effRefund, `{"identifier":"rf_9","sale_identifier":"s2","amount":1500,"status":"completed","created_at":"` + ts(time.Second) + `"}`, refund(post), attrUnclear},
		// Class: sparse items are unclear, not new.
		{"sale without method and offer, absent from a snapshot", effSale, `{"identifier":"s9","external_reference":"o1","status":"paid","created_at":"` + ts(time.Second) + `"}`,
			func() opFacts { f := pixFacts(); f.snapshotted = true; return f }, attrUnclear},
		{"sale without method and offer, after the floor", effSale, `{"identifier":"s9","external_reference":"o1","status":"paid","created_at":"` + ts(time.Second) + `"}`, pixFacts, attrUnclear},
		{"sale with its method only, after the floor", effSale, `{"identifier":"s9","external_reference":"o1","payment_method":"pix","status":"paid","created_at":"` + ts(time.Second) + `"}`, pixFacts, attrOurs},
		// Class: a subscription on another plan is not another subscription.
		{"subscription on another offer, no plan changes listed", effSubscription, `{"id":"sub9","external_reference":"o1","offer_identifier":"plan-pro","payment_method":"pix","status":"active","created_at":"` + ts(time.Second) + `"}`,
			func() opFacts { f := pixFacts(); f.kind = kindSubscribe; f.offer = "plan-basic"; return f }, attrUnclear},
		{"subscription on another offer, its plan changes start elsewhere", effSubscription, `{"id":"sub9","external_reference":"o1","offer_identifier":"plan-pro","payment_method":"pix","status":"active","created_at":"` + ts(time.Second) + `","plan_changes":[{"id":"pc1","from_offer_identifier":"plan-gold","offer_identifier":"plan-pro"}]}`,
			func() opFacts { f := pixFacts(); f.kind = kindSubscribe; f.offer = "plan-basic"; return f }, attrOther},
		{"subscription upgraded from this offer", effSubscription, `{"id":"sub9","external_reference":"o1","offer_identifier":"plan-pro","payment_method":"pix","status":"active","created_at":"` + ts(time.Second) + `","plan_changes":[{"id":"pc1","from_offer_identifier":"plan-basic","offer_identifier":"plan-pro"}]}`,
			func() opFacts { f := pixFacts(); f.kind = kindSubscribe; f.offer = "plan-basic"; return f }, attrOurs},
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

// TestShapes_EchoIsPerAnswerKindAndName: what one kind of answer carried
// under a name teaches nothing about another kind or another name, and a
// name once seen carrying something else never proves again.
func TestShapes_EchoIsPerAnswerKindAndName(t *testing.T) {
	sh := &shapes{}
	sh.learnEcho(wire.AnswerPost, effSale, wire.FOffer, "offer_identifier", "off1", "off1")
	for _, c := range []struct {
		answer wire.Answer
		name   string
		want   bool
	}{
		{wire.AnswerPost, "offer_identifier", true},
		{wire.AnswerList, "offer_identifier", false},
		{wire.AnswerWebhook, "offer_identifier", false},
		{wire.AnswerPost, "offer_id", false},
	} {
		if got := sh.proves(c.answer, effSale, wire.FOffer, c.name); got != c.want {
			t.Errorf("%s %s: proves %v, want %v", c.answer, c.name, got, c.want)
		}
	}
	sh.learnEcho(wire.AnswerPost, effSale, wire.FOffer, "offer_identifier", "3", "off2")
	if sh.proves(wire.AnswerPost, effSale, wire.FOffer, "offer_identifier") {
		t.Error("a name once seen carrying another value still proves")
	}
	// An own effect met in a list teaches the list kind.
	sh.rememberOwn("s1", ownEffect{kind: effSale, ref: "o1", method: "pix", offer: "off1"})
	e, _ := readEffect(effSale, wire.AnswerList, []byte(`{"identifier":"s1","external_reference":"o1","payment_method":"pix","offer_id":3}`))
	sh.learnFromOwn([]effect{e})
	if !sh.proves(wire.AnswerList, effSale, wire.FMethod, "payment_method") || sh.proves(wire.AnswerList, effSale, wire.FOffer, "offer_id") {
		t.Error("an own effect in a list taught the wrong lesson")
	}
}

// TestSettleFound_UnclearRememberedByIdentifier: an effect a lookup could
// not attribute is remembered by its identifier, so that a later lookup
// that lists it (and now attributes it) is not stopped by "no longer
// listed" for good.
func TestSettleFound_UnclearRememberedByIdentifier(t *testing.T) {
	f := refundFacts()
	raw := `{"identifier":"rf_9","sale_identifier":"s1","amount":700,"status":"completed","created_at":"` + ts(time.Second) + `"}`
	e, err := readEffect(effRefund, wire.AnswerList, []byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	first := settleFound([]effect{e}, f, true, "", nil)
	if first.kind != lookupUnclear || len(first.seen) != 1 || first.seen[0] != "rf_9" {
		t.Fatalf("first lookup: %+v, want unclear remembering rf_9", first)
	}
	// Later the effect is proven another operation's (its claim).
	f.claimed = map[string]bool{"rf_9": true}
	for _, c := range []struct {
		name   string
		effs   []effect
		remind []string
		want   lookupKind
	}{
		{"still listed, now another's", []effect{e}, first.seen, lookupNotFound},
		{"no longer listed", nil, first.seen, lookupUnclear},
	} {
		if got := settleFound(c.effs, f, true, "", c.remind); got.kind != c.want {
			t.Errorf("%s: %v (%s), want %v", c.name, got.kind, got.reason, c.want)
		}
	}
}

// A field read as the identifier proves identity only while no two
// different listed effects carry it: a claim or a snapshot that excludes
// one would exclude the other too. The same item listed twice (a page
// boundary that moved) is one effect.
func TestSettleFound_SharedIdentifierIdentifiesNeither(t *testing.T) {
	f := refundFacts()
	read := func(raw string) effect {
		t.Helper()
		e, err := readEffect(effRefund, wire.AnswerList, []byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	mine := read(`{"id":77,"sale_identifier":"s1","amount":1500,"status":"completed","created_at":"` + ts(time.Second) + `"}`)
	other := read(`{"id":77,"sale_identifier":"s1","amount":300,"status":"completed","created_at":"` + ts(-time.Hour) + `"}`)
	for _, c := range []struct {
		name    string
		claimed bool // 77 recorded as another operation's
		effs    []effect
		want    lookupKind
	}{
		{"one item", false, []effect{mine}, lookupSucceeded},
		{"one item, claimed", true, []effect{mine}, lookupNotFound},
		{"the same item twice", false, []effect{mine, mine}, lookupSucceeded},
		{"the same item twice, claimed", true, []effect{mine, mine}, lookupNotFound},
		{"two items under one identifier", false, []effect{other, mine}, lookupUnclear},
		{"two items under one identifier, claimed", true, []effect{other, mine}, lookupUnclear},
	} {
		f.claimed = nil
		if c.claimed {
			f.claimed = map[string]bool{"77": true}
		}
		if got := settleFound(c.effs, f, true, "", nil); got.kind != c.want {
			t.Errorf("%s: %v (%s), want %v", c.name, got.kind, got.reason, c.want)
		}
	}
}
