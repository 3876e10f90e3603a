package pagpolar

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/keystore"
)

// Outcomes: what an answer or a lookup proved, written to the record
// (succeeded, failed, not executed, unknown) and returned to the caller.
// Reasons kept in the record are the SDK's words (scrub.go; rule 8).

// onSuccess checks a 2xx answer against the operation (SAFETY rule 7, and
// the status tables the lookup uses).
func (e *exec) onSuccess(ctx context.Context, r *response, src Source) (*settled, error) {
	c := e.c
	eff, err := readEffect(effectOf(e.s.kind), wire.AnswerPost, r.body)
	if err == nil && e.s.kind == kindPlanChange && isSubscriptionAnswer(eff, r.body, e.meta.SubscriptionID) {
		return e.planChangeAnsweredWithSubscription(ctx, r, src)
	}
	var (
		a   attribution
		why string
	)
	if err != nil {
		a, why = attrUnclear, "the 2xx body is not a "+effectOf(e.s.kind).String()+": "+err.Error()
	} else {
		if src == SourceResponse {
			c.learnFrom(e.s.kind, e.meta, eff)
		}
		a, why = attributeAnswer(eff, c.facts(e.s.kind, e.meta, nil), src == SourceReplay)
	}
	switch a {
	case attrOurs:
		if src == SourceResponse && eff.createdSt == wire.Read && !e.meta.Floor.IsZero() {
			ceiling, _ := e.c.srvClock.ceilingNow(c.clock.Now)
			if e.c.srvClock.check(eff.Created, eff.CreatedRes, e.meta.Floor, ceiling, e.c.policy.ServerClockTolerance) {
				c.log.WarnContext(ctx, "pagpolar: the API's creation times disagree with its Date headers by more than ServerClockTolerance; effects are no longer excluded by time",
					"created_at", eff.Created, "first_send_at_least", e.meta.Floor, "answer_read_at_most", ceiling)
			}
		}
		return e.succeed(ctx, eff, src)
	case attrOursRefused:
		return nil, e.refused(ctx, eff, why, src)
	case attrOther:
		why = e.c.scrub(why, e.s.fpIn.privateFields())
		// Rule 7: the replay is the first answer ever given for our key,
		// and it is provably for another request. Nothing of ours was
		// created under this key.
		e.rec.State, e.rec.ResultRef, e.rec.Error = keystore.StateFailed, "", "key collision: "+why
		e.rec.Result = mustJSON(storedFailure{Why: "collision", Message: scrubStored(why, nil)})
		out := fmt.Errorf("%w: the API replayed another request's answer for this operation's key: %s", ErrParamsMismatch, why)
		if serr := e.saveOutcome(ctx); serr != nil {
			return nil, e.notRecorded(out, serr)
		}
		return nil, e.opErr(out)
	}
	// A 2xx we cannot verify is not a success, and not a failure either:
	// the effect may well exist. Remember that (a later call must not read
	// a "not found" or a replay as anything but unknown), then look it up.
	e.meta.Saw2xx = true
	if eff.ID != "" {
		e.meta.noteUnclear([]string{eff.ID})
	}
	e.trustFrom(c.clock.Now(), c.policy.SettleDelay)
	why = e.c.scrub(why, e.s.fpIn.privateFields())
	e.rec.State, e.rec.Error = keystore.StateUnknown, "unverifiable 2xx: "+why
	if serr := e.save(ctx); serr != nil {
		return nil, e.unknownErr(serr.Error(), serr)
	}
	c.log.WarnContext(ctx, "pagpolar: 2xx answer could not be verified; settling by lookup", "op", e.s.id, "reason", why)
	return e.settle(ctx, true, true)
}

// learnFrom teaches the client this API's spellings and field names from
// a fresh answer to its own request (shapes.go), and remembers the effect
// as its own.
func (c *Client) learnFrom(kind string, m opMeta, eff effect) {
	switch kind {
	case kindPix, kindBoleto, kindCreditCard, kindSubscribe:
		if eff.methodSt == wire.Read {
			c.shapes.learnMethod(eff.Method, m.Method)
		}
	}
	o := sentOf(kind, m)
	c.shapes.learnEffect(eff, o)
	if eff.idSt == wire.Read {
		c.shapes.rememberOwn(eff.ID, o)
	}
	if eff.createdSt != wire.Read {
		c.shapes.learnNoTimes()
	}
}

