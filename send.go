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

// Sending: sendLoop sends the operation's request under its key and acts
// on the classification of each answer (classify.go; SAFETY rules 2–4),
// counting every attempt in the record before it goes out (markSend).

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
			a.keyUsed = r.status >= 300 && namesKey(r.code, r.message)
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

		default: // vAmbiguousEnd, vAmbiguous, vInProgress, vKeyUsed
			if v == vKeyUsed {
				// The API's answer under this key may have been a 2xx it
				// no longer gives: never "not found", never resent.
				e.meta.Saw2xx = true
			}
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
		if err := e.save(ctx); err != nil {
			// Not recorded: another worker may take the operation and
			// send it, so this call cannot say it was not executed.
			e.rec.State = e.stored
			return e.opErr(e.unknownErr("the operation is older than MaxOperationAge and was not sent, but the key store did not record that", fmt.Errorf("%w (recording it: %w)", ErrOperationTooOld, opCause(err))))
		}
		return e.opErr(notExecutedError{ErrOperationTooOld})
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
		e.meta.Floor, e.meta.FloorOK = c.srvClock.usableFloor(now)
		e.floorMine = e.meta.FloorOK
	}
	e.rec.LastSentAt = now
	e.rec.State = keystore.StatePending
	// Counted from before the send (a slow dial, a stalled process): the
	// answer resets it; a process that picks the record up after a crash
	// must allow for that.
	e.trustFrom(now, c.policy.trustDelay()+c.policy.AttemptTimeout)
	return e.save(ctx)
}

// sharedAnyTime is the SharedFloor of a key shared with a sender whose
// start cannot be placed on the API's clock: it marks the key shared (the
// snapshot proves nothing) and, with Floor cleared, excludes nothing.
var sharedAnyTime = time.Unix(0, 0).UTC()

// inProgressFrom is the earliest the other sender of a key answered 409
// can have started, on the API's clock: one window (back) before the
// client's bound of the API's clock now (floor, ok), if the 409 is the
// documented one. Without a bound, or for a 409 with another body (a
// server may answer so to a key that finished long ago, its effect older
// than any window), it is sharedAnyTime.
func inProgressFrom(floor time.Time, ok, documented bool, back time.Duration) time.Time {
	if !ok || !documented {
		return sharedAnyTime
	}
	return floor.Add(-back)
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
	case vKeyUsed:
		// As vAmbiguous (a 4xx naming the key may not be the API's own
		// answer either: it ends nothing); and the key was used before, by
		// this client or by another that derived it, at a time nothing
		// tells: the key is shared, and nothing is excluded by time.
		e.trustNoEarlier(now, p.trustDelay())
		e.meta.Floor, e.meta.SharedFloor = time.Time{}, sharedAnyTime
	case vInProgress:
		// A request with this key is running now (perhaps sent by another
		// host deriving the same key): it ends at most one window from now
		// and began at most one window ago, on the API's clock.
		e.trustNoEarlier(now, p.trustDelay())
		f, ok := c.srvClock.floor(now)
		from := inProgressFrom(f, ok, r != nil && r.message == wire.MsgInProgress, p.ProcessingWindow+p.WindowMargin)
		if from.Equal(sharedAnyTime) {
			e.meta.Floor = time.Time{} // nothing can be excluded by time any more
		}
		if e.meta.SharedFloor.IsZero() || from.Before(e.meta.SharedFloor) {
			e.meta.SharedFloor = from
		}
	}
}

// requestHeader is the header of one request: JSON in (with a body) and
// out, no cache for a lookup (GET: a lookup must read the API's current
// state; a cache in the way, such as a CDN rule caching GETs, must
// revalidate, or it would answer "not found" from before the charge, and
// one that does not is caught by its Age header: servedByCache), the
// client's User-Agent, the token and the idempotency key. It is built in
// one piece (one map, one array of values owned by this request alone),
// the same header that setting each field in turn would give.
func (c *Client) requestHeader(method, token, key string, body bool) http.Header {
	h := make(http.Header, 7)
	vals := make([]string, 0, 7)
	put := func(k, v string) {
		vals = append(vals, v)
		h[k] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	if body {
		put("Content-Type", "application/json")
	}
	put("Accept", "application/json")
	if method == http.MethodGet {
		put("Cache-Control", "no-cache")
		put("Pragma", "no-cache")
	}
	put("User-Agent", c.userAgent)
	put(wire.HeaderAuthorization, "Bearer "+token)
	if key != "" {
		put(wire.HeaderIdempotencyKey, key)
	}
	return h
}
