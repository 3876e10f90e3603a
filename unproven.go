package pagpolar

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// A store that cannot prove its history (keystore.HistoryProver: a Redis
// or SQLite file opened fresh, which may as well have been emptied while
// nobody watched, SAFETY rule 13) may have lost the record of an
// operation that was sent. While it is unproven, an operation's first
// send is treated as a resend: the effect is looked up first, by the
// normal proof rules, and the request is sent only on a trusted
// not-found. That costs one lookup per first send, and nothing once the
// history is proven.

// ErrStoreUnproven: the key store cannot prove its history (see
// keystore.HistoryProver), and the lookup that must precede the first send
// was not conclusive in time. This call sent nothing, but an earlier
// call whose record the store lost may have: the outcome is unknown
// (OutcomeOf); call again with the same operation ID.
var ErrStoreUnproven = errors.New("pagpolar: key store history unproven; nothing was sent")

// causeUnproven is the Cause of the lookups made before a first send
// because the store's history is unproven.
const causeUnproven = "unproven-history"

// unprovenHistory reports whether the store's history is unproven, and
// since when by the store's clock (zero: unknown, e.g. the store could not
// say; the lookup then waits as if the history began now).
func (c *Client) unprovenHistory(ctx context.Context) (since time.Time, unproven bool) {
	hp, ok := c.userStore.(keystore.HistoryProver)
	if !ok {
		return time.Time{}, false
	}
	h, err := hp.History(ctx)
	if err != nil {
		return time.Time{}, true
	}
	return h.UnprovenSince, !h.Proven()
}

// lookBeforeFirstSend runs before an operation's first send while the
// store's history is unproven (done false: go on and send). It looks the
// effect up with nothing excluded (no floor, no snapshot: the lost send
// could have been made at any time before the history began), waiting
// for the trust moment: every send whose record was lost was made before
// the history began, so a not-found is conclusive once that moment plus
// the in-processing window has passed on the store's clock.
func (e *exec) lookBeforeFirstSend(ctx context.Context) (res *settled, err error, done bool) {
	c, p := e.c, e.c.policy
	if e.historyChecked {
		return nil, nil, false
	}
	since, unproven := c.unprovenHistory(ctx)
	if !unproven {
		return nil, nil, false
	}
	now := c.clock.Now()
	sn := e.storeNow(now)
	if since.IsZero() || sn.IsZero() || since.After(sn) {
		since = sn
	}
	var lag time.Duration
	if !sn.IsZero() {
		lag = since.Sub(sn) // ≤ 0: how long ago the history began
	}
	m := e.meta
	m.Floor, m.FloorOK, m.Snapshot, m.Snapshotted, m.SnapshotOffer = time.Time{}, false, nil, false, ""
	saved := e.meta
	e.meta = m
	e.trustFrom(now, lag+p.trustDelay()+p.AttemptTimeout) // in the past once the history is older than that
	// A not-found is inconclusive before the trust moment: wait for it
	// rather than look in vain, unless it is further off than this call
	// may wait.
	if until := e.meta.TrustAfter.Sub(now); until > 0 {
		if dl, ok := ctx.Deadline(); until > p.MaxSettleWait || (ok && now.Add(until).After(dl)) {
			e.meta = saved
			return nil, e.opErr(fmt.Errorf("%w: the store's history began %s ago, so a lookup cannot be conclusive for another %s, longer than this call may wait; nothing was sent (call again later, or declare the store new: pagpolar ops init)",
				ErrStoreUnproven, (-lag).Round(time.Millisecond), until.Round(time.Millisecond))), true
		}
		if err := e.renewBefore(ctx, until); err != nil {
			e.meta = saved
			return nil, err, true
		}
		if serr := sleep(ctx, c.clock, until); serr != nil {
			e.meta = saved
			return nil, e.opErr(fmt.Errorf("%w: the call ended while waiting for the lookup before the first send to become conclusive; nothing was sent (call again): %w", ErrStoreUnproven, serr)), true
		}
	}
	start := now
	for {
		conclusive := e.trusted(c.clock.Now())
		notCurrent := false
		lo, lerr := c.lookup(ctx, e.s.kind, e.s.id, e.meta)
		c.emit(ctx, Event{Kind: EventLookup, OperationID: e.s.id, Key: e.rec.Key, Cause: causeUnproven, Found: lerr == nil && lo.kind != lookupNotFound, Err: e.scrubErr(lerr)})
		if lerr == nil {
			switch lo.kind {
			case lookupSucceeded:
				// The effect of a send whose record the store lost: it
				// counts as sent.
				e.rec.Attempts = max(e.rec.Attempts, 1)
				res, err := e.succeed(ctx, lo.effect, SourceLookup)
				return res, err, true
			case lookupFailed:
				if conclusive {
					e.rec.Attempts = max(e.rec.Attempts, 1)
					return nil, e.refused(ctx, lo.effect, "settled by lookup: "+lo.reason, SourceLookup), true
				}
			case lookupUnclear:
				if lo.notCurrent {
					if c.lookAgainMayProve(lo, start) {
						notCurrent = true
						break // not proven current yet: look again
					}
					lo.reason += clockBehindNote
				}
				e.meta.noteUnclear(lo.seen)
				return nil, e.unprovenUnknown(ctx, lo.reason, firstRef(lo.refs)), true
			case lookupUnsupported:
				return nil, e.unprovenUnknown(ctx, "no reliable lookup exists for this route ("+lo.reason+"), and the SDK never sends blind", ""), true
			case lookupNotFound:
				if conclusive {
					e.historyChecked = true
					e.meta = saved
					e.meta.TrustAfter, e.meta.TrustAfterStore = time.Time{}, time.Time{}
					return nil, nil, false
				}
			}
		}
		now := c.clock.Now()
		if now.Sub(start) >= p.MaxSettleWait {
			e.meta = saved
			return nil, e.opErr(fmt.Errorf("%w: the store cannot prove its history, and the lookup before the first send was not conclusive within %s; nothing was sent (call again): %w", ErrStoreUnproven, p.MaxSettleWait, lerr)), true
		}
		w := p.LookupInterval
		if until := e.meta.TrustAfter.Sub(now); lerr == nil && until > 0 && until < w {
			w = until
		}
		if notCurrent {
			w = notCurrentWait(p)
		}
		if err := e.renewBefore(ctx, w); err != nil {
			e.meta = saved
			return nil, err, true
		}
		if serr := sleep(ctx, c.clock, w); serr != nil {
			e.meta = saved
			return nil, e.opErr(fmt.Errorf("%w: the store cannot prove its history, and the call ended while waiting for a conclusive lookup before the first send; nothing was sent (call again): %w", ErrStoreUnproven, serr)), true
		}
	}
}

// unprovenUnknown ends a call whose lookup before the first send found
// what it cannot attribute: the record counts a possible send (of a
// history the store lost) and stays unknown, for a later lookup or an
// operator.
func (e *exec) unprovenUnknown(ctx context.Context, reason, ref string) error {
	e.rec.Attempts = max(e.rec.Attempts, 1)
	return e.unknownSaved(ctx, "the store cannot prove its history, and the lookup before the first send found: "+reason, nil, ref)
}

func firstRef(refs []string) string {
	if len(refs) > 0 {
		return refs[0]
	}
	return ""
}
