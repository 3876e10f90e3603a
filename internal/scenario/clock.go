package scenario

import (
	"sync/atomic"
	"time"

	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// hostClock is a client host's clock: the fake's Clock (the one time line
// of the API, the store and the clients) plus the host's skew.
//
// While warp is on, a wait does not pass in real time: After moves the
// shared Clock forward by the wait and returns at once. The engine's
// backoffs, settle delays and windows then cost no real time and do not
// depend on how busy the machine is: while one call runs, only its own
// waits move time, so the run is the same every time. Warp is switched
// off while steps run concurrently (two workers waiting on each other
// would otherwise move time for each other at machine speed, expiring a
// busy worker's lease in the middle of one request): they wait in real
// time, as the repository's other tests do.
type hostClock struct {
	base *pagpolartest.Clock
	skew atomic.Int64 // time.Duration
	warp *atomic.Bool // shared by every host of a run
	// held reports whether the fake has requests waiting on the Clock (a
	// hold, a slow answer, latency); nil: never.
	held func() bool
}

func (c *hostClock) Now() time.Time { return c.base.Now().Add(time.Duration(c.skew.Load())) }

func (c *hostClock) After(d time.Duration) <-chan time.Time {
	if d > 0 && c.warp.Load() {
		waiting := c.held != nil && c.held()
		c.base.Advance(d)
		if waiting {
			// A hold this wait ended must run before the client goes on:
			// on a real clock its commit would come before the client's
			// next look, which the warp would otherwise overtake.
			time.Sleep(20 * time.Millisecond)
		}
		d = 0
	}
	if d <= 0 {
		ch := make(chan time.Time, 1)
		ch <- c.Now()
		return ch
	}
	return c.base.After(d) // the time it carries is the API's, unskewed: the engine reads Now
}
