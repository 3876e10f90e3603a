package pagpolar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/keystore"
)

// The engine: one business operation under docs/SAFETY.md. run records the
// operation (rule 1) and leases it (rule 9); sendLoop sends and acts on the
// classification of each answer (classify.go; rules 2–4, 7); settle looks
// an ambiguous attempt up and attributes what it finds (lookup.go and
// attribute.go; rules 5, 11, 12) before anything is sent again.

// Source says how a result was obtained.
type Source string

// Sources of a result.
const (
	SourceResponse    Source = "response"     // the API's answer to our request
	SourceReplay      Source = "replay"       // the API replayed the first answer for the key (Idempotency-Replayed: true)
	SourceLookup      Source = "lookup"       // settled by looking the effect up after an ambiguous attempt
	SourceLocalRecord Source = "local_record" // the operation was already settled in the key store; no request was sent
)

// Operation describes the business operation behind a result.
type Operation struct {
	ID        string // the operation ID (derived or given)
	Key       string // the Idempotency-Key sent
	Source    Source // how the result was obtained
	Attempts  int    // requests sent for this operation so far, across calls
	RequestID string // X-Request-Id of the answer, if the result came from one
}

// keyNamespace roots the UUIDv5 idempotency keys (a fixed, random UUID).
var keyNamespace = uuid.MustParse("5d0c6f0e-9a43-4b7e-8f5e-2b7f3f6f0a11")

// idempotencyKey derives the key of an operation: UUIDv5 of the credential
// ID and the operation ID, so two hosts that do not share a store still send
// one key for one operation. With WithRandomKeys, a UUIDv4 (kept only in the
// store).
func (c *Client) idempotencyKey(opID string) string {
	if c.randomKeys {
		return uuid.NewString()
	}
	return uuid.NewSHA1(keyNamespace, []byte(c.credentialID+"\x00"+opID)).String()
}

// opSpec is one call's operation.
type opSpec struct {
	kind string
	id   string // caller-facing operation ID
	path string
	body []byte
	fpIn fields // what the fingerprint covers (rule 10)
	fp   string // its fingerprint under the current secret (set by run)
	meta opMeta
}

// settled is what run returns: the final record and how it was obtained.
type settled struct {
	rec   keystore.Record
	op    Operation
	value any // the typed result when this call obtained it (nil: decode rec.Result)
}

// exec carries one call's state through the send and settle loops.
type exec struct {
	c       *Client
	s       *opSpec
	rec     keystore.Record
	meta    opMeta
	retries int // resends this call decided
	lastReq string
	owner   string    // this call's lease owner
	leaseAt time.Time // when this call last obtained or extended its lease (client clock)

	// storedTerminal: the record as last written is terminal.
	storedTerminal bool

	// storeBase is the key store's clock when the lease was last obtained
	// or extended (its LeaseExpiresAt less the TTL), read at client time
	// storeAt: the store's clock now is storeBase + (now - storeAt).
	storeBase, storeAt time.Time

	// metaJSON is e.meta as last written; savedMeta the value it encodes.
	metaJSON  []byte
	savedMeta opMeta
}