// sentOf is what an operation sent, as its effects may carry it.
func sentOf(kind string, m opMeta) ownEffect {
	o := ownEffect{kind: effectOf(kind), offer: m.OfferID}
	switch kind {
	case kindPix, kindBoleto, kindCreditCard, kindSubscribe:
		o.ref, o.method = m.ExternalReference, m.Method
	case kindRefund:
		o.saleID, o.offer = m.SaleID, ""
	case kindPlanChange:
		o.subID = m.SubscriptionID
	}
	return o
}

// planChangeAnsweredWithSubscription reads a plan change's 2xx answer that
// is the subscription rather than a plan change: the change is ours when
// the subscription lists it, or shows the new offer.
func (e *exec) planChangeAnsweredWithSubscription(ctx context.Context, r *response, src Source) (*settled, error) {
	sub, _ := readEffect(effSubscription, wire.AnswerPost, r.body)
	f := e.c.facts(kindPlanChange, e.meta, nil)
	var lo lookupOutcome
	if sub.planChangesSt == wire.Read {
		claimed, err := e.c.claimedByOthers(ctx, kindPlanChange, readEffects(effPlanChange, wire.AnswerPost, sub.planChanges), e.meta, e.s.id)
		if err == nil {
			f.claimed = claimed
			lo = settleFound(readEffects(effPlanChange, wire.AnswerPost, sub.planChanges), f, true, "", nil)
		} else {
			lo = lookupOutcome{kind: lookupUnclear, reason: err.Error()}
		}
	} else if sub.offerSt == wire.Read && sub.Offer == e.meta.OfferID {
		lo = lookupOutcome{kind: lookupSucceeded, effect: effect{kind: effPlanChange, SubID: sub.ID, Offer: sub.Offer, FromOffer: e.meta.SnapshotOffer,
			Status: sub.Status, statusSt: sub.statusSt, decided: DecisionApplied}}
	} else {
		lo = lookupOutcome{kind: lookupUnclear, refs: []string{sub.ID}, reason: "the plan change was answered with the subscription, which is not on the new offer (yet)"}
	}
	switch lo.kind {
	case lookupSucceeded:
		return e.succeed(ctx, lo.effect, src)
	case lookupFailed:
		return nil, e.refused(ctx, lo.effect, lo.reason, src)
	}
	if src == SourceResponse {
		// A first (not replayed) 2xx to this very request: the change was
		// accepted (the effect exists), though the subscription does not
		// show it yet — an API that applies changes at the next billing
		// cycle answers so. Its decision is "scheduled" (SAFETY rule 3).
		from := e.meta.SnapshotOffer
		if sub.offerSt == wire.Read {
			from = sub.Offer
		}
		return e.succeed(ctx, effect{kind: effPlanChange, SubID: sub.ID, Offer: e.meta.OfferID, FromOffer: from, decided: DecisionScheduled}, src)
	}
	e.meta.Saw2xx = true
	e.meta.noteUnclear(lo.seen)
	e.rec.State, e.rec.Error = keystore.StateUnknown, "unverifiable 2xx: "+oneLine(lo.reason)
	if serr := e.save(ctx); serr != nil {
		return nil, e.unknownErr(serr.Error(), serr)
	}
	return e.settle(ctx, true, true)
}

// isSubscriptionAnswer: the body is the subscription itself.
func isSubscriptionAnswer(pc effect, body []byte, subID string) bool {
	// Only the subscription's own identifier says so: a plan change may
	// well carry next_billing_at or the like, and must then have its
	// status checked as a plan change.
	return pc.idSt == wire.Read && pc.ID == subID
}

