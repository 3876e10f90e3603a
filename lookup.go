package pagpolar

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/keystore"
)

// Looking effects up (SAFETY rule 5) and snapshotting them before the first
// send (rule 11): the I/O around the decisions of attribute.go.

// Operation kinds (Record.Kind).
const (
	kindPix        = "pix"
	kindBoleto     = "boleto"
	kindCreditCard = "credit_card"
	kindSubscribe  = "subscribe"
	kindPlanChange = "plan_change"
	kindRefund     = "refund"
)

// kindClaim marks the store records that say which operation an effect was
// attributed to (claims are written for refunds and plan changes, which are
// not one per sale or subscription).
const kindClaim = "claim"

// needsSnapshot: kinds that are never sent without a pre-send snapshot.
func needsSnapshot(kind string) bool { return kind == kindRefund || kind == kindPlanChange }

// claims: kinds whose effects are claimed in the store when settled.
func claims(kind string) bool { return kind == kindRefund || kind == kindPlanChange }

func effectOf(kind string) effectKind {
	switch kind {
	case kindRefund:
		return effRefund
	case kindSubscribe:
		return effSubscription
	case kindPlanChange:
		return effPlanChange
	}
	return effSale
}

// lookupOutcome is what a settle lookup found.
type lookupOutcome struct {
	kind   lookupKind
	effect effect   // succeeded / failed: the effect
	ref    string   // its ID ("" when the API gave none)
	refs   []string // unclear: the effects it could not attribute, as labels for messages
	seen   []string // unclear: their identifiers, which the record remembers (opMeta.Unclear)
	reason string
	// notCurrent: unclear only because the answer could not be proven
	// current (a stored copy, or a Date that does not yet prove it
	// postdates the trust moment); a later lookup may prove what this one
	// could not, so a caller that may wait looks again.
	notCurrent bool
}

type lookupKind int

const (
	lookupNotFound lookupKind = iota
	lookupSucceeded
	lookupFailed
	lookupUnclear     // an effect exists that cannot be attributed, or the list could not be read whole
	lookupUnsupported // no reliable lookup for this route
)

// facts is what attribution knows about an operation.
func (c *Client) facts(kind string, m opMeta, claimed map[string]bool) opFacts {
	f := opFacts{
		kind: kind, ref: m.ExternalReference, offer: m.OfferID, method: m.Method,
		saleID: m.SaleID, amount: m.Amount, subID: m.SubscriptionID,
		snapshotted: m.Snapshotted, snapOffer: m.SnapshotOffer, snapNextOffer: m.SnapshotNextOffer,
		shared: !m.SharedFloor.IsZero(), tolerance: c.policy.ServerClockTolerance,
		claimed: claimed, shapes: &c.shapes,
	}
	if m.FloorOK && !c.srvClock.off() {
		// FloorOK is what the writer knew; whether the floor still holds
		// is re-checked on this process's own reading of the API's clock.
		ceiling, ok := c.srvClock.ceiling(c.clock.Now())
		if floorHolds(m.exclusionFloor(), ceiling, ok, c.policy.ServerClockTolerance) {
			f.floor = m.exclusionFloor()
		}
	}
	if len(m.Snapshot) > 0 {
		f.snapshot = make(map[string]bool, len(m.Snapshot))
		for _, id := range m.Snapshot {
			f.snapshot[id] = true
		}
	}
	return f
}