// run executes one operation. It returns the settled record (State
// succeeded, with Result) or an error:
//   - *ValidationError / ErrParamsMismatch (nothing sent),
//   - ErrStoreUnavailable (nothing sent),
//   - *APIError, ErrDeclined, ErrRefused for definite failures,
//   - *OutcomeUnknownError (record left unknown),
//   - ErrInProgress / ErrLeaseLost (another worker holds the operation),
//   - ErrBudgetExhausted, ErrRateLimited, ErrUnavailable (not executed).
func (c *Client) run(ctx context.Context, s *opSpec) (*settled, error) {
	p := c.policy
	now := c.clock.Now()
	s.fp = c.fingerprint(s.fpIn)
	e := &exec{c: c, s: s, meta: s.meta, owner: c.callOwner()}
	e.meta.Path = s.path
	rec := keystore.Record{
		OperationID: c.storeID(s.id),
		Key:         c.idempotencyKey(s.id),
		Kind:        s.kind,
		Fingerprint: s.fp,
		State:       keystore.StatePending,
	}
	// A charge whose first send can be placed on the API's clock is saved
	// as "about to be sent" at once (one write before the send; a crash
	// before the send leaves an ambiguous-looking record that a lookup
	// settles). Otherwise a snapshot comes first.
	snapFirst := e.wantsSnapshot()
	if !snapFirst {
		floor, _ := c.srvClock.floor(now)
		rec.Attempts, rec.FirstSentAt, rec.LastSentAt = 1, now, now
		e.meta.Floor, e.meta.FloorOK = floor, true
		// Counted from the save, before the token fetch that precedes the
		// send: a process that picks this record up after a crash must
		// allow for that fetch too.
		e.meta.TrustAfter = now.Add(p.trustDelay() + p.AttemptTimeout)
	}
	rec.Meta = e.encodeMeta()
	if legacy := c.legacyStoreID(s.id); legacy != "" {
		// A record an earlier version wrote under the unescaped ID. A read
		// that fails is no proof there is none: no store, no send.
		old, err := c.store.Get(ctx, legacy)
		switch {
		case err == nil && c.ownsRecord(keystoreRecordKey{old.Key}, s.id):
			return e.existing(ctx, old)
		case err != nil && !errors.Is(err, keystore.ErrNotFound):
			return nil, &OperationError{OperationID: s.id, Key: rec.Key, State: "unreadable",
				Err: fmt.Errorf("%w: reading the operation's record under its earlier ID; nothing was sent: %w", ErrStoreUnavailable, err)}
		}
	}
	created, err := c.store.Create(ctx, rec, e.owner, p.LeaseTTL)
	switch {
	case err == nil:
		e.rec, e.leaseAt = created, now
		e.noteLease(created)
		defer e.release()
		if snapFirst {
			return e.firstSend(ctx)
		}
		return e.sendLoop(ctx, false)
	case errors.Is(err, keystore.ErrExists):
		return e.existing(ctx, created)
	}
	return nil, e.createFailed(ctx, rec, err)
}

// wantsSnapshot: refunds and plan changes always take a snapshot before a
// series of attempts; other kinds unless their first send can be placed on
// the API's clock by a validated bound (servertime.go) and the API's
// effects carry usable creation times, so that earlier effects are
// excluded by ID otherwise.
func (e *exec) wantsSnapshot() bool {
	if needsSnapshot(e.s.kind) || e.c.shapes.timesUnusable() || !e.c.srvClock.usable() {
		return true
	}
	_, ok := e.c.srvClock.floor(e.c.clock.Now())
	return !ok
}

// createFailed handles a Create that did not say "created" or "exists".
// Its reply may have been lost after the record was written: then the
// record holds this call's lease for a whole TTL although nothing was
// sent. Re-read it; if it is ours, release it (nothing was sent, and its
// durability was not confirmed); if the store cannot be read either,
// remember the lease so that the next call of this client can take it back.
func (e *exec) createFailed(ctx context.Context, rec keystore.Record, err error) error {
	c := e.c
	if errors.Is(err, keystore.ErrAmnesia) {
		// The store detected that it lost records it had acknowledged and
		// wrote nothing (SAFETY rule 13): this operation's record may be
		// one of those lost, so nothing may be sent until an operator has
		// settled what survived and accepted the loss (pagpolar ops
		// recover). No re-read: there is no lease to take back.
		return &OperationError{OperationID: e.s.id, Key: rec.Key, State: "not recorded",
			Err: fmt.Errorf("%w: the store lost records it had acknowledged, so this operation may have been sent before; nothing was sent (run pagpolar ops recover): %w", ErrStoreUnavailable, err)}
	}
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	got, gerr := c.store.Get(gctx, rec.OperationID)
	switch {
	case gerr == nil && got.LeaseOwner == e.owner:
		_ = c.store.Release(gctx, got.OperationID, got.LeaseToken)
	case gerr != nil && !errors.Is(gerr, keystore.ErrNotFound):
		c.orphans.add(rec.OperationID, e.owner)
	}
	return &OperationError{OperationID: e.s.id, Key: rec.Key, State: "not recorded",
		Err: fmt.Errorf("%w: nothing was sent: %w", ErrStoreUnavailable, err)}
}

