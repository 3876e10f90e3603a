package webhook

import "time"

// Clock is the Inbox's time source: lease expiry, backoff, polling and
// retention all follow it. *pagpolartest.Clock implements it, so tests move
// time with Advance instead of sleeping.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