// lookup finds the effect of operation opID after an ambiguous attempt and
// attributes it.
func (c *Client) lookup(ctx context.Context, kind, opID string, m opMeta) (lookupOutcome, error) {
	var (
		items      []json.RawMessage
		complete   bool
		why        string
		notCurrent bool
		err        error
	)
	switch kind {
	case kindPix, kindBoleto, kindCreditCard:
		items, complete, why, notCurrent, err = c.readListAt(ctx, wire.RouteSales, url.Values{"external_reference": {m.ExternalReference}}, 1, m.TrustAfter)
	case kindRefund:
		items, complete, why, notCurrent, err = c.readListAt(ctx, wire.RouteRefunds, url.Values{"sale_identifier": {m.SaleID}}, 1, m.TrustAfter)
	case kindSubscribe:
		items, complete, why, notCurrent, err = c.readListAt(ctx, wire.RouteSubscriptions, url.Values{"external_reference": {m.ExternalReference}}, 1, m.TrustAfter)
		if ae := (*APIError)(nil); errors.As(err, &ae) && (ae.StatusCode == 404 || ae.StatusCode == 405 || ae.StatusCode == 501) {
			return lookupOutcome{kind: lookupUnsupported, reason: fmt.Sprintf("GET %s?external_reference= answered %d", wire.RouteSubscriptions, ae.StatusCode)}, nil
		}
	case kindPlanChange:
		return c.lookupPlanChange(ctx, opID, m)
	default:
		return lookupOutcome{kind: lookupUnsupported, reason: "unknown operation kind " + kind}, nil
	}
	if err != nil {
		return lookupOutcome{}, err
	}
	effs := readEffects(effectOf(kind), wire.AnswerList, items)
	c.learnFromList(kind, m, effs)
	claimed, err := c.claimedByOthers(ctx, kind, effs, m, opID)
	if err != nil {
		return lookupOutcome{}, err
	}
	lo := settleFound(effs, c.facts(kind, m, claimed), complete, why, m.Unclear)
	lo.notCurrent = notCurrent && lo.kind == lookupUnclear && len(lo.refs) == 0
	return lo, nil
}

// lookupPlanChange reads the subscription: its plan changes if the API
// lists them, else its current offer.
func (c *Client) lookupPlanChange(ctx context.Context, opID string, m opMeta) (lookupOutcome, error) {
	sent := c.clock.Now()
	proof := c.dateProofAt(sent)
	r, err := c.getN(ctx, c.url(subscriptionPath(m.SubscriptionID), nil), 1)
	if err != nil {
		return lookupOutcome{}, err
	}
	if why, cached := servedByCache(r.header, sent, m.TrustAfter); cached {
		return lookupOutcome{kind: lookupUnclear, notCurrent: true, reason: "GET " + subscriptionPath(m.SubscriptionID) + ": " + why}, nil
	}
	if why, stale := staleByDate(r.header, proof, sent, m.TrustAfter); stale {
		return lookupOutcome{kind: lookupUnclear, notCurrent: true, reason: "GET " + subscriptionPath(m.SubscriptionID) + ": " + why}, nil
	}
	sub, err := readEffect(effSubscription, wire.AnswerGet, r.body)
	if err != nil {
		return lookupOutcome{kind: lookupUnclear, reason: "GET " + subscriptionPath(m.SubscriptionID) + " answered a body the SDK cannot read: " + err.Error()}, nil
	}
	if sub.planChangesSt != wire.Read {
		return subscriptionState(sub, c.facts(kindPlanChange, m, nil)), nil
	}
	effs := readEffects(effPlanChange, wire.AnswerGet, sub.planChanges)
	c.learnFromList(kindPlanChange, m, effs)
	claimed, err := c.claimedByOthers(ctx, kindPlanChange, effs, m, opID)
	if err != nil {
		return lookupOutcome{}, err
	}
	return settleFound(effs, c.facts(kindPlanChange, m, claimed), true, "", m.Unclear), nil
}

// settleFound attributes every effect found and decides; an effect an
// earlier lookup could not attribute that is no longer listed is no proof
// of absence.
func settleFound(effs []effect, f opFacts, complete bool, why string, seenUnclear []string) lookupOutcome {
	js := make([]judged, 0, len(effs))
	listed := map[string]bool{}
	for _, e := range effs {
		a, w := attributeFound(e, f)
		js = append(js, judged{e: e, a: a, why: w})
		listed[e.ID] = true
	}
	lo := decide(js, complete, why)
	if lo.kind == lookupNotFound {
		for _, id := range seenUnclear {
			if !listed[id] {
				return lookupOutcome{kind: lookupUnclear, refs: []string{id}, reason: "an effect an earlier lookup could not attribute (" + id + ") is no longer listed; that is no proof it does not exist"}
			}
		}
	}
	return lo
}

