package main

// Verification: the final record of every operation the run meant to carry out, for the ledger check.

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/internal/report"
	"github.com/pagpolar/pagpolar-go/keystore"
)

// expectedOps reads the final record of every operation the run meant to
// carry out: each order's charge, and the refund of each refundable order
// whose charge succeeded.
func expectedOps(ctx context.Context, store keystore.Store, credential string, seed int64, n int) ([]report.Expected, error) {
	return expectedOpsCounting(ctx, store, credential, seed, n, nil)
}

// expectedOpsCounting is expectedOps adding one to read (if not nil) per
// order read.
func expectedOpsCounting(ctx context.Context, store keystore.Store, credential string, seed int64, n int, read *atomic.Int64) ([]report.Expected, error) {
	var out []report.Expected
	get := func(opID string) (report.Expected, error) {
		rec, err := store.Get(ctx, pagpolar.RecordID(credential, opID))
		switch {
		case err == nil:
			return report.Expected{OperationID: opID, Record: rec, Found: true}, nil
		case errors.Is(err, keystore.ErrNotFound):
			return report.Expected{OperationID: opID}, nil
		}
		return report.Expected{}, fmt.Errorf("reading the record of %s: %w", opID, err)
	}
	for i := range n {
		if read != nil {
			read.Add(1)
		}
		o := orderAt(seed, i)
		e, err := get(chargeOpID(o))
		if err != nil {
			return nil, err
		}
		e.Kind, e.Method, e.ExternalReference = "charge", o.Method, o.Ref
		if o.Method == "subscribe" {
			e.Kind, e.Method = "subscribe", o.PayBy
		}
		out = append(out, e)
		if !e.Found {
			// A store that lost the charge's record may have lost the
			// refund's or plan change's too: expected if its effect exists
			// (their groups are their derived keys).
			if id := followOpID(o); id != "" {
				r, err := get(id)
				if err != nil {
					return nil, err
				}
				r.Kind, r.IfEffect = followKind(o), !r.Found
				if !r.Found {
					r.Record.Key = pagpolar.DerivedKey(credential, id)
				}
				out = append(out, r)
			}
			continue
		}
		if e.Record.State != keystore.StateSucceeded {
			continue
		}
		switch {
		case o.Refund > 0:
			r, err := get(refundOpID(o))
			if err != nil {
				return nil, err
			}
			if !r.Found && pagpolar.DecisionOfResult(e.Record.Result) != pagpolar.DecisionPaid {
				// Against an API that decides later a checkout refunds a sale
				// only once it is paid: a sale declined after it was answered,
				// or not decided in time, has no refund to expect.
				continue
			}
			r.Kind = "refund"
			out = append(out, r)
		case o.NewPlan != "":
			r, err := get(planOpID(o))
			if err != nil {
				return nil, err
			}
			r.Kind = "plan_change"
			out = append(out, r)
		}
	}
	return out, nil
}

// followOpID is the operation that follows an order's charge (its refund
// or plan change), "" none.
func followOpID(o order) string {
	switch {
	case o.Refund > 0:
		return refundOpID(o)
	case o.NewPlan != "":
		return planOpID(o)
	}
	return ""
}

func followKind(o order) string {
	if o.Refund > 0 {
		return "refund"
	}
	return "plan_change"
}

// verifyTimeout bounds verification when the run's own time ran out.
const verifyTimeout = 2 * time.Minute

// verifyContext is the context verification reads the store with: ctx, or,
// when ctx's deadline has passed (the run ran out of time while settling),
// one of its own bound, so that the run still ends with its report. A
// cancelled ctx (an interrupt) is kept.
func verifyContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return context.WithTimeout(context.WithoutCancel(ctx), verifyTimeout)
	}
	return ctx, func() {}
}

// runExitCode is the exit code of a demo or chaos run from its report:
// 0 every check passed, 1 a check failed (an operation charged twice, an
// effect reported failed, an operation without an outcome), 3 the run
// could not finish settling (Report.Incomplete: what stayed open and why
// is in the report).
func runExitCode(rep *report.Report) int {
	switch {
	case rep.OK():
		return demoExitOK
	case rep.Incomplete():
		return demoExitIncomplete
	}
	return demoExitFailed
}
