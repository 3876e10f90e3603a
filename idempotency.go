package pagpolar

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/pagpolar/pagpolar-go/keystore"
)

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

// storeID scopes operation IDs by credential inside a shared store, as the
// API scopes keys by credential.
func (c *Client) storeID(opID string) string { return c.credentialID + "/" + opID }

// opMeta is what the engine keeps in Record.Meta: enough to look the
// operation's effect up after a crash, and nothing personal.
type opMeta struct {
	Path              string    `json:"path"`
	ExternalReference string    `json:"external_reference,omitempty"`
	OfferID           string    `json:"offer_id,omitempty"`
	Method            string    `json:"method,omitempty"`
	Amount            int64     `json:"amount,omitempty"`
	SaleID            string    `json:"sale_id,omitempty"`
	SubscriptionID    string    `json:"subscription_id,omitempty"`
	Snapshot          []string  `json:"snapshot,omitempty"` // effect IDs that existed before the first send (refunds, plan changes)
	Snapshotted       bool      `json:"snapshotted,omitempty"`
	TrustAfter        time.Time `json:"trust_after"` // a "not found" lookup is conclusive after this time
	SharedFrom        time.Time `json:"shared_from"` // a 409 showed another sender of our key; its effects since then are ours
}

// opSpec is one call's operation.
type opSpec struct {
	kind string
	id   string // caller-facing operation ID
	path string
	body []byte
	fp   string
	meta opMeta
}

// fingerprint returns "v1:<sha256 of public fields>[:<hmac of private fields>]".
// Only the public part is compared when the stored or the new fingerprint has
// no private part, so enabling the secret later does not break old records.
func (c *Client) fingerprint(public, private []string) string {
	h := sha256.New()
	for _, f := range public {
		fmt.Fprintf(h, "%d:%s|", len(f), f)
	}
	fp := "v1:" + hex.EncodeToString(h.Sum(nil))
	if len(c.fpSecret) > 0 {
		m := hmac.New(sha256.New, c.fpSecret)
		for _, f := range private {
			fmt.Fprintf(m, "%d:%s|", len(f), f)
		}
		fp += ":" + hex.EncodeToString(m.Sum(nil))
	}
	return fp
}

func sameFingerprint(a, b string) bool {
	if a == b {
		return true
	}
	pa, pb := a, b
	if len(pa) > 67 {
		pa = pa[:67]
	}
	if len(pb) > 67 {
		pb = pb[:67]
	}
	// One side lacks the private part: compare the public parts only.
	if (len(a) == 67 || len(b) == 67) && pa == pb {
		return true
	}
	return false
}

// classification of one attempt's answer (SAFETY rules 3–5).
type verdict int

const (
	vSuccess      verdict = iota // 2xx
	vFailed                      // definite 4xx: settled failed
	vNotExecuted                 // definite, nothing processed, not worth resending now (401/403)
	vRetry                       // definitely not processed: resend same key after backoff (429, API 503, dial)
	vAmbiguousEnd                // ambiguous, but the original has ended (we got its 5xx answer)
	vAmbiguous                   // ambiguous and the original may still be running (timeout, lost connection)
	vInProgress                  // 409: a request with this key is running right now
)

func classify(r *response, err error, fromAPI bool) (verdict, string) {
	if err != nil {
		var se *sendError
		if errors.As(err, &se) && !se.written {
			return vRetry, "not-sent"
		}
		return vAmbiguous, "transport"
	}
	switch s := r.status; {
	case s >= 200 && s < 300:
		return vSuccess, ""
	case s == http.StatusConflict:
		return vInProgress, "409"
	case s == http.StatusTooManyRequests:
		return vRetry, "429"
	case s == http.StatusServiceUnavailable && fromAPI:
		return vRetry, "503"
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		return vNotExecuted, fmt.Sprint(s)
	case s >= 400 && s < 500:
		return vFailed, fmt.Sprint(s)
	case s >= 500 && fromAPI:
		// The API's own error body: the request it answered has ended.
		return vAmbiguousEnd, fmt.Sprint(s)
	default:
		// An intermediary's 502/503/504 page (the API may still be working
		// on the request behind it), or a 1xx/3xx oddity.
		return vAmbiguous, fmt.Sprint(s)
	}
}