// subscriptionState decides a plan change from a subscription whose
// answer lists no plan changes: the change is proven only by the
// subscription now being on the new offer when it was on another one
// before the first send. Nothing proves it absent (it may apply at the
// next billing), so this never says "not found".
func subscriptionState(sub effect, f opFacts) lookupOutcome {
	switch {
	case sub.idSt != wire.Read || sub.offerSt != wire.Read:
		return lookupOutcome{kind: lookupUnclear, reason: "the subscription's answer lists no plan changes and shows no offer the SDK can read"}
	case sub.Offer == f.offer && f.snapOffer != "" && f.snapOffer != f.offer:
		pc := effect{kind: effPlanChange, SubID: sub.ID, Offer: f.offer, FromOffer: f.snapOffer, idSt: wire.Absent, Status: sub.Status, decided: DecisionApplied}
		return lookupOutcome{kind: lookupSucceeded, effect: pc}
	case sub.Offer == f.offer:
		return lookupOutcome{kind: lookupUnclear, refs: []string{sub.ID}, reason: "the subscription is on the new offer, and no snapshot shows it was on another before this operation"}
	case sub.nextOfferSt == wire.Read && sub.NextOffer == f.offer && f.snapOffer != "" && f.snapOffer != f.offer && f.snapNextOffer != f.offer:
		// A change to the new offer is scheduled now, and none was before
		// the first send: this operation's, applied at the next cycle.
		pc := effect{kind: effPlanChange, SubID: sub.ID, Offer: f.offer, FromOffer: f.snapOffer, idSt: wire.Absent, decided: DecisionScheduled}
		return lookupOutcome{kind: lookupSucceeded, effect: pc}
	}
	return lookupOutcome{kind: lookupUnclear, refs: []string{sub.ID}, reason: fmt.Sprintf("the API lists no plan changes and the subscription is still on %s: that does not prove the change was not made (it may apply later)", sub.Offer)}
}

// readEffects reads a list's items; an item that is not an object is kept
// as an effect without an identifier, which attribution finds unclear.
func readEffects(kind effectKind, answer wire.Answer, items []json.RawMessage) []effect {
	out := make([]effect, 0, len(items))
	for _, it := range items {
		e, err := readEffect(kind, answer, it)
		if err != nil {
			e = effect{kind: kind, answer: answer}
		}
		out = append(out, e)
	}
	return out
}

// learnFromList teaches what effects read by a filter carry (shapes.go):
// the filter's own field (every item of GET /refunds?sale_identifier=X
// was asked to be of sale X, every plan change of GET /subscriptions/{id}
// of that subscription, every sale of GET /sales?external_reference=R
// under R), and every field of an effect this client met before as its
// own.
func (c *Client) learnFromList(kind string, m opMeta, effs []effect) {
	for _, e := range effs {
		switch kind {
		case kindPix, kindBoleto, kindCreditCard, kindSubscribe:
			if e.refSt == wire.Read {
				c.shapes.learnEcho(e.answer, e.kind, wire.FRef, e.refName, e.Ref, m.ExternalReference)
			}
		case kindRefund:
			if e.saleSt == wire.Read {
				c.shapes.learnEcho(e.answer, e.kind, wire.FSale, e.saleName, e.SaleID, m.SaleID)
			}
		case kindPlanChange:
			if e.subSt == wire.Read {
				c.shapes.learnEcho(e.answer, e.kind, wire.FSubscription, e.subName, e.SubID, m.SubscriptionID)
			}
		}
	}
	c.shapes.learnFromOwn(effs)
}