// existing continues an operation already in the store.
func (e *exec) existing(ctx context.Context, cur keystore.Record) (*settled, error) {
	c, s := e.c, e.s
	match, rekey := c.fingerprintMatch(cur.Fingerprint, s.fpIn)
	if !match {
		return nil, paramsMismatch(s.id, cur)
	}
	if cur.State.Terminal() {
		return c.fromRecord(s.id, cur)
	}
	got, done, err := c.acquire(ctx, cur.OperationID, s.id, e.owner)
	if err != nil {
		return nil, err
	}
	if done {
		return c.fromRecord(s.id, got)
	}
	e.rec, e.leaseAt = got, c.clock.Now()
	e.noteLease(got)
	if rekey {
		e.rec.Fingerprint = s.fp // re-fingerprinted under the current secret at the next write
	}
	defer e.release()
	if res, err, ok := e.applyUnrecorded(ctx); ok {
		return res, err
	}
	var m opMeta
	if err := json.Unmarshal(got.Meta, &m); err != nil {
		return nil, fmt.Errorf("pagpolar: operation %q: corrupt record meta: %w", s.id, err)
	}
	e.meta = m
	e.metaJSON, e.savedMeta = append([]byte(nil), got.Meta...), m
	e.meta.fillStoreTrust(got, c.policy)
	switch {
	case e.rec.State == keystore.StateNotExecuted:
		// Proven not executed: every earlier attempt was unprocessed, so
		// what they learned (snapshot, first send) is void.
		e.meta.resetAttempts()
		return e.firstSend(ctx)
	case e.rec.State == keystore.StatePending && e.rec.Attempts == 0:
		return e.firstSend(ctx)
	case e.rec.State == keystore.StatePending && e.meta.TrustAfter.IsZero():
		// Left by a crash or a worker that lost its lease mid-flight.
		e.meta.TrustAfter = e.rec.LastSentAt.Add(c.policy.trustDelay())
	}
	return e.settle(ctx, true, true)
}

// firstSend starts a series of attempts: the snapshot first where one is
// wanted (rule 11: never a refund or plan change without one), then the
// send. An optional snapshot (a charge's, for want of a clock reference)
// gets one attempt: it only makes a later lookup sharper, and even its
// failed answer usually places the send on the API's clock.
func (e *exec) firstSend(ctx context.Context) (*settled, error) {
	e.rec.FirstSentAt = time.Time{}
	if e.wantsSnapshot() {
		required := needsSnapshot(e.s.kind)
		err := e.c.snapshot(ctx, e.s.kind, &e.meta, e.c.policy.MaxAttempts)
		if ae := (*APIError)(nil); e.s.kind == kindSubscribe && errors.As(err, &ae) && (ae.StatusCode == 404 || ae.StatusCode == 405 || ae.StatusCode == 501) {
			// The API has no subscription lookup (an ASSUMED route): there is
			// nothing to snapshot, and an ambiguous subscribe will end
			// unknown whatever is done here.
			err = nil
		}
		switch {
		case err != nil:
			// Nothing sent: without the snapshot (and without a validated
			// clock) a lost answer could never be told from an earlier
			// effect. The record stays pending with 0 attempts (or not
			// executed) and a later call takes the snapshot again.
			return nil, e.opErr(fmt.Errorf("the lookup before the first send failed, so nothing was sent (call again): %w", err))
		case required && !e.meta.Snapshotted:
			return nil, e.opErr(fmt.Errorf("%w: the pre-send snapshot could not be read whole, so a lost answer could not be told from earlier effects; nothing was sent", ErrIncompleteList))
		}
		if err := e.holdLease(ctx); err != nil {
			return nil, err
		}
	}
	return e.sendLoop(ctx, true)
}

func (e *exec) encodeMeta() []byte {
	if e.metaJSON == nil || !e.meta.equal(e.savedMeta) {
		e.metaJSON = mustJSON(e.meta)
		e.savedMeta = e.meta
		e.savedMeta.Snapshot = append([]string(nil), e.meta.Snapshot...)
		e.savedMeta.Unclear = append([]string(nil), e.meta.Unclear...)
	}
	return e.metaJSON
}

func (e *exec) op(src Source) Operation {
	return Operation{ID: e.s.id, Key: e.rec.Key, Source: src, Attempts: e.rec.Attempts, RequestID: e.lastReq}
}

func (e *exec) opErr(err error) error {
	return &OperationError{OperationID: e.s.id, Key: e.rec.Key, State: string(e.rec.State), Err: err}
}