// lookupOutcome is what a settle lookup found.
type lookupOutcome struct {
	kind   lookupKind
	ref    string
	value  any // the typed result (Sale, Refund, ...) when found
	reason string
}

type lookupKind int

const (
	lookupNotFound lookupKind = iota
	lookupSucceeded
	lookupFailed
	lookupUnclear     // an effect exists in a status we do not understand
	lookupUnsupported // no reliable lookup for this route
)

// settled is what run returns: the final record and how it was obtained.
type settled struct {
	rec   keystore.Record
	op    Operation
	value any // the typed result when this call obtained it (nil: decode rec.Result)
}

// run executes one operation under SAFETY.md. It returns the settled record
// (State succeeded, with Result) or an error:
//   - *ValidationError / ErrParamsMismatch (nothing sent),
//   - ErrStoreUnavailable (nothing sent),
//   - *APIError for definite failures (declined, 4xx),
//   - *OutcomeUnknownError (record left unknown),
//   - ErrInProgress / ErrLeaseLost (another worker holds the operation),
//   - ErrBudgetExhausted, ErrRateLimited, ErrUnavailable (not executed).
func (c *Client) run(ctx context.Context, s *opSpec) (*settled, error) {
	p := c.policy
	now := c.clock.Now()
	meta := s.meta
	meta.Path = s.path
	needSnapshot := s.kind == kindRefund || s.kind == kindPlanChange
	rec := keystore.Record{
		OperationID: c.storeID(s.id),
		Key:         c.idempotencyKey(s.id),
		Kind:        s.kind,
		Fingerprint: s.fp,
		State:       keystore.StatePending,
	}
	if !needSnapshot {
		// Saved as "about to be sent": a crash before the send leaves an
		// ambiguous-looking record that a lookup settles; it never hides a send.
		rec.Attempts, rec.FirstSentAt, rec.LastSentAt = 1, now, now
		meta.TrustAfter = now.Add(p.ProcessingWindow + p.WindowMargin + p.SettleDelay)
	}

	e := &exec{c: c, s: s, meta: meta, owner: c.callOwner()}
	rec.Meta = e.encodeMeta()
	created, err := c.store.Create(ctx, rec, e.owner, p.LeaseTTL)
	fresh := false
	switch {
	case err == nil:
		fresh = true
		e.rec = created
		e.leaseAt = now
	case errors.Is(err, keystore.ErrExists):
		if !sameFingerprint(created.Fingerprint, s.fp) {
			return nil, &OperationError{OperationID: s.id, Key: created.Key, State: string(created.State),
				Err: fmt.Errorf("%w: operation %q is recorded with other params; use a new operation ID for a different charge", ErrParamsMismatch, s.id)}
		}
		if created.State.Terminal() {
			return c.fromRecord(s.id, created)
		}
		got, done, err := c.acquire(ctx, created.OperationID, s.id, e.owner)
		if err != nil {
			return nil, err
		}
		if done {
			return c.fromRecord(s.id, got)
		}
		e.rec = got
		e.leaseAt = c.clock.Now()
		if err := json.Unmarshal(got.Meta, &e.meta); err != nil {
			return nil, fmt.Errorf("pagpolar: operation %q: corrupt record meta: %w", s.id, err)
		}
	default:
		return nil, &OperationError{OperationID: s.id, Key: rec.Key, State: "not recorded",
			Err: fmt.Errorf("%w: nothing was sent: %w", ErrStoreUnavailable, err)}
	}
	defer e.release()

	if fresh && needSnapshot {
		if err := e.snapshot(ctx); err != nil {
			return nil, err
		}
		return e.sendLoop(ctx, true)
	}
	if fresh {
		return e.sendLoop(ctx, false)
	}
	switch e.rec.State {
	case keystore.StateNotExecuted:
		return e.sendLoop(ctx, true)
	case keystore.StatePending:
		if e.rec.Attempts == 0 {
			if needSnapshot && !e.meta.Snapshotted {
				if err := e.snapshot(ctx); err != nil {
					return nil, err
				}
			}
			return e.sendLoop(ctx, true)
		}
		// Left by a crash or a worker that lost its lease mid-flight.
		if e.meta.TrustAfter.IsZero() {
			e.meta.TrustAfter = e.rec.LastSentAt.Add(p.ProcessingWindow + p.WindowMargin + p.SettleDelay)
		}
		return e.settle(ctx, true, true)
	default: // unknown
		return e.settle(ctx, true, true)
	}
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
	saw2xx  bool      // an unverifiable 2xx answered our key: never conclude "not executed"
	leaseAt time.Time // when this call last obtained or extended its lease (client clock)

	// metaJSON is e.meta as last written; savedMeta the value it encodes.
	// Most saves do not change the meta, and re-encoding it is a measurable
	// share of a charge's cost.
	metaJSON  []byte
	savedMeta opMeta
}

