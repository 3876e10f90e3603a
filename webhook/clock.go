package webhook

import "time"

// Clock is the Inbox's time source for its own waits (polling, lease
// renewal, the pauses of a purge) and for the retention cut-off. Lease
// expiry and due times are the store's clock, not this one (see Store);
// MemoryStore takes a Clock as its store clock (NewMemoryStoreWithClock).
// *pagpolartest.Clock implements it, so tests move time with Advance
// instead of sleeping.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
