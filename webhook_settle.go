package pagpolar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/keystore"
)

// SourceWebhook: the operation was settled from a webhook event that
// carried its effect (SettleFromWebhook); no request was sent.
const SourceWebhook Source = "webhook"

// SettleFromWebhook settles, without sending anything, the unsettled
// operations of this client's credential whose effect a webhook delivery
// describes: a TRANSACTION_* event carries a sale, which may settle a
// charge (PIX, boleto, card) left unknown or pending by a crash; a
// SUBSCRIPTION_* event carries a subscription, which may settle a
// subscribe — the one operation that has no reliable lookup.
//
// body is the delivery as received (the envelope). The effect is
// attributed to each candidate operation (same external reference, same
// kind) by the rule a lookup uses (attribute.go): exclusion needs proof,
// and an effect that cannot be attributed leaves the operation unknown —
// and is remembered, so that no later lookup reads its absence as "not
// found". An operation another worker holds is not touched (that worker
// settles it by lookup): the error then wraps ErrInProgress, and
// webhook.Inbox offers the event again later (settling only), in case that
// worker's call ends unknown.
// Webhook events arrive in any order and may describe an older state: for
// an unsettled operation the existence of the effect is what settles it
// (its decision is the event's); for a settled one the event's decision
// replaces the recorded one only when it comes later (webhook_decision.go).
//
// Only successes are settled from an event: one event shows one effect, and
// a refusal under the reference may be an earlier attempt's. Playground
// test events settle nothing. The delivery carries no credential: give
// each credential its own receiver (webhook token) when several share a
// store.
//
// webhook.Config.Settle calls it for every event, before the handlers.
func (c *Client) SettleFromWebhook(ctx context.Context, body []byte) ([]ResumeResult, error) {
	env, err := wire.ParseObject(body)
	if err != nil {
		return nil, fmt.Errorf("pagpolar: webhook body: %w", err)
	}
	if t, ok := env.Get("test"); ok && string(t) != "false" && string(t) != "null" {
		return nil, nil // a Playground test event: its effect does not exist
	}
	data, _ := env.Get("data")
	dataObj, err := wire.ParseObject(data)
	if err != nil {
		return nil, nil // empty data: nothing to settle
	}
	var (
		eff   effect
		kinds []string
	)
	tx, hasTx := dataObj.Get("transaction")
	sub, hasSub := dataObj.Get("subscription")
	switch {
	case hasTx && len(tx) > 0 && string(tx) != "null":
		eff, err = readEffect(effSale, wire.AnswerWebhook, tx)
		kinds = []string{kindPix, kindBoleto, kindCreditCard}
	case hasSub && len(sub) > 0 && string(sub) != "null":
		eff, err = readEffect(effSubscription, wire.AnswerWebhook, sub)
		kinds = []string{kindSubscribe}
	default:
		return nil, nil
	}
	if err != nil || eff.refSt != wire.Read || eff.idSt != wire.Read {
		return nil, nil // no reference or identifier: nothing this can be matched on
	}
	c.shapes.learnFromOwn([]effect{eff})
	cands, err := c.unsettledByReference(ctx, kinds, eff.Ref)
	if err != nil {
		return nil, err
	}
	var (
		out  []ResumeResult
		held []string
	)
	for _, cand := range cands {
		res, isHeld, err := c.settleOneFromEffect(ctx, cand, eff)
		if isHeld {
			held = append(held, res.OperationID)
		}
		if err != nil {
			return out, err
		}
		out = append(out, res)
	}
	moved, mheld, err := c.decisionsFromEvent(ctx, eff)
	out, held = append(out, moved...), append(held, mheld...)
	if err != nil {
		return out, fmt.Errorf("pagpolar: moving decisions from a webhook event: %w: %w", ErrStoreUnavailable, err)
	}
	if len(held) > 0 {
		return out, fmt.Errorf("%w: operations %s may be settled by this event and are held by a worker; try the event again later", ErrInProgress, strings.Join(held, ", "))
	}
	return out, nil
}

// candidate is an unsettled record, with the caller's operation ID.
type candidate struct {
	rec  keystore.Record
	opID string
}