func (m opMeta) equal(o opMeta) bool {
	if m.Path != o.Path || m.ExternalReference != o.ExternalReference || m.OfferID != o.OfferID || m.Method != o.Method ||
		m.Amount != o.Amount || m.SaleID != o.SaleID || m.SubscriptionID != o.SubscriptionID || m.Snapshotted != o.Snapshotted ||
		!m.TrustAfter.Equal(o.TrustAfter) || !m.SharedFrom.Equal(o.SharedFrom) || len(m.Snapshot) != len(o.Snapshot) {
		return false
	}
	for i := range m.Snapshot {
		if m.Snapshot[i] != o.Snapshot[i] {
			return false
		}
	}
	return true
}

func (e *exec) encodeMeta() []byte {
	if e.metaJSON == nil || !e.meta.equal(e.savedMeta) {
		e.metaJSON = mustJSON(e.meta)
		e.savedMeta = e.meta
		e.savedMeta.Snapshot = append([]string(nil), e.meta.Snapshot...)
	}
	return e.metaJSON
}

// release gives the lease up when the call ends. A terminal record needs no
// release: a worker waiting on it reads the outcome from the record even
// while the lease is held, so the write is saved (it is one of three per
// charge on a durable store).
func (e *exec) release() {
	if e.rec.State.Terminal() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = e.c.store.Release(ctx, e.rec.OperationID, e.rec.LeaseToken)
}

func (e *exec) op(src Source) Operation {
	return Operation{ID: e.s.id, Key: e.rec.Key, Source: src, Attempts: e.rec.Attempts, RequestID: e.lastReq}
}

// save writes the record with the lease token it holds (fencing). The
// write outlives the caller's cancellation (bounded by 10 s): an answer that
// arrived must be recorded even if the caller stopped waiting for it.
func (e *exec) save(ctx context.Context) error {
	e.rec.Meta = e.encodeMeta()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	got, err := e.c.store.Update(sctx, e.rec)
	if err != nil {
		if errors.Is(err, keystore.ErrLeaseLost) || errors.Is(err, keystore.ErrConflict) {
			return &OperationError{OperationID: e.s.id, Key: e.rec.Key, State: string(e.rec.State), Err: fmt.Errorf("%w: %w", ErrLeaseLost, err)}
		}
		return &OperationError{OperationID: e.s.id, Key: e.rec.Key, State: string(e.rec.State), Err: fmt.Errorf("%w: %w", ErrStoreUnavailable, err)}
	}
	e.rec = got
	return nil
}

// renewIfAged extends the lease once a quarter of its TTL has passed since
// this call last obtained it. A younger lease cannot have expired (that
// would take a store clock running far ahead of ours), so the store write is
// skipped; before a resend the fencing check itself is the save's Update,
// which succeeds only with the current, unexpired lease (SAFETY rule 9).
func (e *exec) renewIfAged(ctx context.Context) error {
	if !e.leaseAt.IsZero() && e.c.clock.Now().Sub(e.leaseAt) < e.c.policy.LeaseTTL/4 {
		return nil
	}
	return e.renew(ctx)
}

// renew checks and extends the lease (SAFETY rule 9).
func (e *exec) renew(ctx context.Context) error {
	now := e.c.clock.Now()
	got, err := e.c.store.Renew(ctx, e.rec.OperationID, e.rec.LeaseToken, e.c.policy.LeaseTTL)
	if err != nil {
		if errors.Is(err, keystore.ErrLeaseLost) {
			return &OperationError{OperationID: e.s.id, Key: e.rec.Key, State: string(e.rec.State), Err: fmt.Errorf("%w: another worker took the operation over; stopped before sending", ErrLeaseLost)}
		}
		return &OperationError{OperationID: e.s.id, Key: e.rec.Key, State: string(e.rec.State), Err: fmt.Errorf("%w: %w", ErrStoreUnavailable, err)}
	}
	e.rec.LeaseExpiresAt = got.LeaseExpiresAt
	e.rec.Version = got.Version
	e.leaseAt = now
	return nil
}

