package pagpolar

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
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
	// could not, so a caller that may wait looks again — unless the API's
	// clock cannot reach proveBy, the Date a later answer must carry
	// (zero: none known, a copy told by its Age), within that wait.
	notCurrent bool
	proveBy    time.Time
	// floorBroken: the operation's recorded floor does not hold on this
	// process's reading of the API's clock (opFacts.floorBroken).
	floorBroken bool
}

// staleRead says why a list read stopped at an answer it could not prove
// current (is), and the Date a later answer must carry to prove itself
// (proveBy; zero: none known).
type staleRead struct {
	is      bool
	proveBy time.Time
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
		ceiling, ok := c.srvClock.ceilingNow(c.clock.Now)
		if floorHolds(m.exclusionFloor(), ceiling, ok, c.policy.ServerClockTolerance) {
			f.floor = m.exclusionFloor()
		}
		// Broken only by an answer no cache serves again: a list's
		// copies carry old Dates and would strip a sound floor, leaving
		// the operation's own effect unclear for good.
		if fc, ok := c.srvClock.freshCeilingNow(c.clock.Now); ok && !floorHolds(m.exclusionFloor(), fc, ok, c.policy.ServerClockTolerance) {
			f.floorBroken = true
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
		items    []json.RawMessage
		complete bool
		why      string
		stale    staleRead
		err      error
	)
	switch kind {
	case kindPix, kindBoleto, kindCreditCard:
		items, complete, why, stale, err = c.readListAt(ctx, wire.RouteSales, url.Values{"external_reference": {m.ExternalReference}}, 1, m.TrustAfter, m.ProveBy)
	case kindRefund:
		items, complete, why, stale, err = c.readListAt(ctx, wire.RouteRefunds, url.Values{"sale_identifier": {m.SaleID}}, 1, m.TrustAfter, m.ProveBy)
	case kindSubscribe:
		items, complete, why, stale, err = c.readListAt(ctx, wire.RouteSubscriptions, url.Values{"external_reference": {m.ExternalReference}}, 1, m.TrustAfter, m.ProveBy)
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
	f := c.facts(kind, m, claimed)
	lo := settleFound(effs, f, complete, why, m.Unclear)
	lo.floorBroken = f.floorBroken
	if stale.is && lo.kind == lookupUnclear && len(lo.refs) == 0 {
		lo.notCurrent, lo.proveBy = true, stale.proveBy
	}
	return lo, nil
}

// lookupPlanChange reads the subscription: its plan changes if the API
// lists them, else its current offer.
func (c *Client) lookupPlanChange(ctx context.Context, opID string, m opMeta) (lookupOutcome, error) {
	sent, proof := c.proofForRead(ctx, m.TrustAfter, m.ProveBy)
	r, err := c.getN(ctx, c.url(subscriptionPath(m.SubscriptionID), nil), 1)
	if err != nil {
		return lookupOutcome{}, err
	}
	if why, cached := servedByCache(r.header, sent, m.TrustAfter); cached {
		return lookupOutcome{kind: lookupUnclear, notCurrent: true, reason: "GET " + subscriptionPath(m.SubscriptionID) + ": " + why}, nil
	}
	if why, stale := staleByDate(r.header, proof, sent, m.TrustAfter); stale {
		by, _ := proofTarget(proof, sent, m.TrustAfter)
		return lookupOutcome{kind: lookupUnclear, notCurrent: true, proveBy: by, reason: "GET " + subscriptionPath(m.SubscriptionID) + ": " + why}, nil
	}
	sub, err := readEffect(effSubscription, wire.AnswerGet, r.body)
	if err != nil {
		return lookupOutcome{kind: lookupUnclear, reason: "GET " + subscriptionPath(m.SubscriptionID) + " answered a body the SDK cannot read: " + err.Error()}, nil
	}
	if sub.planChangesSt != wire.Read {
		f := c.facts(kindPlanChange, m, nil)
		lo := subscriptionState(sub, f)
		lo.floorBroken = f.floorBroken
		return lo, nil
	}
	effs := readEffects(effPlanChange, wire.AnswerGet, sub.planChanges)
	c.learnFromList(kindPlanChange, m, effs)
	claimed, err := c.claimedByOthers(ctx, kindPlanChange, effs, m, opID)
	if err != nil {
		return lookupOutcome{}, err
	}
	f := c.facts(kindPlanChange, m, claimed)
	lo := settleFound(effs, f, true, "", m.Unclear)
	lo.floorBroken = f.floorBroken
	return lo, nil
}

// settleFound attributes every effect found and decides; an effect an
// earlier lookup could not attribute that is no longer listed is no proof
// of absence.
func settleFound(effs []effect, f opFacts, complete bool, why string, seenUnclear []string) lookupOutcome {
	js := make([]judged, 0, len(effs))
	listed := map[string]bool{}
	shared := sharedIDs(effs)
	judgedAs := map[string]effect{}
	for _, e := range effs {
		if prev, ok := judgedAs[e.ID]; ok && e.idSt == wire.Read && sameListing(prev, e) {
			continue // the same effect listed again (a page boundary that moved)
		}
		if e.idSt == wire.Read {
			if _, ok := judgedAs[e.ID]; !ok {
				judgedAs[e.ID] = e
			}
		}
		a, w := attributeFound(e, f)
		if shared[e.ID] {
			// Exclusion by identifier (a snapshot, a claim) assumes the
			// field identifies: one that two different listed effects
			// carry does not, and proves nothing about either.
			a, w = attrUnclear, e.label()+" (another listed "+e.kind.String()+" carries the same identifier, so it identifies neither)"
		}
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

// sharedIDs are the identifiers that two listed effects carry while
// differing in something else they show: a field read as the identifier
// that does not identify (a constant, another field under a lookalike
// name). The same effect listed twice (a page boundary that moved) shows
// the same everywhere and is not counted.
func sharedIDs(effs []effect) map[string]bool {
	first := map[string]effect{}
	var shared map[string]bool
	for _, e := range effs {
		if e.idSt != wire.Read {
			continue
		}
		o, seen := first[e.ID]
		if !seen {
			first[e.ID] = e
			continue
		}
		if !sameListing(o, e) {
			if shared == nil {
				shared = map[string]bool{}
			}
			shared[e.ID] = true
		}
	}
	return shared
}

// sameListing reports whether a and b show the same effect in every field
// the SDK reads.
func sameListing(a, b effect) bool {
	return a.kind == b.kind && a.Ref == b.Ref && a.Method == b.Method && a.Offer == b.Offer && a.FromOffer == b.FromOffer &&
		a.SaleID == b.SaleID && a.SubID == b.SubID && a.Status == b.Status && a.NextOffer == b.NextOffer &&
		a.Amount == b.Amount && a.Created.Equal(b.Created) && a.CreatedRes == b.CreatedRes
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
	items, complete, why, _, err = c.readListAt(ctx, path, q, attempts, notBefore, time.Time{})
	return items, complete, why, err
}

// readListAt is readList that also says whether the list stopped at a page
// that cannot be proven current (stale: a stored copy, or a Date that
// does not yet prove the page postdates notBefore): a later read may prove
// what this one could not. proveBy is the record's threshold for a client
// with no reading of the API's clock (opMeta.ProveBy; zero: none).
func (c *Client) readListAt(ctx context.Context, path string, q url.Values, attempts int, notBefore, proveBy time.Time) (items []json.RawMessage, complete bool, why string, stale staleRead, err error) {
	const maxPages = 200
	u := c.url(path, q)
	seenURL := map[string]bool{}
	seenID := map[string]json.RawMessage{}
	for range maxPages {
		if seenURL[u.String()] {
			return items, false, "the list's next page points back at a page already read", staleRead{}, nil
		}
		seenURL[u.String()] = true
		// sent: the copy's age counts from no earlier than this (a slow
		// answer proves nothing).
		sent, proof := c.proofForRead(ctx, notBefore, proveBy)
		r, err := c.getN(ctx, u, attempts)
		if err != nil {
			return nil, false, "", staleRead{}, err
		}
		if why, cached := servedByCache(r.header, sent, notBefore); cached {
			return items, false, why, staleRead{is: true}, nil
		}
		if why, stale := staleByDate(r.header, proof, sent, notBefore); stale {
			by, _ := proofTarget(proof, sent, notBefore)
			return items, false, why, staleRead{is: true, proveBy: by}, nil
		}
		page, err := wire.ParseList(r.body, r.header)
		if err != nil {
			return nil, false, "", staleRead{}, fmt.Errorf("pagpolar: GET %s: %w", path, err)
		}
		fresh := 0
		for _, it := range page.Items {
			id := itemID(it)
			if prev, seen := seenID[id]; id != "" && seen && bytes.Equal(prev, it) {
				continue // offset paging shifted by a new item: the same item again
			}
			if _, seen := seenID[id]; id == "" || !seen {
				// Only an item under an identifier not seen before is news
				// of the list: a page of nothing else may be a page already
				// answered (a cursor ignored), whatever bytes changed.
				fresh++
				if id != "" {
					seenID[id] = it
				}
			}
			// Another item under a seen identifier is kept: a field read
			// as the identifier that two items carry identifies neither
			// (settleFound, sharedIDs).
			items = append(items, it)
		}
		if fresh == 0 && len(page.Items) > 0 {
			return items, false, "the list answered a page it had already answered (its cursor was ignored?)", staleRead{}, nil
		}
		switch n := page.Next; {
		case n.Done:
			return items, true, "", staleRead{}, nil
		case n.Problem != "":
			return items, false, n.Problem, staleRead{}, nil
		case n.URL != "":
			next, err := u.Parse(n.URL)
			if err != nil || next.Scheme != c.base.Scheme || next.Host != c.base.Host {
				return items, false, fmt.Sprintf("the list's next page %q is not on the API's host", n.URL), staleRead{}, nil
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
	return items, false, fmt.Sprintf("the list has more than %d pages", maxPages), staleRead{}, nil
}

func itemID(raw json.RawMessage) string {
	o, err := wire.ParseObject(raw)
	if err != nil {
		return ""
	}
	id, _ := o.Str(wire.Names(wire.AnswerList, wire.FID))
	return id
}

func subscriptionPath(id string) string {
	return strings.Replace(wire.RouteSubscription, "{id}", url.PathEscape(id), 1)
}
