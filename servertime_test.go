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
