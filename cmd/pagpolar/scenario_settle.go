package main

// Settling what the checkout pass left open: ResumeAll and re-issue rounds.

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/internal/report"
	"github.com/pagpolar/pagpolar-go/keystore"
)

// reconcile settles what the checkout pass left open, as a background job
// of the order system would. Open are the operations the order code has no
// final answer for, and those whose record is still pending or unknown (an
// answer arrived but could not be recorded, e.g. the lease ran out while the
// machine was starved). Each round runs ResumeAll (lookups only, never a
// charge), then the order code again for each order still open (same
// operation IDs: the SDK settles first and sends only after a trusted
// not-found). Rounds go on until nothing is open, no round makes progress,
// the store refuses new operations for a loss of records (amnesia: calling
// again changes nothing until an operator accepts the loss), or ctx ends;
// Settling.Stopped says which of the last two stopped it with operations
// still open.
func reconcile(ctx context.Context, c *pagpolar.Client, store keystore.Store, credential string, run *orderRunner, seed int64, n int, res *results, conc int) report.Settling {
	return reconcileShowing(ctx, c, store, credential, run, seed, n, res, conc, nil)
}

// reconcileShowing is reconcile showing each round's ResumeAll and re-issue
// through show (nil: silently).
func reconcileShowing(ctx context.Context, c *pagpolar.Client, store keystore.Store, credential string, run *orderRunner, seed int64, n int, res *results, conc int,
	show func(line func(time.Duration) string) *progress) report.Settling {
	if show == nil {
		show = func(func(time.Duration) string) *progress { return nil }
	}
	var s report.Settling
	if run.calls == 0 {
		// A few calls per operation and round: an operation the SDK keeps
		// answering "outcome unknown" (a shape it cannot verify) would
		// otherwise be called until the run's deadline.
		r := *run
		r.calls = 4
		run = &r
	}
	index := make(map[string]int, n)
	for i := range n {
		o := orderAt(seed, i)
		index[chargeOpID(o)], index[refundOpID(o)], index[planOpID(o)] = i, i, i
	}
	stuck := 0
	for round := 0; ctx.Err() == nil; round++ {
		open := res.unsettledOps()
		prefix := pagpolar.RecordID(credential, "")
		recs, err := store.List(ctx, keystore.Filter{
			States: []keystore.State{keystore.StatePending, keystore.StateUnknown, keystore.StateNotExecuted},
			Prefix: prefix, Limit: 2 * n,
		})
		if err != nil {
			// The store is down: count what the order code knows and retry.
			recs = nil
		}
		for _, r := range recs {
			if cred, op, ok := pagpolar.SplitRecordID(r.OperationID); ok && cred == credential {
				open[op] = true
			}
		}
		if round == 0 {
			s.LeftUnsettled = len(open)
		}
		if round > 0 && len(open) >= s.StillUnsettledEnd && err == nil {
			// No progress: what is left stays "outcome unknown" (an answer
			// the SDK cannot verify) until a person looks. Give it two more
			// rounds (a lease may have had to expire), then stop.
			if stuck++; stuck >= 3 {
				break
			}
		} else {
			stuck = 0
		}
		s.StillUnsettledEnd = len(open)
		if len(open) == 0 && err == nil {
			break
		}
		s.ReconcileRounds++
		round, lookingUp := s.ReconcileRounds, len(open)
		p := show(func(el time.Duration) string {
			return fmt.Sprintf("settling, round %d: looking up %d operations without a final answer (ResumeAll: lookups, never a charge), %s",
				round, lookingUp, el.Round(100*time.Millisecond))
		})
		rs, _ := c.ResumeAll(ctx)
		p.stop()
		byResume := map[string]bool{}
		for _, r := range rs {
			if open[r.OperationID] && (r.State == keystore.StateSucceeded || r.State == keystore.StateFailed) {
				byResume[r.OperationID] = true
				s.SettledByResume++
			}
		}
		seen := map[int]bool{}
		var orders []int
		for op := range open {
			if i, ok := index[op]; ok && !seen[i] {
				seen[i] = true
				orders = append(orders, i)
			}
		}
		sort.Ints(orders)
		var mu sync.Mutex
		var reissued, refused atomic.Int64
		p = show(func(el time.Duration) string {
			return fmt.Sprintf("settling, round %d: calling again %d/%d orders with the same operation IDs (the SDK looks up before it resends), %s",
				round, reissued.Load(), len(orders), el.Round(100*time.Millisecond))
		})
		forEachOrder(ctx, len(orders), conc, func(k int) {
			for _, o := range run.process(ctx, orderAt(seed, orders[k])) {
				if o.amnesia {
					refused.Add(1)
				}
				res.set(o)
				if open[o.OpID] && !byResume[o.OpID] && o.final() {
					mu.Lock()
					s.SettledByReissue++
					mu.Unlock()
				}
			}
			reissued.Add(1)
		})
		p.stop()
		if n := refused.Load(); n > 0 {
			s.StillUnsettledEnd = len(res.unsettledOps())
			s.Amnesia = true
			s.Stopped = fmt.Sprintf("the key store lost records it had acknowledged and refuses every new operation (%d refused in round %d): "+
				"what is still open stays unsettled until an operator settles the survivors and accepts the loss (pagpolar ops recover)", n, round)
			return s
		}
	}
	if err := ctx.Err(); err != nil && s.StillUnsettledEnd > 0 {
		s.Stopped = fmt.Sprintf("the run's time ran out while settling (%v), with %d operations still open", err, s.StillUnsettledEnd)
	}
	return s
}

// forEachOrder calls fn(0..n-1) on conc goroutines and returns when every
// call has returned; it stops handing out work when ctx ends.
func forEachOrder(ctx context.Context, n, conc int, fn func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < conc && w < n; w++ {
		wg.Go(func() {
			for i := range next {
				fn(i)
			}
		})
	}
	for i := 0; i < n; i++ {
		select {
		case next <- i:
		case <-ctx.Done():
			i = n
		}
	}
	close(next)
	wg.Wait()
}
