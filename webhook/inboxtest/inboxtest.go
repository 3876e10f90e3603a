package inboxtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/webhook"
)

// Factory returns an empty store for one subtest and arranges its cleanup.
type Factory func(t *testing.T) webhook.Store

const (
	// shortTTL is a lease meant to expire during the test.
	shortTTL = 300 * time.Millisecond
	// longTTL is a lease that must not expire during the test.
	longTTL = time.Minute
	// waitBound caps every wait for the store to report something.
	waitBound = 15 * time.Second
	// clockTolerance bounds the distance between the store's clock and this
	// process's (same host, or a well-synchronised one). It catches unit and
	// time-zone mistakes (seconds vs microseconds, local vs UTC).
	clockTolerance = 2 * time.Second
	// precision is the coarsest time precision a store may keep.
	precision = time.Millisecond
	// skew is how far the clocks of the skewed Inboxes are off.
	skew = 10 * time.Minute
)

// Run runs the suite, each case on a fresh store from newStore.
func Run(t *testing.T, newStore Factory) {
	cases := []struct {
		name string
		fn   func(t *testing.T, s webhook.Store)
	}{
		{"InsertNew", testInsertNew},
		{"InsertDuplicate", testInsertDuplicate},
		{"InsertConcurrent", testInsertConcurrent},
		{"GetMissing", testGetMissing},
		{"ClaimLifecycle", testClaimLifecycle},
		{"ClaimWrongState", testClaimWrongState},
		{"ClaimIgnoresBackoff", testClaimIgnoresBackoff},
		{"EntityExclusion", testEntityExclusion},
		{"ConcurrentClaims", testConcurrentClaims},
		{"Renew", testRenew},
		{"Complete", testComplete},
		{"CompleteNotAttempted", testNotAttempted},
		{"Due", testDue},
		{"List", testList},
		{"ListOnceUnderStateChanges", testListSnapshot},
		{"Retry", testRetry},
		{"DeleteExpired", testDeleteExpired},
		{"Payload", testPayload},
		{"CancelledContext", testCancelled},
		{"SkewedClockDoesNotStealLiveLease", testSkewAheadNoSteal},
		{"SkewedClockLeaseExpiresOnTime", testSkewLeaseExpires},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, newStore(t)) })
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func newRec(key, entity string) webhook.Record {
	return webhook.Record{
		Key: key, Event: "TRANSACTION_PAID", Entity: entity, EnvelopeID: "env-" + key,
		Payload: fmt.Appendf(nil, `{"id":"env-%s","event":"TRANSACTION_PAID","data":{"transaction":{"id":%q}}}`, key, entity),
	}
}

func insert(t *testing.T, s webhook.Store, key, entity string) webhook.Record {
	t.Helper()
	r, ins, err := s.Insert(ctx(t), newRec(key, entity))
	if err != nil || !ins {
		t.Fatalf("Insert(%s) = inserted %v, %v; want a new record", key, ins, err)
	}
	return r
}

func claimTTL(t *testing.T, s webhook.Store, key string, ttl time.Duration) webhook.Record {
	t.Helper()
	r, err := s.Claim(ctx(t), key, "owner-a", ttl)
	if err != nil {
		t.Fatalf("Claim(%s): %v", key, err)
	}
	return r
}

func claim(t *testing.T, s webhook.Store, key string) webhook.Record {
	t.Helper()
	return claimTTL(t, s, key, longTTL)
}

func complete(t *testing.T, s webhook.Store, r webhook.Record, out webhook.Outcome) webhook.Record {
	t.Helper()
	got, err := s.Complete(ctx(t), r.Key, r.LeaseToken, out)
	if err != nil {
		t.Fatalf("Complete(%s, %s): %v", r.Key, out.State, err)
	}
	return got
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: error %v, want %v", what, err, want)
	}
}

func wantTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// wantNear checks a time the store set against this process's clock, read
// just before (lo) and after (hi) the call.
func wantNear(t *testing.T, what string, got, lo, hi time.Time) {
	t.Helper()
	if got.Before(lo.Add(-clockTolerance)) || got.After(hi.Add(clockTolerance)) {
		t.Errorf("%s = %v, want within %v of [%v, %v] (the store's clock, not the caller's)", what, got, clockTolerance, lo, hi)
	}
}

// tick waits until a store keeping millisecond precision has moved on to a
// later timestamp than anything it set before.
func tick() { time.Sleep(2 * precision) }

// waitDue waits until the store reports every key due by its own clock.
func waitDue(t *testing.T, s webhook.Store, keys ...string) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for {
		rs, err := s.Due(ctx(t), 1000)
		if err != nil {
			t.Fatalf("Due: %v", err)
		}
		got := map[string]bool{}
		for _, r := range rs {
			got[r.Key] = true
		}
		all := true
		for _, k := range keys {
			all = all && got[k]
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v not all due after %v (due: %s)", keys, waitBound, keysOf(rs))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