// snapshot records the effects that exist before the first send, so that a
// later lookup can tell this operation's effect from earlier ones (SAFETY
// rule 11). A complete snapshot sets Snapshotted; an error means the read
// failed.
func (c *Client) snapshot(ctx context.Context, kind string, m *opMeta, attempts int) error {
	m.Snapshot, m.Snapshotted, m.SnapshotOffer, m.SnapshotNextOffer = nil, false, "", ""
	var (
		items    []json.RawMessage
		complete bool
		err      error
	)
	switch kind {
	case kindRefund:
		items, complete, _, err = c.readList(ctx, wire.RouteRefunds, url.Values{"sale_identifier": {m.SaleID}}, attempts, time.Time{})
	case kindPix, kindBoleto, kindCreditCard:
		items, complete, _, err = c.readList(ctx, wire.RouteSales, url.Values{"external_reference": {m.ExternalReference}}, attempts, time.Time{})
	case kindSubscribe:
		items, complete, _, err = c.readList(ctx, wire.RouteSubscriptions, url.Values{"external_reference": {m.ExternalReference}}, attempts, time.Time{})
	case kindPlanChange:
		r, err := c.getN(ctx, c.url(subscriptionPath(m.SubscriptionID), nil), attempts)
		if err != nil {
			return err
		}
		if why, cached := servedByCache(r.header, c.clock.Now(), time.Time{}); cached {
			return fmt.Errorf("pagpolar: GET %s: %s", subscriptionPath(m.SubscriptionID), why)
		}
		sub, err := readEffect(effSubscription, wire.AnswerGet, r.body)
		if err != nil {
			return fmt.Errorf("pagpolar: GET %s: %w", subscriptionPath(m.SubscriptionID), err)
		}
		if sub.offerSt == wire.Read {
			m.SnapshotOffer = sub.Offer
			m.SnapshotNextOffer = sub.NextOffer
		}
		if sub.planChangesSt != wire.Read {
			m.Snapshotted = m.SnapshotOffer != ""
			return nil
		}
		items, complete = sub.planChanges, true
	}
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(items))
	answer := wire.AnswerList
	if kind == kindPlanChange {
		answer = wire.AnswerGet
	}
	effs := readEffects(effectOf(kind), answer, items)
	c.learnFromList(kind, *m, effs)
	for _, e := range effs {
		if e.idSt != wire.Read {
			complete = false // an effect the snapshot cannot name
			continue
		}
		ids = append(ids, e.ID)
	}
	m.Snapshot, m.Snapshotted = ids, complete
	return nil
}

// readList reads every page of a list route (wire.ParseList says how to
// reach the next one). complete is false, with why, when the list may hold
// more than the SDK could read: paging it cannot follow, a next page on
// another host, a page that repeats. attempts bounds each page's read.
// notBefore is the moment a cached copy must postdate (servedByCache; zero
// for a snapshot).
func (c *Client) readList(ctx context.Context, path string, q url.Values, attempts int, notBefore time.Time) (items []json.RawMessage, complete bool, why string, err error) {
	items, complete, why, _, err = c.readListAt(ctx, path, q, attempts, notBefore)
	return items, complete, why, err
}

