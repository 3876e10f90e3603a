package pagpolartest

import (
	"testing"
	"time"
)

// The decider waits for an instant, not for a duration read off Now
// first: an Advance between reading Now and setting the timer made it wait
// the whole decision delay again in real time (a card decided by time was
// not decided within 30 s under load).
func TestClock_TimerAtAnInstantSurvivesAnAdvance(t *testing.T) {
	c := NewClock()
	at := c.Now().Add(time.Hour)
	c.Advance(time.Hour) // the Advance lands before the timer is set
	ch, stop := c.timerAt(at)
	defer stop()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("a timer to an instant the clock already passed did not fire")
	}
	at = c.Now().Add(time.Hour)
	ch2, stop2 := c.timerAt(at)
	defer stop2()
	c.Advance(time.Hour)
	select {
	case got := <-ch2:
		if got.Before(at) {
			t.Fatalf("fired at %v, before %v", got, at)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a timer to an instant did not fire on the Advance past it")
	}
}
