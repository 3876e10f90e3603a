package pagpolar

import (
	"testing"
	"time"
)

// TestDropBrokenFloor_RecordsWhatThisProcessSaw: a save stops the record
// calling its floor usable when this process reads the API's clock below
// it in an answer no cache serves again (a step back since it was
// recorded; a list's Date may be a stored copy's), whoever recorded it;
// and when
// this process's estimator has switched itself off, only for a floor this
// call recorded — an estimator that went off over a stored copy an hour
// ago says nothing of a floor another process took since, and stripping
// it would leave that operation unknown for good.
func TestDropBrokenFloor_RecordsWhatThisProcessSaw(t *testing.T) {
	f := newFixture(t, nil)
	now := f.srv.Clock.Now()
	for _, c := range []struct {
		name      string
		floor     time.Time
		off, mine bool
		fresh     bool // this process's reading comes from an answer no cache serves again
		want      bool // FloorOK after the save's check
	}{
		{"the floor holds on this reading", now.Add(-time.Minute), false, false, true, true},
		{"a POST's answer an hour below the floor", now.Add(time.Hour), false, false, true, false},
		{"only a list's Date below the floor (a copy's, maybe)", now.Add(time.Hour), false, false, false, true},
		{"estimator off, another's floor", now.Add(-time.Minute), true, false, true, true},
		{"estimator off, this call's floor", now.Add(-time.Minute), true, true, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := f.client(t)
			warmClock(f, cl)
			cl.srvClock.mu.Lock()
			cl.srvClock.disabled = c.off
			if c.fresh {
				cl.srvClock.fresh, cl.srvClock.freshOK = clockSample{date: now.Truncate(time.Second), at: cl.clock.Now()}, true
			}
			cl.srvClock.mu.Unlock()
			e := &exec{c: cl, meta: opMeta{Floor: c.floor, FloorOK: true}, floorMine: c.mine}
			e.dropBrokenFloor()
			if e.meta.FloorOK != c.want {
				t.Fatalf("floor_ok %v, want %v", e.meta.FloorOK, c.want)
			}
		})
	}
}