// succeed records the operation's effect.
func (e *exec) succeed(ctx context.Context, eff effect, src Source) (*settled, error) {
	c := e.c
	if src == SourceLookup && claims(e.s.kind) {
		// An effect found by lookup is this operation's only if no other
		// unsettled operation could own it (the same sale and amount, the
		// same subscription and offer): it may be that one's, whose answer
		// was lost too.
		if other, err := c.contested(ctx, e.s.kind, e.meta, e.rec.OperationID, eff); err != nil || other != "" {
			reason := fmt.Sprintf("the effect found could be operation %q's, which is not settled either", other)
			if err != nil {
				reason = "could not check for other operations on the same " + effectOf(e.s.kind).String() + " target"
			}
			return nil, e.unknownSaved(ctx, reason, err, eff.label())
		}
	}
	if other, err := c.claim(ctx, e.s.kind, eff.ID, e.s.id); err != nil || other != "" {
		if err != nil && src != SourceLookup {
			// The effect is ours (the API answered this key), but without
			// its claim another operation could take it for its own: leave
			// the record unsettled (a later call or Resume finds the effect,
			// claims it and records it) and tell the caller what it got.
			c.log.WarnContext(ctx, "pagpolar: succeeded, but the claim on the effect could not be written; the record stays unsettled", "op", e.s.id, "effect", eff.ID, "err", err)
			value := c.resultValue(e.s.kind, eff)
			c.emit(ctx, Event{Kind: EventSettle, OperationID: e.s.id, Key: e.rec.Key, State: string(keystore.StateSucceeded), Source: src})
			return &settled{rec: e.rec, op: e.op(src), value: value}, nil
		}
		if src == SourceLookup {
			// Another operation claimed it between the lookup and now, or
			// the claim cannot be written: no proof it is ours.
			reason := "the effect found was claimed by operation " + other + " meanwhile"
			if err != nil {
				reason = "could not record the claim on the effect found"
			}
			return nil, e.unknownSaved(ctx, reason, err, eff.label())
		}
		c.log.WarnContext(ctx, "pagpolar: the API's answer to this operation names an effect another operation claimed", "op", e.s.id, "effect", eff.ID, "other", other, "err", err)
	}
	value := c.resultValue(e.s.kind, eff)
	ref := eff.ID
	if ref == "" && eff.kind == effPlanChange {
		ref = "subscription " + eff.SubID + " on " + eff.Offer
	}
	e.rec.State, e.rec.ResultRef, e.rec.Result, e.rec.Error = keystore.StateSucceeded, ref, resultJSON(value), ""
	e.undecided = !eff.decision().Decided()
	if err := e.saveOutcome(ctx); err != nil {
		// The effect exists and is ours; the caller must know. The record is
		// left pending/unknown and a later call settles it by lookup/replay.
		c.log.WarnContext(ctx, "pagpolar: succeeded but could not record it", "op", e.s.id, "err", err)
	}
	c.effectIndex(ctx, e, eff)
	c.emit(ctx, Event{Kind: EventSettle, OperationID: e.s.id, Key: e.rec.Key, State: string(keystore.StateSucceeded), Decision: eff.decision(), Source: src})
	return &settled{rec: e.rec, op: e.op(src), value: value}, nil
}

// resultValue is the typed result of an effect, its decision stamped
// with the moment the SDK learned it.
func (c *Client) resultValue(kind string, eff effect) any {
	now := c.clock.Now().UTC()
	switch kind {
	case kindRefund:
		r := eff.refund()
		r.DecisionAt = now
		return r
	case kindSubscribe:
		s := eff.subscription(&c.shapes)
		s.DecisionAt = now
		return s
	case kindPlanChange:
		p := eff.planChange()
		p.DecisionAt = now
		return p
	}
	s := eff.sale(&c.shapes)
	s.DecisionAt = now
	return s
}