// save writes the record with the lease token it holds (fencing). The
// write outlives the caller's cancellation (bounded by 10 s): an answer that
// arrived must be recorded even if the caller stopped waiting for it.
func (e *exec) save(ctx context.Context) error {
	if e.rec.Error != "" {
		// The last filter: whatever a reason quotes (a status the API
		// spelled, an event's field) goes without personal data (rule 8).
		e.rec.Error = scrubStored(e.c.sent.redact(e.rec.Error), e.s.fpIn.privateFields())
	}
	if e.rec.State == keystore.StateSucceeded || e.rec.State == keystore.StateFailed {
		e.rec.Meta = mustJSON(e.meta.settled())
	} else {
		e.rec.Meta = e.encodeMeta()
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	got, err := e.c.store.Update(sctx, e.rec)
	if err != nil {
		if errors.Is(err, keystore.ErrLeaseLost) || errors.Is(err, keystore.ErrConflict) {
			return e.opErr(fmt.Errorf("%w: %w", ErrLeaseLost, err))
		}
		return e.opErr(fmt.Errorf("%w: %w", ErrStoreUnavailable, err))
	}
	e.rec = got
	e.storedTerminal = got.State.Terminal()
	return nil
}

// sendLoop sends the request with the operation's key. mark says the
// attempt about to be sent is not yet counted in the record (it is counted
// and saved before sending).
func (e *exec) sendLoop(ctx context.Context, mark bool) (*settled, error) {
	c, p := e.c, e.c.policy
	var bo BackOff
	notProcessed := 0
	for {
		// The token is fetched before the lease check: a slow token source
		// must not run between the fencing check and the send.
		token, terr := c.token(ctx)
		if terr != nil {
			// Nothing sent; every earlier attempt was proven unprocessed.
			return nil, e.notExecuted(ctx, "nothing sent: "+describeErr(terr), terr)
		}
		if err := e.renewIfAged(ctx); err != nil {
			return nil, err
		}
		if mark {
			if err := e.markSend(ctx); err != nil {
				return nil, err
			}
		}
		mark = true
		c.emit(ctx, Event{Kind: EventSaved, OperationID: e.s.id, Key: e.rec.Key, Path: e.s.path, Attempt: e.rec.Attempts})
		if err := ctx.Err(); err != nil {
			// Saved but not sent: the record says "maybe sent" and a lookup
			// settles it; say so rather than pretend nothing happened.
			return nil, e.unknownErr("context ended before the send; the record counts it as a possible send", err)
		}
		r, err := c.sendWith(ctx, token, http.MethodPost, c.url(e.s.path, nil), e.s.body, e.rec.Key)
		a := answer{err: err}
		var apiErr *APIError
		if r != nil {
			e.lastReq = r.requestID
			a.status, a.apiOwn, a.code = r.status, r.apiOwn, r.code
			if r.status >= 300 {
				apiErr = c.apiError(r, e.rec.Key, token, e.s.fpIn.privateFields())
			}
		} else {
			var se *sendError
			a.sent = !errors.As(err, &se) || se.written
		}
		v, cause := classify(a)
		c.emit(ctx, Event{Kind: EventAttempt, OperationID: e.s.id, Key: e.rec.Key, Path: e.s.path, Attempt: e.rec.Attempts, Status: a.status, Cause: cause, Err: err})
		c.emit(ctx, Event{Kind: EventSent, OperationID: e.s.id, Key: e.rec.Key, Path: e.s.path, Attempt: e.rec.Attempts, Status: a.status, Cause: cause})

		switch v {
		case vSuccess:
			c.budget.onAnswer()
			src := SourceResponse
			if r.replayed {
				src = SourceReplay
				c.emit(ctx, Event{Kind: EventReplay, OperationID: e.s.id, Key: e.rec.Key, Status: r.status})
			}
			return e.onSuccess(ctx, r, src)

		case vFailed:
			c.budget.onAnswer()
			return nil, e.apiFailed(ctx, apiErr)

		case vNotExecuted:
			c.budget.onAnswer()
			return nil, e.notExecuted(ctx, storedReason(apiErr)+" ("+misconfigured(apiErr.StatusCode)+")", fmt.Errorf("%w (%s)", apiErr, misconfigured(apiErr.StatusCode)))

		case vRetry:
			notProcessed++
			var last error = apiErr
			if apiErr == nil {
				last = err
			}
			var ra time.Duration
			if r != nil {
				ra = c.retryAfter(r.header)
			}
			if notProcessed >= p.MaxAttempts {
				return nil, e.notExecuted(ctx, fmt.Sprintf("gave up after %d attempts that were not processed; last: %s", notProcessed, describeErr(last)),
					fmt.Errorf("gave up after %d attempts that were not processed: %w", notProcessed, last))
			}
			if !c.budget.takeRetry() {
				c.emit(ctx, Event{Kind: EventBudget, OperationID: e.s.id, Cause: cause})
				return nil, e.notExecuted(ctx, "retry budget exhausted; last: "+describeErr(last), fmt.Errorf("%w (last answer: %w)", ErrBudgetExhausted, last))
			}
			if bo == nil {
				bo = p.NewBackOff()
			}
			w := p.nextWait(bo, ra)
			c.emit(ctx, Event{Kind: EventRetry, OperationID: e.s.id, Key: e.rec.Key, Cause: cause, Wait: w, Attempt: e.rec.Attempts})
			if err := e.renewBefore(ctx, w); err != nil {
				return nil, err
			}
			if err := sleep(ctx, c.clock, w); err != nil {
				return nil, e.notExecuted(ctx, describeErr(err)+" while waiting to resend; last: "+describeErr(last), fmt.Errorf("%w while waiting to resend (last answer: %w)", err, last))
			}
			e.retries++

		default: // vAmbiguousEnd, vAmbiguous, vInProgress
			e.onAmbiguous(v, r)
			e.rec.State = keystore.StateUnknown
			if apiErr != nil {
				e.rec.Error = storedReason(apiErr)
			} else if err != nil {
				e.rec.Error = describeErr(err)
			}
			if serr := e.save(ctx); serr != nil {
				return nil, e.unknownErr(serr.Error(), serr)
			}
			return e.settle(ctx, true, true)
		}
	}
}

// markSend counts the attempt about to be sent and saves it (rule 1: no
// store, no send). The first send of a series fixes its place on the API's
// clock (rule 12).
func (e *exec) markSend(ctx context.Context) error {
	c := e.c
	if sn := e.storeNow(c.clock.Now()); c.maxOpAge > 0 && !e.rec.CreatedAt.IsZero() && !sn.IsZero() && sn.Sub(e.rec.CreatedAt) > c.maxOpAge {
		e.rec.State, e.rec.Error = keystore.StateNotExecuted, "operation older than MaxOperationAge"
		_ = e.save(ctx)
		return e.opErr(ErrOperationTooOld)
	}
	if needsSnapshot(e.s.kind) && !e.meta.Snapshotted {
		// Never reached by the paths above; a refund or plan change sent
		// without a snapshot could later settle on another's effect.
		return e.opErr(errors.New("pagpolar: internal error: refusing to send without a pre-send snapshot"))
	}
	now := c.clock.Now()
	e.rec.Attempts++
	if e.rec.FirstSentAt.IsZero() {
		e.rec.FirstSentAt = now
		e.meta.Floor, _ = c.srvClock.floor(now)
		e.meta.FloorOK = c.srvClock.usable()
	}
	e.rec.LastSentAt = now
	e.rec.State = keystore.StatePending
	// Counted from before the send (a slow dial, a stalled process): the
	// answer resets it; a process that picks the record up after a crash
	// must allow for that.
	e.trustFrom(now, c.policy.trustDelay()+c.policy.AttemptTimeout)
	return e.save(ctx)
}

// onAmbiguous moves the moment a "not found" becomes conclusive.
func (e *exec) onAmbiguous(v verdict, r *response) {
	c, p := e.c, e.c.policy
	now := c.clock.Now()
	switch v {
	case vAmbiguousEnd:
		// We received the API's own answer: the request has ended. Only
		// lookup lag can still hide its effect.
		e.trustFrom(now, p.SettleDelay)
	case vAmbiguous:
		// The request may have reached the server as late as now (a slow
		// dial, an intermediary that queued it), so its in-processing
		// window is counted from now.
		e.trustNoEarlier(now, p.trustDelay())
	case vInProgress:
		// A request with this key is running now (perhaps sent by another
		// host deriving the same key): it ends at most one window from now
		// and began at most one window ago, on the API's clock.
		e.trustNoEarlier(now, p.trustDelay())
		if f, ok := c.srvClock.floor(now); ok {
			from := f.Add(-p.ProcessingWindow - p.WindowMargin)
			if e.meta.SharedFloor.IsZero() || from.Before(e.meta.SharedFloor) {
				e.meta.SharedFloor = from
			}
		} else {
			// No place on the API's clock for the other sender's start:
			// nothing can be excluded by time any more.
			e.meta.Floor = time.Time{}
		}
	}
}

// onSuccess checks a 2xx answer against the operation (SAFETY rule 7, and
// the status tables the lookup uses).
func (e *exec) onSuccess(ctx context.Context, r *response, src Source) (*settled, error) {
	c := e.c
	eff, err := readEffect(effectOf(e.s.kind), r.body)
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
			if e.c.srvClock.check(eff.Created, eff.CreatedRes, e.meta.Floor, e.c.policy.ServerClockTolerance) {
				c.log.WarnContext(ctx, "pagpolar: the API's creation times disagree with its Date headers by more than ServerClockTolerance; effects are no longer excluded by time",
					"created_at", eff.Created, "first_send_at_least", e.meta.Floor)
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

// learnFrom teaches the client this API's spellings from a fresh answer to
// its own request (shapes.go).
func (c *Client) learnFrom(kind string, m opMeta, eff effect) {
	switch kind {
	case kindPix, kindBoleto, kindCreditCard, kindSubscribe:
		if eff.methodSt == wire.Read {
			c.shapes.learnMethod(eff.Method, m.Method)
		}
	}
	if eff.offerSt == wire.Read {
		c.shapes.learnOffer(eff.Offer, m.OfferID)
	}
	if eff.createdSt != wire.Read {
		c.shapes.learnNoTimes()
	}
}

// planChangeAnsweredWithSubscription reads a plan change's 2xx answer that
// is the subscription rather than a plan change: the change is ours when
// the subscription lists it, or shows the new offer.
func (e *exec) planChangeAnsweredWithSubscription(ctx context.Context, r *response, src Source) (*settled, error) {
	sub, _ := readEffect(effSubscription, r.body)
	f := e.c.facts(kindPlanChange, e.meta, nil)
	var lo lookupOutcome
	if sub.planChangesSt == wire.Read {
		claimed, err := e.c.claimedByOthers(ctx, kindPlanChange, readEffects(effPlanChange, sub.planChanges), e.meta, e.s.id)
		if err == nil {
			f.claimed = claimed
			lo = settleFound(readEffects(effPlanChange, sub.planChanges), f, true, "", nil)
		} else {
			lo = lookupOutcome{kind: lookupUnclear, reason: err.Error()}
		}
	} else if sub.offerSt == wire.Read && sub.Offer == e.meta.OfferID {
		lo = lookupOutcome{kind: lookupSucceeded, effect: effect{kind: effPlanChange, SubID: sub.ID, Offer: sub.Offer, FromOffer: e.meta.SnapshotOffer, Status: sub.Status}}
	} else {
		lo = lookupOutcome{kind: lookupUnclear, refs: []string{sub.ID}, reason: "the plan change was answered with the subscription, which is not on the new offer (yet)"}
	}
	switch lo.kind {
	case lookupSucceeded:
		return e.succeed(ctx, lo.effect, src)
	case lookupFailed:
		return nil, e.refused(ctx, lo.effect, lo.reason, src)
	}
	e.meta.Saw2xx = true
	e.meta.noteUnclear(lo.refs)
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
	e.rec.State, e.rec.ResultRef, e.rec.Result, e.rec.Error = keystore.StateSucceeded, ref, mustJSON(value), ""
	if err := e.saveOutcome(ctx); err != nil {
		// The effect exists and is ours; the caller must know. The record is
		// left pending/unknown and a later call settles it by lookup/replay.
		c.log.WarnContext(ctx, "pagpolar: succeeded but could not record it", "op", e.s.id, "err", err)
	}
	c.emit(ctx, Event{Kind: EventSettle, OperationID: e.s.id, Key: e.rec.Key, State: string(keystore.StateSucceeded), Source: src})
	return &settled{rec: e.rec, op: e.op(src), value: value}, nil
}

// resultValue is the typed result of an effect.
func (c *Client) resultValue(kind string, eff effect) any {
	switch kind {
	case kindRefund:
		return eff.refund()
	case kindSubscribe:
		return eff.subscription(&c.shapes)
	case kindPlanChange:
		return eff.planChange()
	}
	return eff.sale(&c.shapes)
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
		e.c.log.WarnContext(ctx, "pagpolar: could not record a failure", "op", e.s.id, "err", serr)
		return e.notRecorded(apiErr, serr)
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
	for i, pause := range []time.Duration{0, 100 * time.Millisecond, 400 * time.Millisecond, time.Second} {
		if i > 0 {
			if serr := sleep(context.WithoutCancel(ctx), e.c.clock, pause); serr != nil {
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
// not write (saveOutcome), if the record is still as it was then: a record
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
		e.c.log.WarnContext(ctx, "pagpolar: could not record not_executed", "op", e.s.id, "err", err)
	}
	e.c.emit(ctx, Event{Kind: EventSettle, OperationID: e.s.id, Key: e.rec.Key, State: string(keystore.StateNotExecuted)})
	return e.opErr(cause)
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

// trustFrom sets the trust moment d after client time now, on both clocks.
func (e *exec) trustFrom(now time.Time, d time.Duration) {
	e.meta.TrustAfter = now.Add(d)
	e.meta.TrustAfterStore = time.Time{}
	if sn := e.storeNow(now); !sn.IsZero() {
		e.meta.TrustAfterStore = sn.Add(d)
	}
}

// trustNoEarlier moves the trust moment to d after now unless it is later
// already.
func (e *exec) trustNoEarlier(now time.Time, d time.Duration) {
	if t := now.Add(d); t.After(e.meta.TrustAfter) {
		e.meta.TrustAfter = t
	}
	if sn := e.storeNow(now); !sn.IsZero() {
		if t := sn.Add(d); t.After(e.meta.TrustAfterStore) {
			e.meta.TrustAfterStore = t
		}
	}
}

// trusted reports whether a "not found" seen now is conclusive: the trust
// moment has passed on this client's clock and on the store's.
func (e *exec) trusted(now time.Time) bool {
	if now.Before(e.meta.TrustAfter) {
		return false
	}
	if e.meta.TrustAfterStore.IsZero() {
		return true
	}
	sn := e.storeNow(now)
	return !sn.IsZero() && !sn.Before(e.meta.TrustAfterStore)
}

// settle settles an ambiguous operation by lookup (SAFETY rule 5). With
// resend, a trusted not-found leads to a resend with the same key; without
// it (Resume), to not_executed. Without wait, it looks once (ResumeAll).
func (e *exec) settle(ctx context.Context, resend, wait bool) (*settled, error) {
	c, p := e.c, e.c.policy
	start := c.clock.Now()
	for {
		if ctx.Err() != nil {
			return nil, e.unknownErr("context ended while settling", ctx.Err())
		}
		if err := e.renewIfAged(ctx); err != nil {
			// The attempt was ambiguous: whatever happened to our lease or
			// store, the outcome is what is unknown.
			return nil, e.unknownErr("could not hold the operation while settling it", err)
		}
		// A lookup observes the API as of when it is sent, not when its
		// answer (or its last page) arrives: only one sent after the trust
		// moment is conclusive.
		conclusive := e.trusted(c.clock.Now())
		lo, err := c.lookup(ctx, e.s.kind, e.s.id, e.meta)
		c.emit(ctx, Event{Kind: EventLookup, OperationID: e.s.id, Key: e.rec.Key, Found: err == nil && lo.kind != lookupNotFound, Err: e.scrubErr(err)})
		if err == nil {
			switch lo.kind {
			case lookupSucceeded:
				return e.succeed(ctx, lo.effect, SourceLookup)
			case lookupFailed:
				if conclusive {
					return nil, e.refused(ctx, lo.effect, "settled by lookup: "+lo.reason, SourceLookup)
				}
				if !wait {
					return nil, e.unknownErr("a refused effect was found, but the request may still commit a success", nil)
				}
				// A refusal is final only once our own request must have
				// ended: until then a success of ours may still appear.
			case lookupUnclear:
				e.meta.noteUnclear(lo.refs) // what was seen outlives this call
				ref := ""
				if len(lo.refs) > 0 {
					ref = lo.refs[0]
				}
				return nil, e.unknownSaved(ctx, lo.reason, nil, ref)
			case lookupUnsupported:
				return nil, e.unknownSaved(ctx, "no reliable lookup exists for this route ("+lo.reason+"); the SDK never resends blind", nil, "")
			case lookupNotFound:
				if conclusive {
					return e.trustedNotFound(ctx, resend)
				}
			}
		}
		if !wait {
			if err != nil {
				return nil, e.unknownErr("the lookup failed", err)
			}
			return nil, e.unknownErr("not found yet, but the original request may still commit", nil)
		}
		now := c.clock.Now()
		if now.Sub(start) >= p.MaxSettleWait {
			reason := fmt.Sprintf("still unsettled after waiting %s", p.MaxSettleWait)
			if err != nil {
				reason += "; the last lookup failed"
			}
			return nil, e.unknownErr(reason, err)
		}
		w := p.LookupInterval
		if err == nil {
			if until := e.meta.TrustAfter.Sub(now); until > 0 && until < w {
				w = until
			}
		}
		c.emit(ctx, Event{Kind: EventWait, OperationID: e.s.id, Key: e.rec.Key, Wait: w, Cause: "settle"})
		if err := e.renewBefore(ctx, w); err != nil {
			return nil, e.unknownErr("could not hold the operation while settling it", err)
		}
		if serr := sleep(ctx, c.clock, w); serr != nil {
			if err != nil {
				return nil, e.unknownErr("context ended while settling; the last lookup failed", errors.Join(serr, err))
			}
			return nil, e.unknownErr("context ended while settling", serr)
		}
	}
}

// trustedNotFound acts on a conclusive "not found": resend with the same
// key (a call), or settle not executed (Resume). An unverifiable 2xx on
// this key means the effect may exist under a shape the lookup cannot
// read: neither is allowed then.
func (e *exec) trustedNotFound(ctx context.Context, resend bool) (*settled, error) {
	c, p := e.c, e.c.policy
	if e.meta.Saw2xx {
		return nil, e.unknownSaved(ctx, "the API answered 2xx in a shape the SDK could not verify, and no matching effect was found; inspect the effect by its reference", nil, "")
	}
	if !resend {
		return e.settleNotExecuted(ctx)
	}
	if !c.budget.takeRetry() {
		c.emit(ctx, Event{Kind: EventBudget, OperationID: e.s.id, Cause: "trusted-not-found"})
		err := fmt.Errorf("%w: lookup proved the request was not executed; call again to send", ErrBudgetExhausted)
		return nil, e.notExecuted(ctx, err.Error(), err)
	}
	if e.retries >= p.MaxAttempts {
		err := fmt.Errorf("lookup proved the request was not executed after %d resends; call again to send", e.retries)
		return nil, e.notExecuted(ctx, err.Error(), err)
	}
	e.retries++
	c.emit(ctx, Event{Kind: EventRetry, OperationID: e.s.id, Key: e.rec.Key, Cause: "trusted-not-found"})
	return e.sendLoop(ctx, true)
}

func (e *exec) settleNotExecuted(ctx context.Context) (*settled, error) {
	e.rec.State, e.rec.Error = keystore.StateNotExecuted, "settled: lookup proved nothing was executed"
	if err := e.saveOutcome(ctx); err != nil {
		return nil, err
	}
	e.c.emit(ctx, Event{Kind: EventSettle, OperationID: e.s.id, Key: e.rec.Key, State: string(keystore.StateNotExecuted), Source: SourceLookup})
	return &settled{rec: e.rec, op: e.op(SourceLookup)}, nil
}

// fromRecord answers from a settled record without sending anything.
func (c *Client) fromRecord(opID string, rec keystore.Record) (*settled, error) {
	op := Operation{ID: opID, Key: rec.Key, Source: SourceLocalRecord, Attempts: rec.Attempts}
	switch rec.State {
	case keystore.StateSucceeded:
		return &settled{rec: rec, op: op}, nil
	case keystore.StateFailed:
		var f storedFailure
		_ = json.Unmarshal(rec.Result, &f)
		err := &OperationError{OperationID: opID, Key: rec.Key, State: string(rec.State)}
		switch {
		case f.Why == "collision" || (f.Why == "" && f.Status == 0):
			err.Err = fmt.Errorf("%w: %s", ErrParamsMismatch, rec.Error)
		case f.Why == "declined":
			err.Err = fmt.Errorf("%w: %s", ErrDeclined, rec.Error)
		case f.Why == "refused":
			err.Err = fmt.Errorf("%w: %s", ErrRefused, rec.Error)
		default:
			err.Err = &APIError{StatusCode: f.Status, Code: f.Code, Message: f.Message, RequestID: f.RequestID, Key: rec.Key, FromAPI: true}
		}
		return nil, err
	}
	return nil, fmt.Errorf("pagpolar: operation %q is %s", opID, rec.State)
}