func (e *exec) snapshot(ctx context.Context) error {
	ids, err := e.c.snapshot(ctx, e.s.kind, e.meta)
	if err != nil {
		// Nothing sent yet; the record stays pending with 0 attempts and a
		// later call retries the snapshot.
		return &OperationError{OperationID: e.s.id, Key: e.rec.Key, State: string(e.rec.State), Err: fmt.Errorf("snapshot before first send: %w", err)}
	}
	e.meta.Snapshot, e.meta.Snapshotted = ids, true
	return nil
}

// sendLoop sends the request with the operation's key. markFirst says the
// attempt about to be sent is not yet counted in the record (it is counted
// and saved before sending).
func (e *exec) sendLoop(ctx context.Context, markFirst bool) (*settled, error) {
	c, p := e.c, e.c.policy
	bo := p.NewBackOff()
	notProcessed := 0
	mark := markFirst
	for {
		// The token is fetched before the lease check: a slow token source
		// must not run between the fencing check and the send.
		token, terr := c.tokens.Token(ctx)
		if terr != nil {
			// Nothing sent; every earlier attempt was proven unprocessed.
			return nil, e.notExecuted(ctx, fmt.Errorf("token source: %w", terr))
		}
		if !mark {
			// First attempt, counted at Create: the token fetch may have
			// been slow enough to age the lease.
			if err := e.renewIfAged(ctx); err != nil {
				return nil, err
			}
		}
		if mark {
			if c.maxOpAge > 0 && !e.rec.CreatedAt.IsZero() && c.clock.Now().Sub(e.rec.CreatedAt) > c.maxOpAge {
				e.rec.State, e.rec.Error = keystore.StateNotExecuted, "operation older than MaxOperationAge"
				_ = e.save(ctx)
				return nil, &OperationError{OperationID: e.s.id, Key: e.rec.Key, State: string(e.rec.State), Err: ErrOperationTooOld}
			}
			if err := e.renewIfAged(ctx); err != nil {
				return nil, err
			}
			now := c.clock.Now()
			e.rec.Attempts++
			if e.rec.FirstSentAt.IsZero() {
				e.rec.FirstSentAt = now
			}
			e.rec.LastSentAt = now
			e.rec.State = keystore.StatePending
			e.meta.TrustAfter = now.Add(p.ProcessingWindow + p.WindowMargin + p.SettleDelay)
			if err := e.save(ctx); err != nil {
				return nil, err // rule 1: no store, no send
			}
		}
		mark = true
		c.emit(ctx, Event{Kind: EventSaved, OperationID: e.s.id, Key: e.rec.Key, Path: e.s.path, Attempt: e.rec.Attempts})
		if err := ctx.Err(); err != nil {
			// Saved but not sent: the record says "maybe sent" and a lookup
			// settles it; say so rather than pretend nothing happened.
			return nil, e.unknownErr("context ended before the send; the record counts it as a possible send", err)
		}
		r, err := c.sendWith(ctx, token, http.MethodPost, e.s.path, nil, e.s.body, e.rec.Key)
		var apiErr *APIError
		fromAPI := false
		if r != nil {
			e.lastReq = r.requestID
			if r.status >= 300 {
				apiErr = c.apiError(ctx, r, e.rec.Key)
				fromAPI = apiErr.FromAPI
			}
		}
		v, cause := classify(r, err, fromAPI)
		status := 0
		if r != nil {
			status = r.status
		}
		c.emit(ctx, Event{Kind: EventAttempt, OperationID: e.s.id, Key: e.rec.Key, Path: e.s.path, Attempt: e.rec.Attempts, Status: status, Cause: cause, Err: err})
		c.emit(ctx, Event{Kind: EventSent, OperationID: e.s.id, Key: e.rec.Key, Path: e.s.path, Attempt: e.rec.Attempts, Status: status, Cause: cause})

		switch v {
		case vSuccess:
			c.budget.onAnswer()
			src := SourceResponse
			if r.replayed {
				src = SourceReplay
				c.emit(ctx, Event{Kind: EventReplay, OperationID: e.s.id, Key: e.rec.Key, Status: r.status})
			}
			ref, result, verr := c.accept(e.s.kind, e.meta, r.body)
			if verr == nil {
				return e.succeed(ctx, ref, result, src)
			}
			if verr.collision && r.replayed {
				// Rule 7: the server replayed another request's first answer
				// for our key. Nothing of ours was created (a replay creates
				// nothing); the key belongs to another operation.
				e.rec.State, e.rec.Error = keystore.StateFailed, "key collision: "+oneLine(verr.Error())
				_ = e.save(ctx)
				return nil, &OperationError{OperationID: e.s.id, Key: e.rec.Key, State: string(e.rec.State), Err: fmt.Errorf("%w: %w", ErrParamsMismatch, verr)}
			}
			// A 2xx we cannot verify is not a success, and not a failure
			// either: the effect may well exist. Settle it by lookup.
			e.saw2xx = true
			e.meta.TrustAfter = c.clock.Now().Add(p.SettleDelay)
			e.rec.State, e.rec.Error = keystore.StateUnknown, "unverifiable 2xx: "+oneLine(verr.Error())
			if serr := e.save(ctx); serr != nil {
				return nil, e.unknownErr(serr.Error(), serr)
			}
			c.log.WarnContext(ctx, "pagpolar: 2xx answer could not be verified; settling by lookup", "op", e.s.id, "reason", verr.Error())
			return e.settle(ctx, true, true)

		case vFailed:
			c.budget.onAnswer()
			// The API's free-text message is not stored: it could echo
			// personal data (rule 8). Status, code and request ID are enough.
			e.rec.State, e.rec.Error = keystore.StateFailed, storedReason(apiErr)
			e.rec.Result = mustJSON(storedFailure{Status: apiErr.StatusCode, Code: apiErr.Code, RequestID: apiErr.RequestID})
			serr := e.save(ctx)
			c.emit(ctx, Event{Kind: EventSettle, OperationID: e.s.id, State: string(e.rec.State), Source: SourceResponse, Status: status})
			if serr != nil {
				c.log.WarnContext(ctx, "pagpolar: could not record a failure", "op", e.s.id, "err", serr)
			}
			return nil, &OperationError{OperationID: e.s.id, Key: e.rec.Key, State: string(keystore.StateFailed), Err: apiErr}

		case vNotExecuted:
			e.rec.State, e.rec.Error = keystore.StateNotExecuted, storedReason(apiErr)
			_ = e.save(ctx)
			return nil, &OperationError{OperationID: e.s.id, Key: e.rec.Key, State: string(e.rec.State), Err: apiErr}

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
				return nil, e.notExecuted(ctx, fmt.Errorf("gave up after %d attempts that were not processed: %w", notProcessed, last))
			}
			if !c.budget.takeRetry() {
				c.emit(ctx, Event{Kind: EventBudget, OperationID: e.s.id, Cause: cause})
				return nil, e.notExecuted(ctx, fmt.Errorf("%w (last answer: %w)", ErrBudgetExhausted, last))
			}
			w := p.nextWait(bo, ra)
			c.emit(ctx, Event{Kind: EventRetry, OperationID: e.s.id, Key: e.rec.Key, Cause: cause, Wait: w, Attempt: e.rec.Attempts})
			if err := sleep(ctx, c.clock, w); err != nil {
				return nil, e.notExecuted(ctx, fmt.Errorf("%w while waiting to resend (last answer: %w)", err, last))
			}
			e.retries++

		case vAmbiguousEnd, vAmbiguous, vInProgress:
			now := c.clock.Now()
			switch v {
			case vAmbiguousEnd:
				// We received the original's answer: it has ended. Only lookup
				// lag can still hide its effect.
				e.meta.TrustAfter = now.Add(p.SettleDelay)
			case vAmbiguous:
				// The request may have reached the server as late as now (a
				// slow dial, an intermediary that queued it), so its
				// in-processing window is counted from now.
				if t := now.Add(p.ProcessingWindow + p.WindowMargin + p.SettleDelay); t.After(e.meta.TrustAfter) {
					e.meta.TrustAfter = t
				}
			case vInProgress:
				// A request with this key is running now; it ends at most one
				// processing window from now, and began at most one window ago
				// (perhaps sent by another host deriving the same key).
				if t := now.Add(p.ProcessingWindow + p.WindowMargin + p.SettleDelay); t.After(e.meta.TrustAfter) {
					e.meta.TrustAfter = t
				}
				if from := now.Add(-p.ProcessingWindow - p.WindowMargin); e.meta.SharedFrom.IsZero() || from.Before(e.meta.SharedFrom) {
					e.meta.SharedFrom = from
				}
			}
			e.rec.State = keystore.StateUnknown
			if apiErr != nil {
				e.rec.Error = storedReason(apiErr)
			} else if err != nil {
				e.rec.Error = oneLine(err.Error())
			}
			if serr := e.save(ctx); serr != nil {
				return nil, e.unknownErr(serr.Error(), serr)
			}
			return e.settle(ctx, true, true)
		}
	}
}

