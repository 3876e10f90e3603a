package webhook

import (
	"fmt"
	"testing"
	"time"
)

// The settle-later queue: an event waits once, is due 2 s after it was
// held, then twice as long each time up to 2 min, 10 offers in all; a full
// queue drops its oldest event.
func TestSettleLaterQueue(t *testing.T) {
	q := newSettleLater()
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	if d := q.add("ev1", []byte("body"), t0); d != "" {
		t.Fatalf("dropped %q from an empty queue", d)
	}
	q.add("ev1", []byte("body"), t0) // a redelivery while it waits
	if q.len() != 1 {
		t.Fatalf("%d queued, want 1 (the same event once)", q.len())
	}
	if got, next := q.due(t0.Add(time.Second)); len(got) != 0 || !next.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("due after 1 s: %d, next %v", len(got), next)
	}
	now := t0.Add(2 * time.Second)
	var waits []time.Duration
	for {
		got, _ := q.due(now)
		if len(got) != 1 {
			t.Fatalf("at %v: %d due, want 1", now.Sub(t0), len(got))
		}
		if string(got[0].raw) != "body" {
			t.Fatalf("raw %q", got[0].raw)
		}
		if !q.again(got[0], now) {
			break
		}
		_, next := q.due(now)
		waits = append(waits, next.Sub(now))
		now = next
	}
	want := []time.Duration{2, 4, 8, 16, 32, 64, 120, 120, 120}
	if len(waits) != len(want) {
		t.Fatalf("waits %v, want %v seconds (10 offers)", waits, want)
	}
	for i := range want {
		if waits[i] != want[i]*time.Second {
			t.Fatalf("waits %v, want %v seconds", waits, want)
		}
	}
	if q.len() != 0 {
		t.Fatalf("%d left after the last offer", q.len())
	}
	for i := range maxSettleLater {
		q.add(fmt.Sprint("k", i), nil, t0)
	}
	if d := q.add("one-more", nil, t0); d != "k0" || q.len() != maxSettleLater {
		t.Fatalf("full queue dropped %q (len %d), want k0", d, q.len())
	}
}