// refused records an effect the API recorded as refused (a declined sale,
// a failed refund): the operation failed, definitely.
func (e *exec) refused(ctx context.Context, eff effect, why string, src Source) error {
	sentinel, kind := ErrRefused, "refused"
	if eff.kind == effSale || eff.kind == effSubscription {
		sentinel, kind = ErrDeclined, "declined"
	}
	why = e.c.scrub(why, e.s.fpIn.privateFields())
	e.rec.State, e.rec.ResultRef, e.rec.Error = keystore.StateFailed, eff.ID, why
	e.rec.Result = mustJSON(storedFailure{Status: http.StatusPaymentRequired, Code: kind, Message: scrubStored(why, nil), Why: kind})
	serr := e.saveOutcome(ctx)
	e.c.emit(ctx, Event{Kind: EventSettle, OperationID: e.s.id, State: string(keystore.StateFailed), Source: src})
	out := fmt.Errorf("%w: %s (%s)", sentinel, why, src)
	if serr != nil {
		return e.notRecorded(out, serr)
	}
	return e.opErr(out)
}

// apiFailed records the API's definite refusal of the request.
func (e *exec) apiFailed(ctx context.Context, apiErr *APIError) error {
	// The API's message says why; it is stored scrubbed of anything
	// personal the request carried (rule 8; scrub.go).
	msg := storedMessage(apiErr.Message, e.s.fpIn.privateFields())
	e.rec.State, e.rec.Error = keystore.StateFailed, storedReason(apiErr)
	if msg != "" {
		e.rec.Error += ": " + msg
	}
	e.rec.Result = mustJSON(storedFailure{Status: apiErr.StatusCode, Code: apiErr.Code, Message: msg, RequestID: apiErr.RequestID, Why: "api"})
	serr := e.saveOutcome(ctx)
	e.c.emit(ctx, Event{Kind: EventSettle, OperationID: e.s.id, State: string(keystore.StateFailed), Source: SourceResponse, Status: apiErr.StatusCode})
	if serr != nil {
		// The API registered no key for the refused request, so the
		// operation is over only once its record says so: until then
		// another worker (one that takes the lease, or a later process)
		// looks it up, finds nothing and sends it again, and that send may
		// be accepted. Failed is an answer only once written, as not
		// executed is (notExecuted).
		e.c.log.WarnContext(ctx, "pagpolar: could not record a failure", "op", e.s.id, "err", serr)
		e.rec.State = e.stored
		return e.opErr(e.unknownErr("the API refused this call's request, but the key store did not record that, so the operation is not over: another worker may hold it and send it again",
			&unrecordedError{outcome: apiErr, store: opCause(serr)}))
	}
	return e.opErr(apiErr)
}

// saveOutcome writes a settled outcome, trying again a few times (within
// about two seconds) when the store fails: an outcome that is known must
// not be left looking like a send in flight. If it still cannot be
// written, the client remembers it for its own later calls (a later call
// of this client answers it instead of looking up and resending).
func (e *exec) saveOutcome(ctx context.Context) error {
	var err error
	// Every try and pause ends by the caller's end plus one grace
	// (deadline.go): the whole series, not each try.
	gctx, cancel := e.c.graceCtx(ctx, 15*time.Second)
	defer cancel()
	for i, pause := range []time.Duration{0, 100 * time.Millisecond, 400 * time.Millisecond, time.Second} {
		if i > 0 {
			if serr := sleep(gctx, e.c.clock, pause); serr != nil {
				break
			}
		}
		want := e.rec
		if err = e.save(ctx); err == nil {
			e.c.unrecorded.forget(e.rec.OperationID)
			return nil
		}
		if errors.Is(err, ErrLeaseLost) {
			break // another worker has the operation now: its outcome is its to write
		}
		e.rec = want
	}
	if e.rec.State.Settled() {
		e.c.unrecorded.remember(e.rec)
	}
	return err
}

// applyUnrecorded writes and answers an outcome this client knew and could
// not write (saveOutcome), if the record is still as it was then (a
// not_executed one it only writes: ok with a nil result and error): a record
// someone else has written since (another host continued the operation)
// makes the remembered outcome stale, and it is forgotten.
func (e *exec) applyUnrecorded(ctx context.Context) (*settled, error, bool) {
	known, ok := e.c.unrecorded.get(e.rec.OperationID)
	if !ok {
		return nil, nil, false
	}
	if known.Version != e.rec.Version {
		e.c.unrecorded.forget(e.rec.OperationID)
		return nil, nil, false
	}
	e.rec.State, e.rec.ResultRef, e.rec.Result, e.rec.Error = known.State, known.ResultRef, known.Result, known.Error
	if err := e.saveOutcome(ctx); err != nil {
		return nil, e.notRecorded(fmt.Errorf("pagpolar: operation %q was %s", e.s.id, known.State), err), true
	}
	if e.rec.State == keystore.StateNotExecuted {
		// Written now: the operation is what a not_executed record is,
		// one a call sends again (runOp goes on) and Resume reports.
		return nil, nil, true
	}
	res, err := e.c.fromRecord(e.s.id, e.rec)
	return res, err, true
}

