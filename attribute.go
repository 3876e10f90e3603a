package pagpolar

import (
	"fmt"
	"strings"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// Attribution: is an effect the API reported this operation's? (SAFETY
// rules 5 and 7.) The rule is that exclusion needs proof. An effect is
//
//   - another operation's only when that is proven: a recognised value that
//     differs from the operation's (a boleto sale for a PIX charge, another
//     sale's refund, a refund of another amount under every reading of the
//     amount once the API has echoed refund amounts as sent), its ID in the pre-send snapshot, its ID recorded as another
//     operation's result in the store, or a creation time before the first
//     send on the server's own clock (servertime.go);
//   - this operation's when every field it is checked on agrees;
//   - unclear otherwise: an unrecognised spelling, a missing field that
//     the decision needs, an unreadable time. A status is never a reason
//     to be unclear: it is the effect's decision (decision.go), and only
//     a refusal status fails the operation.
//
// Unclear never becomes "not found", "failed" or "not executed": the
// operation ends in ErrOutcomeUnknown naming the effect. Everything here
// is a pure function of its arguments; lookup.go and idempotency.go do the
// I/O and call it.

// attribution is the verdict on one effect.
type attribution int

const (
	attrOther       attribution = iota // proven another operation's
	attrOurs                           // this operation's, and it took effect
	attrOursRefused                    // this operation's, refused (a declined sale, a failed refund)
	attrUnclear                        // cannot tell
)

func (a attribution) String() string {
	return [...]string{"other", "ours", "ours-refused", "unclear"}[a]
}

// opFacts is what is known about the operation when attributing.
type opFacts struct {
	kind   string // kindPix, kindRefund, ...
	ref    string // charges and subscribe
	offer  string // charges, subscribe; plan change: the new offer
	method string // charges and subscribe (the SDK's spelling)
	saleID string // refund
	amount int64  // refund, in centavos
	subID  string // plan change

	snapshot    map[string]bool // effect IDs that existed before the first send
	snapshotted bool            // a pre-send snapshot was taken (absence from it means "new")
	snapOffer   string          // plan change: the subscription's offer in the snapshot
	// snapNextOffer: plan change: the offer a change already scheduled in
	// the snapshot moves to ("" for none).
	snapNextOffer string
	// shared: a 409 showed another sender of this operation's key at work
	// (another host deriving the same key): its effect may predate our
	// snapshot, which then proves nothing.
	shared bool

	// floor is a lower bound of the server's clock at the first send (zero:
	// none); an effect created more than tolerance (plus its own
	// precision) before it cannot be this operation's.
	floor     time.Time
	tolerance time.Duration
	// floorBroken: the record's floor was usable when written, and this
	// process's reading of the API's clock is below it (the clock stepped
	// back since): the record must stop calling it usable, or a process
	// that reads it after the clock steps forward again re-checks it
	// against a clock that no longer shows the step (SAFETY rule 12).
	// (A floor this call recorded is also dropped when this process's
	// estimator switches off: exec.dropBrokenFloor.)
	floorBroken bool

	// claimed: effect IDs the store records as another operation's result.
	claimed map[string]bool

	shapes *shapes
}

// proves reports whether e's field, read under name, compares with what
// was sent: answers of e's kind were seen to carry what was sent there
// (shapes.go). Without shapes nothing proves.
func (f opFacts) proves(e effect, field wire.Field, name string) bool {
	return f.shapes != nil && f.shapes.proves(e.answer, e.kind, field, name)
}

// attributeFound decides on an effect found by a lookup.
func attributeFound(e effect, f opFacts) (attribution, string) {
	if e.idSt != wire.Read {
		return attrUnclear, e.label() + " (no readable identifier)"
	}
	if f.snapshot[e.ID] && !f.shared {
		return attrOther, "existed before the first send (pre-send snapshot)"
	}
	if f.claimed[e.ID] {
		return attrOther, "recorded as another operation's result"
	}
	if a, why, decided := compareFields(e, f, true); decided {
		return a, why
	}
	if a, why, decided := compareTime(e, f); decided {
		return a, why
	}
	return byStatus(e)
}

// attributeAnswer decides on the effect in a 2xx answer to this
// operation's key. A fresh answer is about the request just sent, so it
// can only be unclear (a shape the SDK misreads) or ours. A replay is the
// first answer ever given for the key: it is another request's (SAFETY
// rule 7: a collision) only when a field the operation's fingerprint
// covers reads, unambiguously, as another value (collision); any other
// difference is unclear.
func attributeAnswer(e effect, f opFacts, replay bool) (attribution, string) {
	if e.idSt != wire.Read {
		return attrUnclear, "the answer has no readable " + e.kind.String() + " identifier"
	}
	if replay {
		if yes, why := collision(e, f); yes {
			return attrOther, why
		}
	}
	if a, why, decided := compareFields(e, f, false); decided {
		if a == attrOther && !replay {
			return attrUnclear, why + " in the answer to this very request: the SDK misreads this API's shape"
		}
		if a == attrOther {
			return attrUnclear, why + " in the replay of this key's first answer, which is no proof another request used the key"
		}
		return a, why
	}
	return byStatus(e)
}

// collision reports whether a replayed answer is provably for another
// request: it names another reference (not one differing only in case or
// spaces), a payment method of another family, another sale, a refund of
// another amount under every reading, or another subscription — fields the
// operation's fingerprint covers.
func collision(e effect, f opFacts) (bool, string) {
	switch f.kind {
	case kindPix, kindBoleto, kindCreditCard, kindSubscribe:
		if e.refSt == wire.Read && !strings.EqualFold(strings.TrimSpace(e.Ref), strings.TrimSpace(f.ref)) && f.proves(e, wire.FRef, e.refName) {
			return true, fmt.Sprintf("the replay is for reference %q, this operation's is %q", e.Ref, f.ref)
		}
		if e.methodSt == wire.Read {
			if m, known, learned := f.shapes.method(e.Method); known && !learned && wire.MethodFamily(m) != wire.MethodFamily(f.method) && f.proves(e, wire.FMethod, e.methodName) {
				return true, fmt.Sprintf("the replay is a %s payment, this operation is %s", m, f.method)
			}
		}
	case kindRefund:
		if e.saleSt == wire.Read && e.SaleID != f.saleID && f.proves(e, wire.FSale, e.saleName) {
			return true, fmt.Sprintf("the replay refunds sale %s, this operation sale %s", e.SaleID, f.saleID)
		}
		// A refund's amount never proves the replay is another request's:
		// its "amount" may be the sale's (the refund's under another name),
		// and an API that echoes a full refund's amount looks the same (a
		// full refund that taught "amounts prove" refunded twice).
	case kindPlanChange:
		if e.subSt == wire.Read && e.SubID != f.subID && f.proves(e, wire.FSubscription, e.subName) {
			return true, fmt.Sprintf("the replay changes subscription %s, this operation %s", e.SubID, f.subID)
		}
	}
	return false, ""
}

// compareFields checks the fields that tell operations apart. found says
// the effect came from a lookup (where a missing field that the decision
// needs makes it unclear) rather than from an answer to our key (where the
// key itself ties it to us).
func compareFields(e effect, f opFacts, found bool) (attribution, string, bool) {
	unreadable := func(name string) (attribution, string, bool) {
		return attrUnclear, fmt.Sprintf("%s has a %s the SDK cannot read", e.label(), name), true
	}
	switch f.kind {
	case kindPix, kindBoleto, kindCreditCard, kindSubscribe:
		if e.refSt == wire.Unreadable {
			return unreadable("reference")
		}
		if found && e.refSt == wire.Absent {
			// The lookup asked for this reference, but only the effect's own
			// reference shows that the list kept to its filter (a filter the
			// API ignores, or matches by prefix, lists other orders' sales).
			return attrUnclear, e.label() + " shows no external reference, so nothing shows the list kept to its filter", true
		}
		if e.refSt == wire.Read && e.Ref != f.ref {
			// The lookup asked for this reference: an effect under another
			// one means the list ignored its filter, or the field is not the
			// caller's reference. Neither proves anything.
			return attrUnclear, fmt.Sprintf("%s is listed under reference %q, not %q", e.label(), e.Ref, f.ref), true
		}
		if f.kind != kindSubscribe {
			if e.subSt == wire.Unreadable {
				return unreadable("subscription")
			}
			if e.subSt == wire.Read {
				return attrOther, fmt.Sprintf("%s belongs to subscription %s (a renewal or a subscription's first sale)", e.label(), e.SubID), true
			}
		}
		if found && e.methodSt == wire.Absent && e.offerSt == wire.Absent {
			// Nothing on it tells it from another operation's effect under
			// the reference (a boleto sale for a PIX charge): not new, not
			// another's.
			return attrUnclear, e.label() + " shows neither a payment method nor an offer, so nothing tells it from another operation's", true
		}
		if a, why, decided := compareMethod(e, f, found); decided {
			return a, why, true
		}
		if a, why, decided := compareOffer(e, f); decided {
			return a, why, true
		}
	case kindRefund:
		if e.saleSt == wire.Unreadable {
			return unreadable("sale identifier")
		}
		if found && e.saleSt == wire.Absent {
			return attrUnclear, e.label() + " shows no sale identifier, so nothing shows the list kept to its filter", true
		}
		if e.saleSt == wire.Read && e.SaleID != f.saleID {
			if !f.proves(e, wire.FSale, e.saleName) {
				return attrUnclear, fmt.Sprintf("%s names sale %q under %q, which %ss have not been seen to carry as sent: another field, not proof", e.label(), e.SaleID, e.saleName, e.answer), true
			}
			return attrOther, fmt.Sprintf("%s is of sale %s", e.label(), e.SaleID), true
		}
		switch e.Amount.State {
		case wire.Unreadable:
			return unreadable("amount")
		case wire.Absent:
			if found {
				return attrUnclear, e.label() + " has no amount", true
			}
		case wire.Read:
			if !e.Amount.Matches(f.amount) {
				// Never proof on its own (see the replay case above): other
				// refunds are excluded by the snapshot and by claims.
				return attrUnclear, fmt.Sprintf("%s names amount %v (centavos, under every reading), not %d: a refund's amount field may be the sale's, so it proves nothing", e.label(), e.Amount.Readings(), f.amount), true
			}
		}
	case kindPlanChange:
		if e.subSt == wire.Unreadable {
			return unreadable("subscription")
		}
		if e.subSt == wire.Read && e.SubID != f.subID {
			if !f.proves(e, wire.FSubscription, e.subName) {
				return attrUnclear, fmt.Sprintf("%s names subscription %q under %q, which %ss have not been seen to carry as sent: another field, not proof", e.label(), e.SubID, e.subName, e.answer), true
			}
			return attrOther, fmt.Sprintf("%s is of subscription %s", e.label(), e.SubID), true
		}
		if a, why, decided := compareOffer(e, f); decided {
			return a, why, true
		}
	}
	return 0, "", false
}

func compareMethod(e effect, f opFacts, found bool) (attribution, string, bool) {
	switch e.methodSt {
	case wire.Unreadable:
		return attrUnclear, e.label() + " has a payment method the SDK cannot read", true
	case wire.Absent:
		if found {
			// New since the snapshot is not ours: another operation on the
			// same reference (a PIX after a card that was never processed)
			// makes one just as new, and only the method tells them apart.
			return attrUnclear, e.label() + " shows no payment method, so nothing tells it from another operation's on the same reference", true
		}
		return 0, "", false
	}
	m, known, learned := f.shapes.method(e.Method)
	switch {
	case !known:
		return attrUnclear, fmt.Sprintf("%s has payment method %q, which the SDK does not recognise", e.label(), e.Method), true
	case m == f.method:
		return 0, "", false
	case learned:
		return attrUnclear, fmt.Sprintf("%s has payment method %q, which this API once used for %s: no proof either way", e.label(), e.Method, m), true
	case wire.MethodFamily(m) == wire.MethodFamily(f.method):
		return attrUnclear, fmt.Sprintf("%s was paid by %s, which could be this operation's %s", e.label(), m, f.method), true
	case !f.proves(e, wire.FMethod, e.methodName):
		return attrUnclear, fmt.Sprintf("%s has payment method %s under %q, which %ss have not been seen to carry as sent: no proof", e.label(), m, e.methodName, e.answer), true
	}
	return attrOther, fmt.Sprintf("%s was paid by %s", e.label(), m), true
}

func compareOffer(e effect, f opFacts) (attribution, string, bool) {
	switch e.offerSt {
	case wire.Unreadable:
		return attrUnclear, e.label() + " has an offer the SDK cannot read", true
	case wire.Absent:
		return 0, "", false
	}
	if e.Offer == f.offer || (e.kind == effSubscription && e.FromOffer == f.offer) {
		return 0, "", false // a subscription may have changed plan since
	}
	if e.kind == effSubscription && e.planChangesSt != wire.Read {
		// A subscription's offer is its plan now: one upgraded since it
		// was created (before a retry) is on another offer, and without
		// its plan changes nothing shows which offer it started on.
		return attrUnclear, fmt.Sprintf("%s is on offer %q, not %q, and lists no plan changes: it may have changed plan since it was created", e.label(), e.Offer, f.offer), true
	}
	if f.proves(e, wire.FOffer, e.offerName) {
		return attrOther, fmt.Sprintf("%s is for offer %s", e.label(), e.Offer), true
	}
	return attrUnclear, fmt.Sprintf("%s names offer %q under %q, not %q, and %ss have not been seen to carry the offer as sent under that name", e.label(), e.Offer, e.offerName, f.offer, e.answer), true
}

// compareTime excludes an effect created before the first send, on the
// API's clock, when no complete pre-send snapshot says otherwise: absence
// from a complete snapshot is proof the effect is new, and the time rule
// never overrides it. Without a snapshot, only a validated bound
// (servertime.go) and a readable creation time can exclude; an effect that
// neither excludes is unclear.
func compareTime(e effect, f opFacts) (attribution, string, bool) {
	if f.snapshotted && !f.snapshot[e.ID] {
		return 0, "", false // absent from a complete snapshot: new
	}
	// Here: no complete snapshot, or an effect in it after a 409 (the other
	// sender of our key may have made it before our snapshot): only a
	// validated time (for a 409, the earliest the other sender can have
	// started) excludes.
	if e.createdSt == wire.Read && !f.floor.IsZero() {
		if excludedByTime(e.Created, e.CreatedRes, f.floor, f.tolerance) {
			return attrOther, fmt.Sprintf("%s was created at %s, before this operation's first send (server clock, at least %s)",
				e.label(), e.Created.UTC().Format(time.RFC3339Nano), f.floor.UTC().Format(time.RFC3339)), true
		}
		return 0, "", false
	}
	why := "no validated server-clock reference for the first send"
	if e.createdSt != wire.Read {
		why = "no readable creation time"
	}
	return attrUnclear, fmt.Sprintf("%s has %s, and no pre-send snapshot proves it new", e.label(), why), true
}

// byStatus ends an attribution whose fields all agree: the effect is
// this operation's. Existence and decision are two answers (SAFETY rule
// 3): a refusal status makes it ours and refused; any other status —
// decided or not, recognised or not, or none — makes it ours, and the
// status is reported as its decision (DecisionUnrecognized when unknown).
func byStatus(e effect) (attribution, string) {
	if e.refused() {
		return attrOursRefused, fmt.Sprintf("%s is %s", e.label(), e.Status)
	}
	return attrOurs, ""
}

// judged is one effect with its verdict.
type judged struct {
	e   effect
	a   attribution
	why string
}

// decide settles a lookup from the verdicts on every effect it found.
// complete is false when the list may hold effects the SDK could not read
// (paging it cannot follow): then nothing found is not "not found".
func decide(all []judged, complete bool, incomplete string) lookupOutcome {
	var ours, refused, unclear []judged
	for _, j := range all {
		switch j.a {
		case attrOurs:
			ours = append(ours, j)
		case attrOursRefused:
			refused = append(refused, j)
		case attrUnclear:
			unclear = append(unclear, j)
		}
	}
	switch {
	case len(unclear) > 0:
		return lookupOutcome{kind: lookupUnclear, refs: ids(unclear), seen: judgedIDs(unclear), reason: unclear[0].why + more(len(unclear))}
	case !complete:
		return lookupOutcome{kind: lookupUnclear, refs: ids(append(ours, refused...)), seen: judgedIDs(append(ours, refused...)), reason: incomplete}
	case len(ours) > 1:
		return lookupOutcome{kind: lookupUnclear, refs: ids(ours), seen: judgedIDs(ours), reason: fmt.Sprintf("%d effects could each be this operation's", len(ours))}
	case len(ours) == 1:
		// A refused effect beside it is an earlier attempt's (a decline
		// followed by a retry under another operation ID).
		return lookupOutcome{kind: lookupSucceeded, effect: ours[0].e, ref: ours[0].e.ID}
	case len(refused) > 0:
		return lookupOutcome{kind: lookupFailed, effect: refused[0].e, ref: refused[0].e.ID, reason: refused[0].why}
	}
	return lookupOutcome{kind: lookupNotFound}
}

func ids(js []judged) []string {
	out := make([]string, 0, len(js))
	for _, j := range js {
		out = append(out, j.e.label())
	}
	return out
}

// judgedIDs are the identifiers of the effects (those that have one): what
// a record remembers of effects it could not attribute, compared with the
// identifiers a later lookup lists (settleFound), never with labels.
func judgedIDs(js []judged) []string {
	var out []string
	for _, j := range js {
		if j.e.idSt == wire.Read {
			out = append(out, j.e.ID)
		}
	}
	return out
}

func more(n int) string {
	if n < 2 {
		return ""
	}
	return fmt.Sprintf(" (and %d more effects the SDK cannot attribute)", n-1)
}