// unsettledByReference lists this credential's pending and unknown
// operations of the given kinds under an external reference.
func (c *Client) unsettledByReference(ctx context.Context, kinds []string, ref string) ([]candidate, error) {
	const limit = 1000
	prefix := c.storeID("")
	var out []candidate
	recs, err := c.store.List(ctx, keystore.Filter{States: []keystore.State{keystore.StatePending, keystore.StateUnknown}, Prefix: prefix, Limit: limit})
	if err != nil {
		return nil, fmt.Errorf("pagpolar: listing unsettled operations: %w: %w", ErrStoreUnavailable, err)
	}
	if len(recs) >= limit {
		c.log.Warn("pagpolar: more than a thousand unsettled operations; a webhook event may not reach every one it could settle", "listed", len(recs))
	}
	for _, r := range recs {
		if !containsString(kinds, r.Kind) || !c.ownsRecord(r, strings.TrimPrefix(r.OperationID, prefix)) {
			continue
		}
		var m opMeta
		if json.Unmarshal(r.Meta, &m) == nil && m.ExternalReference == ref {
			out = append(out, candidate{rec: r, opID: strings.TrimPrefix(r.OperationID, prefix)})
		}
	}
	return out, nil
}

// settleOneFromEffect attributes eff to one operation under its lease.
func (c *Client) settleOneFromEffect(ctx context.Context, cand candidate, eff effect) (ResumeResult, bool, error) {
	opID, sid := cand.opID, cand.rec.OperationID
	res := ResumeResult{OperationID: opID, Key: cand.rec.Key, State: cand.rec.State, Attempts: cand.rec.Attempts}
	owner := c.callOwner()
	rec, err := c.store.Acquire(ctx, sid, owner, c.policy.LeaseTTL)
	switch {
	case errors.Is(err, keystore.ErrLeaseHeld):
		res.Err = ErrInProgress
		return res, true, nil
	case errors.Is(err, keystore.ErrNotFound):
		return res, false, nil
	case err != nil:
		return res, false, fmt.Errorf("pagpolar: operation %q: %w: %w", opID, ErrStoreUnavailable, err)
	}
	e := &exec{c: c, rec: rec, s: &opSpec{kind: rec.Kind, id: opID}, owner: owner, leaseAt: c.clock.Now()}
	e.noteLease(rec)
	defer e.release(ctx)
	if rec.State.Settled() || rec.Attempts == 0 {
		// Settled meanwhile, or never sent (a cold charge whose snapshot
		// failed): an event about an effect under its reference cannot be
		// this operation's.
		res.State, res.Ref = rec.State, rec.ResultRef
		return res, false, nil
	}
	if err := json.Unmarshal(rec.Meta, &e.meta); err != nil {
		return res, false, fmt.Errorf("pagpolar: operation %q: corrupt record meta: %w", opID, err)
	}
	e.metaJSON, e.savedMeta = append([]byte(nil), rec.Meta...), e.meta
	e.s.path = e.meta.Path
	e.meta.fillStoreTrust(rec, c.policy)
	if e.meta.TrustAfter.IsZero() {
		e.meta.TrustAfter = rec.LastSentAt.Add(c.policy.trustDelay())
	}
	a, why := attributeFound(eff, c.facts(rec.Kind, e.meta, nil))
	switch a {
	case attrOurs:
		if _, err := e.succeed(ctx, eff, SourceWebhook); err != nil {
			res.Err = err
		}
	case attrOursRefused:
		// One event shows one effect. A refusal under the reference may be
		// an earlier attempt's (a decline, then a retry under a new
		// operation ID whose own sale is paid): only a lookup, which sees
		// every effect, may settle a refusal.
		res.Err = e.unknownErr("a webhook event shows a refused effect ("+why+"); only a lookup, which sees every effect under the reference, settles a refusal", nil)
	case attrUnclear:
		// Seen, and not understood: a later "not found" must not be trusted.
		e.meta.noteUnclear([]string{eff.ID})
		res.Err = e.unknownSaved(ctx, "a webhook event carried "+why, nil, eff.label())
	default:
		res.Err = e.unknownErr("the webhook event's "+eff.label()+" is another operation's ("+why+")", nil)
	}
	res.State, res.Ref, res.Attempts, res.Decision = e.rec.State, e.rec.ResultRef, e.rec.Attempts, recordDecision(e.rec)
	return res, false, nil
}
