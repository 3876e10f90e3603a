package pagpolar

import (
	"net/http"
	"testing"
	"time"
)

func dateHeader(t time.Time) http.Header {
	return http.Header{"Date": {t.UTC().Format(http.TimeFormat)}}
}

// A step of the API's Date clock that outlasts the samples it was checked
// against: the stepped answers are kept out while earlier ones are recent
// (so a fresh answer checked against an earlier floor may validate again),
// and once those have aged out the estimator starts afresh, unvalidated —
// it must never hand a first send a stepped floor marked usable. Before
// this (review of the unseen-shape fixes), a validation earned against a
// pre-step floor carried over to the stepped samples: a floor an hour late
// with FloorOK, and the charge's own sale excluded.
func TestServerClock_StepOutlastingTheSamples(t *testing.T) {
	var sc serverClock
	tol := 2 * time.Second
	now := t0
	for i := range 5 {
		at := now.Add(time.Duration(i) * time.Second)
		sc.observe(dateHeader(at), at, at, tol)
	}
	now = now.Add(5 * time.Second)
	sc.check(now.Add(3*time.Second), time.Millisecond, now, time.Time{}, tol)
	if _, ok := sc.usableFloor(now); !ok {
		t.Fatal("a consistent own effect must validate the bound")
	}
	// The Date clock jumps an hour ahead; creation times do not.
	for i := range 5 {
		at := now.Add(time.Duration(i) * time.Second)
		sc.observe(dateHeader(at.Add(time.Hour)), at, at, tol)
	}
	if _, ok := sc.usableFloor(now.Add(5 * time.Second)); ok {
		t.Fatal("a stepped Date must withdraw the validation")
	}
	if f, _ := sc.floor(now.Add(5 * time.Second)); f.After(now.Add(10 * time.Second)) {
		t.Fatalf("stepped samples moved the floor to %v", f)
	}
	// A fresh effect checked against a floor from before the step may
	// validate again: that floor is consistent with the creation times.
	now = now.Add(6 * time.Second)
	sc.check(now.Add(time.Second), time.Millisecond, now.Add(-time.Second), time.Time{}, tol)
	// The earlier samples age out; the stepped clock's answers go on.
	now = now.Add(serverClockMaxAge + time.Minute)
	sc.observe(dateHeader(now.Add(time.Hour)), now, now, tol)
	if f, usable := sc.usableFloor(now.Add(time.Second)); usable {
		t.Fatalf("after the earlier samples aged out the stepped floor %v is marked usable", f)
	}
}

// TestExcludedByTime_MarginCoversWhatTheDetectorMisses: an effect made
// during a step back the detector cannot see (under 1 s + tolerance), or
// on a second host behind the first by as much, is never excluded.
func TestExcludedByTime_MarginCoversWhatTheDetectorMisses(t *testing.T) {
	floor := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	tol := 2 * time.Second
	for _, c := range []struct {
		name    string
		before  time.Duration
		res     time.Duration
		exclude bool
	}{
		{"a 2.9 s step back, under the step threshold", 2900 * time.Millisecond, time.Microsecond, false},
		{"a step back at the threshold, on a host behind by as much", 6 * time.Second, time.Microsecond, false},
		{"just inside the margin, in whole seconds", 8 * time.Second, time.Second, false},
		{"well before the floor", 30 * time.Second, time.Microsecond, true},
		{"after the floor", -time.Second, time.Microsecond, false},
	} {
		if got := excludedByTime(floor.Add(-c.before), c.res, floor, tol); got != c.exclude {
			t.Errorf("%s: excluded %v, want %v", c.name, got, c.exclude)
		}
	}
}

// TestFloorHolds_ReCheckedByTheReader: a floor recorded as valid holds for
// a reader only while its own reading of the API's clock is not behind it.
func TestFloorHolds_ReCheckedByTheReader(t *testing.T) {
	floor := time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC)
	tol := 2 * time.Second
	for _, c := range []struct {
		name    string
		ceiling time.Time
		ok      bool
		want    bool
	}{
		{"the API's clock now past the floor", floor.Add(time.Minute), true, true},
		{"within the detector's blind spot", floor.Add(-2 * time.Second), true, true},
		{"stepped back an hour since", floor.Add(-time.Hour), true, false},
		{"stepped back past the threshold", floor.Add(-4 * time.Second), true, false},
		{"no reading of the API's clock", time.Time{}, false, false},
	} {
		if got := floorHolds(floor, c.ceiling, c.ok, tol); got != c.want {
			t.Errorf("%s: holds %v, want %v", c.name, got, c.want)
		}
	}
}
