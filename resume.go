package pagpolar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// ResumeResult says where an operation stands after Resume.
type ResumeResult struct {
	OperationID string
	Key         string
	State       keystore.State // succeeded, failed, not_executed, or still unknown/pending
	Ref         string         // the sale / refund / subscription / plan change, when found
	Decision    Decision       // succeeded: the effect's decision as recorded (see Client.Refresh)
	Attempts    int
	Err         error // why it is still unsettled (an *OutcomeUnknownError, ErrInProgress, ...)
}

// Resume settles an operation left pending or unknown (by a crash, a lost
// answer or a context that ended), by looking its effect up. It never sends
// a money request (SAFETY rule 8): a trusted not-found settles the operation
// as not_executed, and sending again is the caller's decision (call the same
// method with the same operation ID). Resume waits, within ctx and the
// policy's MaxSettleWait, until a not-found can be trusted.
//
// Errors: ErrNotFound (the store has no such operation), ErrInProgress
// (another worker holds it), ErrStoreUnavailable. An operation that could not
// be settled yet is not an error: see ResumeResult.State and Err.
func (c *Client) Resume(ctx context.Context, operationID string) (*ResumeResult, error) {
	return c.resume(ctx, operationID, true)
}

func (c *Client) resume(ctx context.Context, opID string, wait bool) (*ResumeResult, error) {
	if err := identifier("operationID", opID, maxOperationID); err != nil {
		return nil, err
	}
	sid := c.storeID(opID)
	rec, err := c.store.Get(ctx, sid)
	if err != nil {
		if errors.Is(err, keystore.ErrNotFound) {
			return nil, fmt.Errorf("pagpolar: operation %q: %w", opID, ErrNotFound)
		}
		return nil, fmt.Errorf("pagpolar: operation %q: %w: %w", opID, ErrStoreUnavailable, err)
	}
	if !c.ownsRecord(rec, opID) {
		return nil, fmt.Errorf("pagpolar: operation %q: %w", opID, foreignRecord(rec))
	}
	if rec.State.Settled() {
		return &ResumeResult{OperationID: opID, Key: rec.Key, State: rec.State, Ref: rec.ResultRef, Decision: recordDecision(rec), Attempts: rec.Attempts}, nil
	}
	owner := c.callOwner()
	rec, err = c.store.Acquire(ctx, sid, owner, c.policy.LeaseTTL)
	if err != nil {
		if errors.Is(err, keystore.ErrLeaseHeld) {
			return &ResumeResult{OperationID: opID, Key: rec.Key, State: rec.State, Attempts: rec.Attempts, Err: ErrInProgress}, nil
		}
		return nil, fmt.Errorf("pagpolar: operation %q: %w: %w", opID, ErrStoreUnavailable, err)
	}
	e := &exec{c: c, rec: rec, s: &opSpec{kind: rec.Kind, id: opID}, owner: owner, leaseAt: c.clock.Now()}
	e.noteLease(rec)
	defer e.release(ctx)
	if rec.State.Settled() { // settled between Get and Acquire
		return &ResumeResult{OperationID: opID, Key: rec.Key, State: rec.State, Ref: rec.ResultRef, Decision: recordDecision(rec), Attempts: rec.Attempts}, nil
	}
	if err := json.Unmarshal(rec.Meta, &e.meta); err != nil {
		return nil, fmt.Errorf("pagpolar: operation %q: corrupt record meta: %w", opID, err)
	}
	e.s.path = e.meta.Path
	if _, err, ok := e.applyUnrecorded(ctx); ok {
		// This client knew the outcome and could not write it before.
		out := &ResumeResult{OperationID: opID, Key: e.rec.Key, State: e.rec.State, Ref: e.rec.ResultRef, Decision: recordDecision(e.rec), Attempts: e.rec.Attempts}
		if err != nil && !e.rec.State.Settled() {
			return nil, err
		}
		out.Err = err
		return out, nil
	}
	if rec.State == keystore.StatePending && rec.Attempts == 0 {
		// Saved, never sent (a refund that crashed during its snapshot) —
		// which the record proves only in a store that kept what it
		// acknowledged (SAFETY rule 13). In one that cannot prove its
		// history, the record may be a reverted copy of one that was sent,
		// or stand beside a lost one; and a lookup by its pre-send snapshot
		// would exclude the lost effect. It stays unsettled: the next call
		// with the same operation ID looks the effect up with nothing
		// excluded before it sends.
		if _, unproven := c.unprovenHistory(ctx); unproven {
			// Touched, as an unsettled record below is, so that ResumeAll
			// reaches past it to newer ones.
			_ = e.save(ctx)
			return &ResumeResult{OperationID: opID, Key: rec.Key, State: rec.State, Attempts: rec.Attempts,
				Err: &OutcomeUnknownError{OperationID: opID, Key: rec.Key,
					Reason: "the record says it was never sent, but the key store cannot prove its history (it may have lost the record of a send); call again with the same operation ID, which looks the effect up before it sends"}}, nil
		}
		if _, err := e.settleNotExecuted(ctx); err != nil {
			return nil, err
		}
		return &ResumeResult{OperationID: opID, Key: rec.Key, State: e.rec.State, Attempts: e.rec.Attempts}, nil
	}
	if e.meta.TrustAfter.IsZero() {
		e.meta.TrustAfter = rec.LastSentAt.Add(c.policy.trustDelay())
	}
	e.meta.fillStoreTrust(rec, c.policy)
	_, serr := e.settle(ctx, false, wait)
	if !wait && !e.rec.State.Settled() {
		// Touch the unsettled record so it moves behind newer ones in
		// List's oldest-first order: ResumeAll then reaches every operation
		// even when hundreds stay unsettled.
		_ = e.save(ctx)
	}
	out := &ResumeResult{OperationID: opID, Key: e.rec.Key, State: e.rec.State, Ref: e.rec.ResultRef, Decision: recordDecision(e.rec), Attempts: e.rec.Attempts}
	if serr != nil {
		switch {
		case errors.Is(serr, ErrOutcomeUnknown), errors.Is(serr, ErrDeclined):
			out.Err = serr
		default:
			return nil, serr
		}
	}
	return out, nil
}

