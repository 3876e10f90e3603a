package pagpolar

import (
	"context"
	"sync"
	"time"
)

// No call outlives its context by more than one grace. Work that must go
// on after the caller stopped waiting (writing what the API answered, the
// claim on an effect, giving the lease back) runs on the caller's context
// without its cancellation, but ends at the latest nine tenths of
// RetryPolicy.DeadlineGrace after the caller's context does (its deadline,
// or the moment it is cancelled), and within its own limit; the last tenth
// is the call's to return in. Every such context of one call
// ends at the same moment, so the whole call returns by the caller's
// deadline plus one grace, whatever the store does. An outcome not saved
// by then leaves the record pending (or unknown), and the next call
// settles it by lookup; the client remembers it meanwhile (outcome.go).

// DefaultDeadlineGrace is RetryPolicy.DeadlineGrace's default.
const DefaultDeadlineGrace = time.Second

// graceCtx returns ctx without its cancellation, ended limit from now or
// the policy's grace after ctx ends, whichever comes first.
func (c *Client) graceCtx(ctx context.Context, limit time.Duration) (context.Context, context.CancelFunc) {
	if ctx.Done() == nil {
		// ctx never ends (and has no deadline): there is no cancellation to
		// remove and no end to follow, only the limit.
		return context.WithTimeout(ctx, limit)
	}
	// The work ends a tenth of the grace early: the rest is the call's to
	// return in (giving the lease back, building the error, a loaded
	// scheduler), so that the call itself is back by the caller's end plus
	// the grace.
	g := &graceEnd{grace: c.policy.DeadlineGrace - c.policy.DeadlineGrace/10}
	var gctx context.Context
	gctx, g.cancel = context.WithTimeout(context.WithoutCancel(ctx), limit)
	if dl, ok := ctx.Deadline(); ok {
		gctx, g.cancelDL = context.WithDeadline(gctx, dl.Add(g.grace))
	}
	g.stop = context.AfterFunc(ctx, g.callerEnded)
	return gctx, g.end
}

// graceEnd ends one graceCtx: a grace after the caller's context ends, or
// when the work is done (end), whichever comes first.
type graceEnd struct {
	grace    time.Duration
	cancel   context.CancelFunc // the limit's context
	cancelDL context.CancelFunc // the caller's deadline plus grace (nil without one)
	stop     func() bool        // unregisters callerEnded

	mu    sync.Mutex
	timer *time.Timer
	done  bool
}

func (g *graceEnd) callerEnded() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.done {
		g.timer = time.AfterFunc(g.grace, g.cancelAll)
	}
}

func (g *graceEnd) cancelAll() {
	if g.cancelDL != nil {
		g.cancelDL()
	}
	g.cancel()
}

func (g *graceEnd) end() {
	g.stop()
	g.mu.Lock()
	g.done = true
	if g.timer != nil {
		g.timer.Stop()
	}
	g.mu.Unlock()
	g.cancelAll()
}