// readListAt is readList that also says whether the list stopped at a page
// that cannot be proven current (notCurrent: a stored copy, or a Date that
// does not yet prove the page postdates notBefore): a later read may prove
// what this one could not.
func (c *Client) readListAt(ctx context.Context, path string, q url.Values, attempts int, notBefore time.Time) (items []json.RawMessage, complete bool, why string, notCurrent bool, err error) {
	const maxPages = 200
	u := c.url(path, q)
	seenURL := map[string]bool{}
	seenID := map[string]bool{}
	for range maxPages {
		if seenURL[u.String()] {
			return items, false, "the list's next page points back at a page already read", false, nil
		}
		seenURL[u.String()] = true
		sent := c.clock.Now() // the copy's age counts from no earlier than this (a slow answer proves nothing)
		proof := c.dateProofAt(sent)
		if notBefore.IsZero() && !proof.floorOK {
			// A snapshot with nothing yet known of the API's clock could
			// not tell a stored copy (which would hide the effects made
			// since, to be taken later for this operation's): one read
			// no cache can have a copy of places the clock first.
			c.probeClock(ctx)
			sent = c.clock.Now()
			proof = c.dateProofAt(sent)
		}
		r, err := c.getN(ctx, u, attempts)
		if err != nil {
			return nil, false, "", false, err
		}
		if why, cached := servedByCache(r.header, sent, notBefore); cached {
			return items, false, why, true, nil
		}
		if why, stale := staleByDate(r.header, proof, sent, notBefore); stale {
			return items, false, why, true, nil
		}
		page, err := wire.ParseList(r.body, r.header)
		if err != nil {
			return nil, false, "", false, fmt.Errorf("pagpolar: GET %s: %w", path, err)
		}
		fresh := 0
		for _, it := range page.Items {
			id := itemID(it)
			if id != "" && seenID[id] {
				continue // offset paging shifted by a new item
			}
			if id != "" {
				seenID[id] = true
			}
			fresh++
			items = append(items, it)
		}
		if fresh == 0 && len(page.Items) > 0 {
			return items, false, "the list answered a page it had already answered (its cursor was ignored?)", false, nil
		}
		switch n := page.Next; {
		case n.Done:
			return items, true, "", false, nil
		case n.Problem != "":
			return items, false, n.Problem, false, nil
		case n.URL != "":
			next, err := u.Parse(n.URL)
			if err != nil || next.Scheme != c.base.Scheme || next.Host != c.base.Host {
				return items, false, fmt.Sprintf("the list's next page %q is not on the API's host", n.URL), false, nil
			}
			u = next
		default:
			q2 := url.Values{}
			for k, v := range q {
				q2[k] = append([]string(nil), v...)
			}
			for k, v := range n.Query {
				q2[k] = v
			}
			u = c.url(path, q2)
		}
	}
	return items, false, fmt.Sprintf("the list has more than %d pages", maxPages), false, nil
}

// servedByCache reports whether an answer came from a cache rather than
// from the API: a cache that serves a stored answer gives its Age (RFC
// 9111 §5.1), which an origin server does not send. Such an answer is no
// proof of what the API holds now.
//
// Age is how long ago (whole seconds) the copy was made from the API's
// answer. A copy of Age 0 or 1 made after notBefore is as good as a fresh
// read (a lookup only needs the list as it was after its trust moment):
// with now the moment the request was sent (the answer may have taken
// long to arrive), it was made no earlier than now − Age − 1 s. For a
// snapshot (notBefore zero) only Age 0 passes — a copy under a second old
// is no worse than an effect made while the snapshot was read, which the
// snapshot cannot see either. So CDNs that stamp "Age: 0" on every answer
// they pass through do not stop lookups. An Age that is not a whole number
// is read as cached.
func servedByCache(h http.Header, now, notBefore time.Time) (string, bool) {
	vs := h.Values("Age")
	if len(vs) == 0 {
		return "", false
	}
	// Several caches may each add one: the oldest counts, and one that
	// cannot be read makes the copy cached.
	v, age := strings.Join(vs, ", "), int64(-1)
	var err error
	for _, x := range vs {
		var a int64
		if a, err = strconv.ParseInt(strings.TrimSpace(x), 10, 64); err != nil || a < 0 {
			age = -1
			break
		}
		age = max(age, a)
	}
	switch {
	case err != nil || age < 0:
	case notBefore.IsZero() && age == 0:
		return "", false
	case !notBefore.IsZero() && age <= 1 && now.Before(notBefore):
		// Before the trust moment a not-found counts for nothing anyway,
		// and what a copy lists did exist.
		return "", false
	case !notBefore.IsZero() && age <= 1 && !now.Add(-time.Duration(age+1)*time.Second).Before(notBefore):
		// At most a second or two old: notBefore may be another host's
		// clock, and this bounds what its skew could let through to what
		// the trust moment's margins already allow for.
		return "", false
	}
	return "the answer was served by a cache (Age: " + oneLine(v) + "), not read from the API after the moment a lookup needs", true
}