// storedFailure is the Result of a failed record.
type storedFailure struct {
	Status    int    `json:"status"`
	Code      string `json:"code,omitempty"`
	Message   string `json:"message,omitempty"` // only messages the SDK wrote itself
	RequestID string `json:"request_id,omitempty"`
}

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

func (e *exec) succeed(ctx context.Context, ref string, value any, src Source) (*settled, error) {
	e.rec.State, e.rec.ResultRef, e.rec.Result, e.rec.Error = keystore.StateSucceeded, ref, mustJSON(value), ""
	if err := e.save(ctx); err != nil {
		// The effect exists and is ours; the caller must know. The record is
		// left pending/unknown and a later call settles it by lookup/replay.
		e.c.log.WarnContext(ctx, "pagpolar: succeeded but could not record it", "op", e.s.id, "err", err)
	}
	e.c.emit(ctx, Event{Kind: EventSettle, OperationID: e.s.id, Key: e.rec.Key, State: string(keystore.StateSucceeded), Source: src})
	return &settled{rec: e.rec, op: e.op(src), value: value}, nil
}

func (e *exec) notExecuted(ctx context.Context, cause error) error {
	e.rec.State, e.rec.Error = keystore.StateNotExecuted, oneLine(cause.Error())
	if err := e.save(ctx); err != nil {
		e.c.log.WarnContext(ctx, "pagpolar: could not record not_executed", "op", e.s.id, "err", err)
	}
	e.c.emit(ctx, Event{Kind: EventSettle, OperationID: e.s.id, Key: e.rec.Key, State: string(keystore.StateNotExecuted)})
	return &OperationError{OperationID: e.s.id, Key: e.rec.Key, State: string(keystore.StateNotExecuted), Err: cause}
}

