package pagpolar

import (
	"context"
	"sync"
	"time"
)

// No call outlives its context by more than one grace. Work that must go
// on after the caller stopped waiting (writing what the API answered, the
// claim on an effect, giving the lease back) runs on the caller's context
// without its cancellation, but ends at the latest RetryPolicy.DeadlineGrace
// after the caller's context does (its deadline, or the moment it is
// cancelled), and within its own limit. Every such context of one call
// ends at the same moment, so the whole call returns by the caller's
// deadline plus one grace, whatever the store does. An outcome not saved
// by then leaves the record pending (or unknown), and the next call
// settles it by lookup; the client remembers it meanwhile (outcome.go).

// DefaultDeadlineGrace is RetryPolicy.DeadlineGrace's default.
const DefaultDeadlineGrace = time.Second

// graceCtx returns ctx without its cancellation, ended limit from now or
// the policy's grace after ctx ends, whichever comes first.
func (c *Client) graceCtx(ctx context.Context, limit time.Duration) (context.Context, context.CancelFunc) {
	grace := c.policy.DeadlineGrace
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), limit)
	if dl, ok := ctx.Deadline(); ok {
		var cancelDL context.CancelFunc
		gctx, cancelDL = context.WithDeadline(gctx, dl.Add(grace))
		inner := cancel
		cancel = func() { cancelDL(); inner() }
	}
	var (
		mu    sync.Mutex
		timer *time.Timer
		done  bool
	)
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !done {
			timer = time.AfterFunc(grace, cancel)
		}
	})
	return gctx, func() {
		stop()
		mu.Lock()
		done = true
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel()
	}
}