// probeClock reads a sale no one has (a fresh random identifier, so no
// cache holds a copy of the answer): the API's own 404 carries its Date,
// which gives the client a reading of the API's clock. Its failure is not
// an error: the snapshot is then read without one, as before.
func (c *Client) probeClock(ctx context.Context) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	path := strings.Replace(wire.RouteSale, "{identifier}", "pagpolar-clock-probe-"+hex.EncodeToString(b[:]), 1)
	_, _ = c.getN(ctx, c.url(path, nil), 1)
}

// dateProof is what the API's clock was known to be when a lookup's
// request was sent, by the Date headers of earlier answers: what
// staleByDate tells a stored copy by.
type dateProof struct {
	floor   time.Time // the highest lower bound any answer gave (dateFloor)
	floorOK bool
	ceil    time.Time // an upper bound consistent with that floor (proofCeiling)
	ceilOK  bool
	tol     time.Duration // how far apart the API's own clocks may be
}

func (c *Client) dateProofAt(sent time.Time) dateProof {
	p := dateProof{tol: c.policy.ServerClockTolerance}
	p.floor, p.floorOK = c.srvClock.dateFloor(sent)
	p.ceil, p.ceilOK = c.srvClock.proofCeiling(sent)
	return p
}

// staleByDate reports whether an answer's own Date fails to prove it was
// made after the moment it must postdate, whether or not a cache said so
// with Age (a micro-cache that ignores no-cache and sends no Age passes the
// stored answer's Date on). p is what earlier answers proved of the API's
// clock at client time sent; the answer must have been made after
// notBefore (zero: after sent, for a snapshot).
//
// After a trust moment the answer must prove it is newer: its Date (whole
// seconds, so the answer was made at Date or later) must reach the upper
// bound of the API's clock at notBefore, plus the tolerance between the
// API's hosts (a host ahead stamps a copy made before the moment with a
// later Date). A Date in the same second as the moment proves nothing: a
// copy made a few hundred milliseconds earlier carries it too. Without an
// upper bound (no earlier answer to this client) a Date more than a second
// below the lower bound is still told for a copy. An answer without a
// Date, from an API whose other answers carry one, proves nothing either;
// from an API that sends none, nothing can be told by it. Before the trust moment
// nothing is concluded (a not-found counts for nothing then), and for a
// snapshot only a Date more than a second below the lower bound is a
// copy's: a copy under a second old is no worse than an effect made while
// the snapshot was read.
//
// Clocks that mislead the bounds (a step back, a host behind, a slow
// answer) can only make a fresh answer look stale, which costs a later
// lookup, never a false "not found". A pure function of its arguments.
func staleByDate(h http.Header, p dateProof, sent, notBefore time.Time) (string, bool) {
	d, err := http.ParseTime(h.Get("Date"))
	switch {
	case err != nil && !notBefore.IsZero() && !sent.Before(notBefore) && (p.ceilOK || p.floorOK):
		// The API's other answers carry a Date; this one has none (or
		// one that cannot be read): nothing tells it from a stored copy.
		return "the answer has no Date the SDK can read, though the API's other answers carry one: nothing proves it is not a stored copy", true
	case err != nil:
		return "", false // an API that sends no Date: nothing can be told by it (README's limits)
	case !notBefore.IsZero() && sent.Before(notBefore):
		return "", false // before the trust moment a not-found counts for nothing anyway
	case !notBefore.IsZero() && p.ceilOK:
		el := sent.Sub(notBefore)
		must := p.ceil.Add(-el + time.Duration(float64(el)*serverClockDrift) + p.tol)
		if d.Before(must) {
			return fmt.Sprintf("the answer's Date (%s) does not prove it was made after the moment the list must postdate (the API's clock then at most %s, its hosts up to %s apart): it may be a stored copy, not the list as it is now",
				d.UTC().Format(time.RFC3339), p.ceil.Add(-el).UTC().Format(time.RFC3339Nano), p.tol), true
		}
		return "", false
	case !p.floorOK:
		return "", false
	}
	must := p.floor
	if !notBefore.IsZero() {
		must = p.floor.Add(-sent.Sub(notBefore))
	}
	if d.Add(time.Second).Before(must) {
		return fmt.Sprintf("the answer's Date (%s) is older than the moment the list must postdate (the API's clock at least %s): a stored copy, not the list as it is now",
			d.UTC().Format(time.RFC3339), must.UTC().Format(time.RFC3339)), true
	}
	return "", false
}