func (e *exec) unknownErr(reason string, err error) error {
	u := &OutcomeUnknownError{OperationID: e.s.id, Key: e.rec.Key, Reason: reason, Err: err}
	u.SettleAfter = e.meta.TrustAfter
	return u
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
		lo, err := c.lookup(ctx, e.s.kind, e.meta, e.rec)
		c.emit(ctx, Event{Kind: EventLookup, OperationID: e.s.id, Key: e.rec.Key, Found: err == nil && lo.kind != lookupNotFound, Err: err})
		if err == nil {
			switch lo.kind {
			case lookupSucceeded:
				return e.succeed(ctx, lo.ref, lo.value, SourceLookup)
			case lookupFailed:
				if c.clock.Now().Before(e.meta.TrustAfter) && wait {
					// A decline is final only once our own request must have
					// ended: until then a success of ours may still appear.
					break
				}
				e.rec.State, e.rec.ResultRef, e.rec.Error = keystore.StateFailed, lo.ref, lo.reason
				e.rec.Result = mustJSON(storedFailure{Status: http.StatusPaymentRequired, Code: "declined", Message: lo.reason})
				_ = e.save(ctx)
				c.emit(ctx, Event{Kind: EventSettle, OperationID: e.s.id, State: string(keystore.StateFailed), Source: SourceLookup})
				return nil, &OperationError{OperationID: e.s.id, Key: e.rec.Key, State: string(keystore.StateFailed),
					Err: fmt.Errorf("%w: settled by lookup: %s", ErrDeclined, lo.reason)}
			case lookupUnclear:
				u := e.unknownErr(lo.reason, nil).(*OutcomeUnknownError)
				u.Ref = lo.ref
				return nil, u
			case lookupUnsupported:
				return nil, e.unknownErr("no reliable lookup exists for this route ("+lo.reason+"); the SDK never resends blind", nil)
			case lookupNotFound:
				now := c.clock.Now()
				if !now.Before(e.meta.TrustAfter) {
					if e.saw2xx {
						return nil, e.unknownErr("the API answered 2xx in a shape the SDK could not verify, and no matching effect was found; inspect the sale by its reference", nil)
					}
					if !resend {
						return e.settleNotExecuted(ctx)
					}
					if !c.budget.takeRetry() {
						c.emit(ctx, Event{Kind: EventBudget, OperationID: e.s.id, Cause: "trusted-not-found"})
						return nil, e.notExecuted(ctx, fmt.Errorf("%w: lookup proved the request was not executed; call again to send", ErrBudgetExhausted))
					}
					if e.retries >= p.MaxAttempts {
						return nil, e.notExecuted(ctx, fmt.Errorf("lookup proved the request was not executed after %d resends; call again to send", e.retries))
					}
					e.retries++
					c.emit(ctx, Event{Kind: EventRetry, OperationID: e.s.id, Key: e.rec.Key, Cause: "trusted-not-found"})
					return e.sendLoop(ctx, true)
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
		if serr := sleep(ctx, c.clock, w); serr != nil {
			if err != nil {
				return nil, e.unknownErr("context ended while settling; the last lookup failed", errors.Join(serr, err))
			}
			return nil, e.unknownErr("context ended while settling", serr)
		}
	}
}

func (e *exec) settleNotExecuted(ctx context.Context) (*settled, error) {
	e.rec.State, e.rec.Error = keystore.StateNotExecuted, "settled: lookup proved nothing was executed"
	if err := e.save(ctx); err != nil {
		return nil, err
	}
	e.c.emit(ctx, Event{Kind: EventSettle, OperationID: e.s.id, Key: e.rec.Key, State: string(keystore.StateNotExecuted), Source: SourceLookup})
	return &settled{rec: e.rec, op: e.op(SourceLookup)}, nil
}

// acquire takes the lease of an existing operation, waiting while another
// worker holds it. done reports that the operation reached a terminal state
// meanwhile (rec is then that state).
func (c *Client) acquire(ctx context.Context, storeID, opID, owner string) (rec keystore.Record, done bool, err error) {
	wait := c.policy.LeaseWaitInterval
	for {
		rec, err = c.store.Acquire(ctx, storeID, owner, c.policy.LeaseTTL)
		if err == nil {
			if rec.State.Terminal() {
				_ = c.store.Release(ctx, storeID, rec.LeaseToken)
				return rec, true, nil
			}
			return rec, false, nil
		}
		if !errors.Is(err, keystore.ErrLeaseHeld) {
			if ctx.Err() != nil {
				return rec, false, &OperationError{OperationID: opID, Key: rec.Key, State: string(rec.State), Err: fmt.Errorf("%w: %w", ErrInProgress, ctx.Err())}
			}
			return rec, false, &OperationError{OperationID: opID, State: "unreadable", Err: fmt.Errorf("%w: %w", ErrStoreUnavailable, err)}
		}
		if rec.State.Terminal() {
			return rec, true, nil
		}
		if serr := sleep(ctx, c.clock, wait); serr != nil {
			return rec, false, &OperationError{OperationID: opID, Key: rec.Key, State: string(rec.State), Err: fmt.Errorf("%w: %w", ErrInProgress, serr)}
		}
		if wait < 500*time.Millisecond {
			wait *= 2
		}
	}
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
		if f.Status == 0 {
			// Failed without an API answer (rule 7 collision).
			return nil, &OperationError{OperationID: opID, Key: rec.Key, State: string(rec.State), Err: fmt.Errorf("%w: %s", ErrParamsMismatch, rec.Error)}
		}
		return nil, &OperationError{OperationID: opID, Key: rec.Key, State: string(rec.State),
			Err: &APIError{StatusCode: f.Status, Code: f.Code, Message: f.Message, RequestID: f.RequestID, Key: rec.Key, FromAPI: true}}
	}
	return nil, fmt.Errorf("pagpolar: operation %q is %s", opID, rec.State)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("pagpolar: marshal %T: %v", v, err)) // only our own plain structs reach here
	}
	return b
}
