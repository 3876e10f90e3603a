package pagpolar

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A reader of the API's clock that takes the client's time before the
// estimator's lock may find, once it holds the lock, every sample newer
// than its own "now" (answers to other workers, read meanwhile): the
// ceiling then says "no reading", and a lookup drops the operation's
// recorded floor — its own sale unclear, the operation unknown. Seen as
// a rare failure of TestResumeAll_TwoClientsNeverWorkOneOperation (64
// workers reading answers at once). The ceilings a lookup uses read the
// time under the lock, so a sample is never newer than it.
func TestServerClock_CeilingNeverMissesSamplesReadMeanwhile(t *testing.T) {
	var sc serverClock
	h := http.Header{"Date": {time.Now().UTC().Format(http.TimeFormat)}}
	now := time.Now()
	sc.observe(h, now, now, 2*time.Second)
	sc.observeUncached(h, now, now)
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for !stop.Load() {
				n := time.Now()
				h := http.Header{"Date": {n.UTC().Format(http.TimeFormat)}}
				sc.observe(h, n.Add(-time.Millisecond), n, 2*time.Second)
				sc.observeUncached(h, n.Add(-time.Millisecond), n)
			}
		})
	}
	misses := 0
	for range 20000 {
		if _, ok := sc.ceilingNow(time.Now); !ok {
			misses++
		}
		if _, ok := sc.freshCeilingNow(time.Now); !ok {
			misses++
		}
	}
	stop.Store(true)
	wg.Wait()
	if misses > 0 {
		t.Fatalf("%d of 40000 ceilings found no reading while answers kept coming", misses)
	}
}