// notRecorded wraps the error of a settled outcome that saveOutcome could
// not write.
func (e *exec) notRecorded(outcome error, serr error) error {
	return e.opErr(&unrecordedError{outcome: outcome, store: serr})
}

// unrecordedError is an outcome that is known but not in the store.
type unrecordedError struct{ outcome, store error }

func (u *unrecordedError) Error() string {
	return fmt.Sprintf("%v — %v: the outcome is known but the key store did not take it (%v). "+
		"A later call of this client answers the same outcome; a call from another process looks the effect up first and sends again only if the lookup proves nothing was done",
		u.outcome, ErrNotRecorded, u.store)
}

func (u *unrecordedError) Unwrap() []error { return []error{u.outcome, ErrNotRecorded} }

// storedReason is the one-line reason kept in the store for an API answer:
// status and code, never the API's free text.
func storedReason(e *APIError) string {
	r := fmt.Sprintf("API answered %d", e.StatusCode)
	if e.Code != "" {
		r += " " + e.Code
	}
	if !e.FromAPI {
		r += " (not the API's body)"
	}
	return r
}

// notExecuted records that nothing was executed. reason is what the record
// keeps: the SDK's own words, with statuses and codes but no API text
// (describeErr); cause is what the caller gets.
func (e *exec) notExecuted(ctx context.Context, reason string, cause error) error {
	e.rec.State, e.rec.Error = keystore.StateNotExecuted, reason
	if err := e.saveOutcome(ctx); err != nil {
		// This call's attempts were not processed, but the record still
		// says the operation may be in flight, and nothing proves this
		// call still holds it: a lease that ran out while it waited
		// (ErrLeaseLost) lets another worker send. Not executed is an
		// answer only once written (SAFETY rule 12).
		return e.notExecutedUnwritten(ctx, "no attempt of this call was processed", fmt.Errorf("%w (recording it: %w)", cause, opCause(err)))
	}
	e.c.emit(ctx, Event{Kind: EventSettle, OperationID: e.s.id, Key: e.rec.Key, State: string(keystore.StateNotExecuted)})
	return e.opErr(notExecutedError{cause})
}

// notExecutedUnwritten is the answer when a proven not_executed could not
// be written: the record keeps its stored state (it still says the
// operation may be in flight) and the answer is unknown (SAFETY rule 12).
func (e *exec) notExecutedUnwritten(ctx context.Context, what string, err error) error {
	e.c.log.WarnContext(ctx, "pagpolar: could not record not_executed", "op", e.s.id, "err", err)
	e.rec.State = e.stored
	return e.opErr(e.unknownErr(what+", but the key store did not record that, so another worker may hold the operation and send it", err))
}

// unknownErr builds the outcome-unknown error; its reason and cause are
// scrubbed (they may quote answers: scrub.go).
func (e *exec) unknownErr(reason string, err error) error {
	return &OutcomeUnknownError{OperationID: e.s.id, Key: e.rec.Key, Reason: e.c.scrub(reason, e.s.fpIn.privateFields()), Err: e.scrubErr(err), SettleAfter: e.meta.TrustAfter}
}

// unknownSaved ends the call with "outcome unknown" and writes why into
// the record (best effort), for ops show and the next call.
func (e *exec) unknownSaved(ctx context.Context, reason string, err error, ref string) error {
	e.rec.State, e.rec.Error = keystore.StateUnknown, "outcome unknown: "+reason
	_ = e.save(ctx)
	u := e.unknownErr(reason, err).(*OutcomeUnknownError)
	u.Ref = ref
	return u
}
