package pagpolar

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const raceTol = 2 * time.Second

// dated is a header whose Date is d.
func dated(d time.Time) http.Header {
	return http.Header{"Date": {d.UTC().Format(http.TimeFormat)}}
}

// answering starts 8 workers that record answers (answer(i), i the
// worker's number) until the returned stop is called; stop waits for them.
func answering(answer func(i int)) (stop func()) {
	var done atomic.Bool
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for !done.Load() {
				answer(i)
			}
		})
	}
	return func() { done.Store(true); wg.Wait() }
}

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
	sc.observeAnswer(dated(time.Now()), time.Now(), time.Now, raceTol, true)
	stop := answering(func(int) {
		sc.observeAnswer(dated(time.Now()), time.Now().Add(-time.Millisecond), time.Now, raceTol, true)
	})
	misses := 0
	for range 20000 {
		if _, ok := sc.ceilingNow(time.Now); !ok {
			misses++
		}
		if _, ok := sc.freshCeilingNow(time.Now); !ok {
			misses++
		}
	}
	stop()
	if misses > 0 {
		t.Fatalf("%d of 40000 ceilings found no reading while answers kept coming", misses)
	}
}

// Two answers read by two workers at once must be recorded in the order
// they were read. Timed before the estimator's lock, the older one could
// be recorded second and look read before the highest bound: whatever
// its Date, it replaced that bound — a stored copy's old Date (a cache
// that sends no Age) as the floor stored copies are told by, and a
// snapshot that copy made passed for current (a false "not found"). The
// client time is read under the lock (observeAnswer), and the floor never
// moves back.
func TestServerClock_AnswersReadAtOnceNeverDragTheFloorBack(t *testing.T) {
	var sc serverClock
	start := time.Now()
	sc.observeAnswer(dated(start), start, time.Now, raceTol, true)
	var k atomic.Int64
	stop := answering(func(i int) {
		// Fresh answers each a second ahead of the last (a clock running
		// fast, so that each raises the highest bound), and copies a
		// cache kept from the start.
		d := start
		if i%2 == 0 {
			d = start.Add(time.Duration(k.Add(1)) * time.Second)
		}
		sc.observeAnswer(dated(d), time.Now(), time.Now, raceTol, false)
	})
	back := 0
	var prev time.Time
	for range 200000 {
		_, floor, ok, _, _ := sc.proofBoundsNow(time.Now)
		if ok && floor.Before(prev.Add(-time.Second)) {
			back++
		}
		if ok {
			prev = floor
		}
	}
	stop()
	if back > 0 {
		t.Fatalf("the floor moved back %d times in 200000 readings: an older answer, recorded after a newer one, replaced its bound", back)
	}
}

// The floor and ceiling a read is judged by are taken at one client time
// under the lock (proofBoundsNow): taken at a time read before it, a
// bound recorded meanwhile looked read after "now" and gave no floor at
// all, and a snapshot read then could not tell a stored copy.
func TestServerClock_ProofBoundsNeverMissAnswersReadMeanwhile(t *testing.T) {
	var sc serverClock
	start := time.Now()
	sc.observeAnswer(dated(start), start, time.Now, raceTol, true)
	var k atomic.Int64
	stop := answering(func(int) {
		// Each answer a second ahead of the last (a clock running fast),
		// so that each one raises the highest bound.
		sc.observeAnswer(dated(start.Add(time.Duration(k.Add(1))*time.Second)), time.Now(), time.Now, raceTol, false)
	})
	misses := 0
	for range 200000 {
		if _, _, floorOK, _, ceilOK := sc.proofBoundsNow(time.Now); !floorOK || !ceilOK {
			misses++
		}
		if _, ok := sc.proofCeilingFrom(time.Now(), time.Now); !ok {
			misses++
		}
	}
	stop()
	if misses > 0 {
		t.Fatalf("%d of 400000 proof bounds found no reading while answers kept coming", misses)
	}
}

// After the client's clock steps back, every reading looks taken after
// "now". The Date a list must carry to prove it postdates a trust moment
// (proveBy) is then unknown, never the bound at the last reading's time:
// that bound is for a moment before the one it must prove (here an hour
// before), and a list made in between would pass for current.
func TestServerClock_ProofCeilingAfterTheClientClockSteppedBackIsNone(t *testing.T) {
	var sc serverClock
	read := time.Now()
	sc.observeAnswer(dated(read), read, func() time.Time { return read }, raceTol, true)
	back := read.Add(-time.Hour)
	if c, ok := sc.proofCeilingFrom(back, func() time.Time { return back }); ok {
		t.Fatalf("ceiling %s from a reading an hour after now: want none", c)
	}
	if _, ok := sc.proofCeilingFrom(read, func() time.Time { return read }); !ok {
		t.Fatal("no ceiling at the reading's own time")
	}
}