// ResumeAll settles every operation of this client's credential that is
// pending (and not leased by a live worker) or unknown, without waiting for
// in-processing windows: operations that cannot be settled yet are reported
// with their Err and left for a later run. It never sends a money request.
// It works on up to RetryPolicy.ResumeConcurrency operations at a time (each under its
// own lease, so never two workers on one operation; every lookup within the
// client's retry budget), and is safe to run while other processes work on
// the same store. Only this credential's records are touched: IDs are
// matched exactly (RecordID, the one form the SDK writes), and a record
// under this credential's prefix whose key does not prove it this
// credential's operation (another credential's, or a form this SDK does
// not write) is not settled: it is reported with an ErrForeignRecord Err.
func (c *Client) ResumeAll(ctx context.Context) ([]ResumeResult, error) {
	prefix := c.storeID("")
	seen := map[string]bool{}
	var (
		mu  sync.Mutex
		out []ResumeResult
	)
	for {
		recs, err := c.store.List(ctx, keystore.Filter{States: []keystore.State{keystore.StatePending, keystore.StateUnknown}, Prefix: prefix, Limit: 500})
		if err != nil {
			return out, fmt.Errorf("pagpolar: listing unfinished operations: %w: %w", ErrStoreUnavailable, err)
		}
		var batch []keystore.Record
		for _, r := range recs {
			if seen[r.OperationID] {
				continue
			}
			seen[r.OperationID] = true
			opID := strings.TrimPrefix(r.OperationID, prefix)
			if !c.ownsRecord(r, opID) {
				out = append(out, ResumeResult{OperationID: opID, Key: r.Key, State: r.State, Attempts: r.Attempts, Err: foreignRecord(r)})
				continue
			}
			batch = append(batch, r)
		}
		sem := make(chan struct{}, c.policy.ResumeConcurrency)
		var wg sync.WaitGroup
		for _, r := range batch {
			if ctx.Err() != nil {
				break
			}
			opID := strings.TrimPrefix(r.OperationID, prefix)
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				res, err := c.resume(ctx, opID, false)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					out = append(out, ResumeResult{OperationID: opID, Key: r.Key, State: r.State, Attempts: r.Attempts, Err: err})
					return
				}
				out = append(out, *res)
			})
		}
		wg.Wait()
		if err := ctx.Err(); err != nil {
			return out, err
		}
		if len(batch) == 0 || len(recs) < 500 {
			break
		}
	}
	return out, nil
}
