package pagpolar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// Settling: an ambiguous attempt is looked up (lookup.go) and what is
// found attributed (attribute.go) before anything is sent again; a
// not-found counts only once it is trusted (SAFETY rules 5, 11, 12).

// trustFrom sets the trust moment d after client time now, on both clocks.
func (e *exec) trustFrom(now time.Time, d time.Duration) {
	e.meta.TrustAfter = now.Add(d)
	e.meta.TrustAfterStore = time.Time{}
	if sn := e.storeNow(now); !sn.IsZero() {
		e.meta.TrustAfterStore = sn.Add(d)
	}
	e.meta.ProveBy = e.c.proveBy(now, d)
}

// proveBy is the Date a list must carry to prove it was made after the
// trust moment d after client time now (opMeta.ProveBy): the upper bound
// of the API's clock then (proofCeiling carried by d, drift added either
// way), plus ServerClockTolerance; zero without an upper bound.
func (c *Client) proveBy(now time.Time, d time.Duration) time.Time {
	ceil, ok := c.srvClock.proofCeilingFrom(now, c.clock.Now)
	if !ok {
		return time.Time{}
	}
	return ceil.Add(d + time.Duration(math.Abs(float64(d))*serverClockDrift) + c.policy.ServerClockTolerance)
}

// trustNoEarlier moves the trust moment to d after now unless it is later
// already. A trust moment it leaves in place still gets the Date that
// proves a list postdates it, if none was recorded yet (a moment set
// without an upper bound of the API's clock, or by a record written before
// prove_by existed).
func (e *exec) trustNoEarlier(now time.Time, d time.Duration) {
	if t := now.Add(d); t.After(e.meta.TrustAfter) {
		e.meta.TrustAfter = t
		if by := e.c.proveBy(now, d); !by.IsZero() && by.After(e.meta.ProveBy) {
			e.meta.ProveBy = by
		}
	} else if e.meta.ProveBy.IsZero() {
		e.meta.ProveBy = e.c.proveBy(now, e.meta.TrustAfter.Sub(now))
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
	lastNotCurrent := "" // why the last lookup's list was not proven current
	for {
		if ctx.Err() != nil {
			if lastNotCurrent != "" {
				return nil, e.unknownErr("context ended while settling; the last lookup: "+lastNotCurrent, ctx.Err())
			}
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
		notCurrent := false
		lo, err := c.observedLookup(ctx, e.s.kind, e.s.id, e.meta)
		c.emit(ctx, Event{Kind: EventLookup, OperationID: e.s.id, Key: e.rec.Key, Found: err == nil && lo.kind != lookupNotFound, Err: e.scrubErr(err)})
		if err == nil && lo.floorBroken && e.meta.FloorOK {
			// The floor does not hold on this process's reading of the
			// API's clock: record at once that it excludes nothing, so
			// that no process trusts it once the clock steps forward
			// again (dropBrokenFloor). Best effort, as every settling
			// write.
			e.meta.FloorOK = false
			if err := e.save(ctx); errors.Is(err, ErrLeaseLost) {
				return nil, e.unknownErr("lost the operation's lease while recording that its floor no longer holds", err)
			}
		}
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
				if lo.notCurrent && wait {
					if c.lookAgainMayProve(lo, start) {
						// The list could not be proven current yet: like a
						// not-found before the trust moment, look again.
						lastNotCurrent, notCurrent = lo.reason, true
						break
					}
					lo.reason += clockBehindNote
				}
				e.meta.noteUnclear(lo.seen) // what was seen outlives this call
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
			switch {
			case err != nil:
				reason += "; the last lookup failed"
			case lastNotCurrent != "":
				reason += "; the last lookup: " + lastNotCurrent
			}
			return nil, e.unknownErr(reason, err)
		}
		w := p.LookupInterval
		if err == nil {
			if until := e.meta.TrustAfter.Sub(now); until > 0 && until < w {
				w = until
			}
		}
		if notCurrent {
			w = notCurrentWait(p)
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

// lookAgainMayProve reports whether a lookup that could not prove its list
// current may do better by looking again within the call's wait (from
// start, MaxSettleWait): not when the API's clock, by its latest answer no
// cache served, cannot reach the Date a later list must carry by the last
// look (a clock stepped back behind what earlier answers proved) — the
// operation is then unknown at once instead of after the whole wait. The
// wait is checked after each lookup, so the last look is sent up to one
// pause (notCurrentWait) after MaxSettleWait has passed.
func (c *Client) lookAgainMayProve(lo lookupOutcome, start time.Time) bool {
	last := start.Add(c.policy.MaxSettleWait + notCurrentWait(c.policy))
	return c.srvClock.mayReach(lo.proveBy, c.clock.Now(), last, c.policy.ServerClockTolerance)
}

// clockBehindNote ends the reason of a lookup not looked at again because
// lookAgainMayProve said no.
const clockBehindNote = "; the API's clock, by its latest answer no cache served, is behind the Date a current list must carry, and looking again within this call's wait could not prove it"

// notCurrentWait is the pause before looking again at a list that could
// not be proven current: the API's Date moves by whole seconds, so a look
// sooner than a second later mostly proves no more.
func notCurrentWait(p RetryPolicy) time.Duration {
	return max(p.LookupInterval, time.Second)
}

// trustedNotFound acts on a conclusive "not found": resend with the same
// key (a call), or settle not executed (Resume). An unverifiable 2xx on
// this key means the effect may exist under a shape the lookup cannot
// read: neither is allowed then.
func (e *exec) trustedNotFound(ctx context.Context, resend bool) (*settled, error) {
	c, p := e.c, e.c.policy
	if e.meta.Saw2xx {
		return nil, e.unknownSaved(ctx, "the API answered 2xx in a shape the SDK could not verify (or said this key was already used), and no matching effect was found; inspect the effect by its reference", nil, "")
	}
	if !resend {
		return e.settleNotExecuted(ctx)
	}
	if needsSnapshot(e.s.kind) && !e.meta.Snapshotted {
		// A refund or plan change whose series has no pre-send snapshot
		// (its history began where the store could not prove it) cannot be
		// resent in that series: a later effect could not be told from
		// another's. Not executed is proven; the next call starts a series
		// of its own, snapshot first.
		err := errors.New("lookup proved the request was not executed, and this series has no pre-send snapshot to tell a resend's effect by; call again to send (a new series takes its snapshot first)")
		return nil, e.notExecuted(ctx, err.Error(), err)
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
		return nil, e.notExecutedUnwritten(ctx, "the lookup proved nothing was executed", fmt.Errorf("recording not_executed: %w", opCause(err)))
	}
	e.c.emit(ctx, Event{Kind: EventSettle, OperationID: e.s.id, Key: e.rec.Key, State: string(keystore.StateNotExecuted), Source: SourceLookup})
	return &settled{rec: e.rec, op: e.op(SourceLookup)}, nil
}

// fromRecord answers from a settled record without sending anything.
func (c *Client) fromRecord(opID string, rec keystore.Record) (*settled, error) {
	op := Operation{ID: opID, Key: rec.Key, Source: SourceLocalRecord, Attempts: rec.Attempts}
	switch rec.State {
	case keystore.StateSucceeded:
		if d := decisionOfRecord(rec.Result); d.Decision.Refused() {
			return nil, laterRefusal(opID, rec, d)
		}
		return &settled{rec: rec, op: op}, nil
	case keystore.StateFailed:
		var f storedFailure
		_ = json.Unmarshal(rec.Result, &f)
		err := &OperationError{OperationID: opID, Key: rec.Key, State: rec.State}
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