func itemID(raw json.RawMessage) string {
	o, err := wire.ParseObject(raw)
	if err != nil {
		return ""
	}
	id, _ := o.Str(wire.FieldID)
	return id
}

func subscriptionPath(id string) string {
	return strings.Replace(wire.RouteSubscription, "{id}", url.PathEscape(id), 1)
}

// claimOpID names the store record that claims an effect for an operation.
// The space keeps it apart from every operation ID a caller can give
// (validation refuses spaces).
func claimOpID(kind, effectID string) string { return "claim " + kind + " " + effectID }

// claimKey is the Key of the claim record on effectID: derived like an
// operation's key, so that a claim this SDK did not write for this
// credential (another form, another credential's) is recognised and
// refused rather than read.
func (c *Client) claimKey(kind, effectID string) string {
	return c.derivedKey(claimOpID(kind, effectID))
}

// claimedByOthers returns the IDs among effs (not in the snapshot) that the
// store records as another operation's result.
func (c *Client) claimedByOthers(ctx context.Context, kind string, effs []effect, m opMeta, self string) (map[string]bool, error) {
	if !claims(kind) {
		return nil, nil
	}
	out := map[string]bool{}
	for _, e := range effs {
		if e.idSt != wire.Read || containsString(m.Snapshot, e.ID) {
			continue
		}
		rec, err := c.store.Get(ctx, c.storeID(claimOpID(kind, e.ID)))
		switch {
		case errors.Is(err, keystore.ErrNotFound):
		case err != nil:
			return nil, fmt.Errorf("pagpolar: reading the claim on %s: %w: %w", e.ID, ErrStoreUnavailable, err)
		case rec.Kind != kindClaim || rec.Key != c.claimKey(kind, e.ID):
			return nil, fmt.Errorf("pagpolar: the claim on %s: %w", e.ID, foreignRecord(rec))
		case rec.ResultRef != self:
			out[e.ID] = true
		}
	}
	return out, nil
}

// claim records that effectID is operation self's. It returns the
// operation that already claimed it, if another did.
func (c *Client) claim(ctx context.Context, kind, effectID, self string) (string, error) {
	if !claims(kind) || effectID == "" {
		return "", nil
	}
	rec := keystore.Record{OperationID: c.storeID(claimOpID(kind, effectID)), Key: c.claimKey(kind, effectID), Kind: kindClaim,
		State: keystore.StateSucceeded, ResultRef: self}
	// Like the outcome it precedes, the claim outlives the caller's
	// cancellation (bounded: deadline.go).
	ctx, cancel := c.graceCtx(ctx, 10*time.Second)
	defer cancel()
	got, err := c.store.Create(ctx, rec, c.owner, c.policy.LeaseTTL)
	switch {
	case err == nil:
		_ = c.store.Release(ctx, got.OperationID, got.LeaseToken)
		return "", nil
	case errors.Is(err, keystore.ErrExists):
		if got.Kind != kindClaim || got.Key != rec.Key {
			return "", fmt.Errorf("pagpolar: the claim on %s: %w", effectID, foreignRecord(got))
		}
		if got.ResultRef != self {
			return got.ResultRef, nil
		}
		return "", nil
	case errors.Is(err, keystore.ErrAmnesia):
		return c.claimWithoutRecord(ctx, kind, effectID, self)
	}
	return "", err
}

