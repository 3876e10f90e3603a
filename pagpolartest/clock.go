package pagpolartest

import (
	"context"
	"sync"
	"time"
)

// Clock is a clock that runs with real time but can be moved forward by
// tests: Now is the real time plus an offset that Advance grows. Waits made
// through After end when their deadline is reached either way, so a test can
// cross the 60 s in-processing mark or the 24 h replay window without sleeping,
// while short real-time delays still pass on their own.
//
// The same Clock can be given to the client and to the memory key store so
// that every party sees one time line.
type Clock struct {
	mu      sync.Mutex
	offset  time.Duration
	waiters map[*waiter]struct{}
}

type waiter struct {
	deadline time.Time
	ch       chan time.Time
	timer    *time.Timer
}

// NewClock returns a Clock at the real time.
func NewClock() *Clock { return &Clock{waiters: make(map[*waiter]struct{})} }

// Now returns the real time plus every Advance so far.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

// Advance moves the clock forward by d and fires the waits it passes.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	now := time.Now().Add(c.offset)
	var due []*waiter
	for w := range c.waiters {
		if !now.Before(w.deadline) {
			due = append(due, w)
			delete(c.waiters, w)
		}
	}
	c.mu.Unlock()
	for _, w := range due {
		w.timer.Stop()
		w.ch <- now // buffered, sent once
	}
}

// After returns a channel that receives the clock's time once d has passed
// on this clock (real time or Advance, whichever comes first).
func (c *Clock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.Now()
		return ch
	}
	c.mu.Lock()
	w := &waiter{deadline: time.Now().Add(c.offset).Add(d), ch: ch}
	c.waiters[w] = struct{}{}
	w.timer = time.AfterFunc(d, func() { c.fire(w) })
	c.mu.Unlock()
	return ch
}

func (c *Clock) fire(w *waiter) {
	c.mu.Lock()
	_, pending := c.waiters[w]
	delete(c.waiters, w)
	now := time.Now().Add(c.offset)
	c.mu.Unlock()
	if pending {
		w.ch <- now
	}
}

// NewTimer is After with a way to give up: stop releases the wait (the
// channel then never fires). Callers that may stop waiting early, e.g. on a
// context, use it so that nothing is left behind until the deadline.
func (c *Clock) NewTimer(d time.Duration) (ch <-chan time.Time, stop func()) {
	c.mu.Lock()
	at := time.Now().Add(c.offset).Add(d)
	c.mu.Unlock()
	return c.timerAt(at)
}

// timerAt is NewTimer to an instant on the clock: it fires once the clock
// reads at (at once if it already does). A wait computed as at minus Now
// would lose an Advance made between the two readings.
func (c *Clock) timerAt(at time.Time) (ch <-chan time.Time, stop func()) {
	out := make(chan time.Time, 1)
	c.mu.Lock()
	now := time.Now().Add(c.offset)
	if !now.Before(at) {
		c.mu.Unlock()
		out <- now
		return out, func() {}
	}
	w := &waiter{deadline: at, ch: out}
	c.waiters[w] = struct{}{}
	w.timer = time.AfterFunc(at.Sub(now), func() { c.fire(w) })
	c.mu.Unlock()
	return out, func() {
		c.mu.Lock()
		delete(c.waiters, w)
		c.mu.Unlock()
		w.timer.Stop()
	}
}

// Sleep waits d on the clock (real time or Advance) or until ctx ends, and
// returns ctx's error in the latter case.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	ch, stop := c.NewTimer(d)
	defer stop()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
