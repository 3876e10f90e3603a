package pagpolar_test

import (
	"sync/atomic"
	"time"
)

// lagProbe measures how late this process's goroutines get to run while a
// wall-clock bound is being tested: it asks for a 10 ms timer again and
// again and keeps the largest lateness seen. On an idle machine that is
// about a millisecond; on two cores shared with a dozen runnable threads
// and the race detector, hundreds. A bound on when a call returns can hold
// only up to what the scheduler adds to it, so such tests allow a few times
// the lag they measured, and say so.
type lagProbe struct {
	max  atomic.Int64 // nanoseconds
	stop chan struct{}
	done chan struct{}
}

func startLagProbe() *lagProbe {
	p := &lagProbe{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		const tick = 10 * time.Millisecond
		t := time.NewTimer(tick)
		defer t.Stop()
		for {
			asked := time.Now()
			t.Reset(tick)
			select {
			case <-p.stop:
				return
			case <-t.C:
			}
			if late := time.Since(asked) - tick; late > time.Duration(p.max.Load()) {
				p.max.Store(int64(late))
			}
		}
	}()
	return p
}

// Stop ends the probe and returns the largest lateness it saw.
func (p *lagProbe) Stop() time.Duration {
	close(p.stop)
	<-p.done
	return time.Duration(p.max.Load())
}