// claimWithoutRecord settles a claim while the store refuses new records
// after a detected loss (SAFETY rule 13), so that what survived can still
// be settled: settling must never need what the amnesia guard refuses. The
// claim record guards against another operation taking the effect; here
// that is checked on what the store holds instead. Operations created
// after the effect snapshot it (it is in their snapshot), unsettled
// survivors that could own it were checked by contested, and a settled one
// that took it shows it as its result: the store's records of this
// credential are scanned for one (bounded: more than the bound proves
// nothing, and the error leaves the operation unsettled).
func (c *Client) claimWithoutRecord(ctx context.Context, kind, effectID, self string) (string, error) {
	const limit = 10000
	prefix := c.storeID("")
	recs, err := c.store.List(ctx, keystore.Filter{States: []keystore.State{keystore.StateSucceeded}, Prefix: prefix, Limit: limit})
	if err != nil {
		return "", fmt.Errorf("pagpolar: the store refuses the claim on %s (amnesia), and its settled operations cannot be listed: %w: %w", effectID, ErrStoreUnavailable, err)
	}
	if len(recs) >= limit {
		return "", fmt.Errorf("pagpolar: the store refuses the claim on %s (amnesia), and holds too many settled operations to check them: %w", effectID, ErrStoreUnavailable)
	}
	for _, r := range recs {
		op := strings.TrimPrefix(r.OperationID, prefix)
		switch {
		case r.Kind == kindClaim && op == claimOpID(kind, effectID) && r.ResultRef != self:
			return r.ResultRef, nil
		case r.Kind == kind && r.ResultRef == effectID && op != self:
			return op, nil
		}
	}
	c.log.WarnContext(ctx, "pagpolar: the store refuses new records (amnesia): the effect is settled without its claim record, after checking the store's settled operations", "op", self, "effect", effectID)
	return "", nil
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// contested returns another unsettled operation (pending or unknown) that
// could own eff as well as this one: a refund of the same sale whose amount
// eff's amount can be read as, a change of the same subscription to the
// same offer. Its
// answer may have been lost too, so an effect found by lookup cannot be
// told apart between the two. A listing that may be incomplete counts as
// contested.
func (c *Client) contested(ctx context.Context, kind string, m opMeta, selfStoreID string, eff effect) (string, error) {
	const limit = 1000
	prefix := c.storeID("")
	recs, err := c.store.List(ctx, keystore.Filter{States: []keystore.State{keystore.StatePending, keystore.StateUnknown}, Prefix: prefix, Limit: limit})
	if err != nil {
		return "", fmt.Errorf("pagpolar: listing unsettled operations: %w: %w", ErrStoreUnavailable, err)
	}
	if len(recs) >= limit {
		return "(more than a thousand unsettled operations)", nil
	}
	for _, r := range recs {
		if r.OperationID == selfStoreID || r.Kind != kind {
			continue
		}
		var o opMeta
		if json.Unmarshal(r.Meta, &o) != nil {
			return strings.TrimPrefix(r.OperationID, prefix), nil // unreadable: it could be anything
		}
		same := false
		switch kind {
		case kindRefund:
			// The effect could be that one's if one of its amount's
			// readings is that refund's amount, as attribution reads it.
			same = o.SaleID == m.SaleID && (o.Amount == m.Amount || eff.Amount.Matches(o.Amount))
		case kindPlanChange:
			same = o.SubscriptionID == m.SubscriptionID && o.OfferID == m.OfferID
		}
		if same {
			return strings.TrimPrefix(r.OperationID, prefix), nil
		}
	}
	return "", nil
}
