// Package inboxtest is the conformance suite every webhook.Store passes
// unchanged: the memory store, the SQL stores (SQLite and PostgreSQL) and
// the Redis store.
//
// Stores keep time by their own clock (database now, Redis TIME), so tests
// that need a lease to expire use short real TTLs and wait, with a bound,
// until the store itself reports it expired (Due lists it); times the store
// sets are compared with this process's clock within a tolerance, and with
// each other exactly. Stores must keep at least millisecond precision.
//
// Two cases run Inboxes on the store whose clocks are ten minutes off in
// either direction: one must not take over a live lease, and a lease taken
// by a process whose clock is ahead must still expire on time.
package inboxtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
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

func testInsertNew(t *testing.T, s webhook.Store) {
	in := newRec("TRANSACTION_PAID:s1", "sale:s1")
	lo := time.Now()
	got, ins, err := s.Insert(ctx(t), in)
	hi := time.Now()
	if err != nil || !ins {
		t.Fatalf("Insert = %v, %v; want inserted", ins, err)
	}
	for _, r := range []webhook.Record{got, mustGet(t, s, in.Key)} {
		if r.Key != in.Key || r.Event != in.Event || r.Entity != in.Entity || r.EnvelopeID != in.EnvelopeID || !bytes.Equal(r.Payload, in.Payload) {
			t.Errorf("stored identity fields = %+v, want those of %+v", r, in)
		}
		if r.State != webhook.StateReceived || r.Attempts != 0 || r.Deliveries != 1 || r.LastError != "" || r.LeaseOwner != "" || r.LeaseToken != 0 {
			t.Errorf("stored record = state %s attempts %d deliveries %d error %q owner %q token %d; want received, 0, 1, none",
				r.State, r.Attempts, r.Deliveries, r.LastError, r.LeaseOwner, r.LeaseToken)
		}
		wantNear(t, "ReceivedAt", r.ReceivedAt, lo, hi)
		wantTime(t, "NextAttemptAt", r.NextAttemptAt, r.ReceivedAt)
		wantTime(t, "UpdatedAt", r.UpdatedAt, r.ReceivedAt)
	}
}

func mustGet(t *testing.T, s webhook.Store, key string) webhook.Record {
	t.Helper()
	r, err := s.Get(ctx(t), key)
	if err != nil {
		t.Fatalf("Get(%s): %v", key, err)
	}
	return r
}

func testInsertDuplicate(t *testing.T, s webhook.Store) {
	first := insert(t, s, "k", "sale:1")
	dup := newRec("k", "sale:other")
	dup.Payload, dup.EnvelopeID, dup.Event = []byte(`{"other":true}`), "env-2", "TRANSACTION_CREATED"
	tick()
	got, ins, err := s.Insert(ctx(t), dup)
	if err != nil || ins {
		t.Fatalf("duplicate Insert = inserted %v, %v; want existing record", ins, err)
	}
	if got.Deliveries != 2 || !bytes.Equal(got.Payload, first.Payload) || got.EnvelopeID != first.EnvelopeID || got.Entity != first.Entity || got.Event != first.Event {
		t.Errorf("after duplicate: %+v; want the first record with Deliveries 2", got)
	}
	wantTime(t, "UpdatedAt after duplicate", got.UpdatedAt, first.UpdatedAt)
	if g := mustGet(t, s, "k"); g.Deliveries != 2 {
		t.Errorf("Get after duplicate: Deliveries %d, want 2", g.Deliveries)
	}
	// A duplicate of a processed record changes nothing but the count.
	r := claim(t, s, "k")
	complete(t, s, r, webhook.Outcome{State: webhook.StateProcessed})
	got, ins, err = s.Insert(ctx(t), dup)
	if err != nil || ins || got.State != webhook.StateProcessed || got.Deliveries != 3 {
		t.Errorf("duplicate of processed = %s deliveries %d inserted %v %v; want processed, 3, false", got.State, got.Deliveries, ins, err)
	}
}

func testInsertConcurrent(t *testing.T, s webhook.Store) {
	const n = 16
	var wg sync.WaitGroup
	var mu sync.Mutex
	inserted := 0
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			_, ins, err := s.Insert(ctx(t), newRec("k", "sale:1"))
			if err != nil {
				errs <- err
				return
			}
			if ins {
				mu.Lock()
				inserted++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent Insert: %v", err)
	}
	if inserted != 1 {
		t.Errorf("%d concurrent Inserts of one key inserted %d times, want 1", n, inserted)
	}
	if r := mustGet(t, s, "k"); r.Deliveries != n {
		t.Errorf("Deliveries = %d, want %d", r.Deliveries, n)
	}
}

func testGetMissing(t *testing.T, s webhook.Store) {
	_, err := s.Get(ctx(t), "nope")
	wantErr(t, "Get(missing)", err, webhook.ErrNotFound)
}

func testClaimLifecycle(t *testing.T, s webhook.Store) {
	insert(t, s, "k", "sale:1")
	lo := time.Now()
	r := claim(t, s, "k")
	hi := time.Now()
	if r.State != webhook.StateProcessing || r.Attempts != 1 || r.LeaseOwner != "owner-a" || r.LeaseToken != 1 {
		t.Errorf("claimed = state %s attempts %d owner %q token %d; want processing 1 owner-a 1", r.State, r.Attempts, r.LeaseOwner, r.LeaseToken)
	}
	wantNear(t, "UpdatedAt", r.UpdatedAt, lo, hi)
	wantTime(t, "LeaseExpiresAt", r.LeaseExpiresAt, r.UpdatedAt.Add(longTTL))
	if g := mustGet(t, s, "k"); g.State != webhook.StateProcessing || g.LeaseToken != 1 {
		t.Errorf("Get after Claim = %s token %d", g.State, g.LeaseToken)
	}
	cur, err := s.Claim(ctx(t), "k", "owner-b", longTTL)
	wantErr(t, "Claim by another owner under a live lease", err, webhook.ErrLeaseHeld)
	if cur.LeaseToken != 1 || cur.LeaseOwner != "owner-a" {
		t.Errorf("refused Claim returned lease (%q, %d), want the current (owner-a, 1)", cur.LeaseOwner, cur.LeaseToken)
	}
	_, err = s.Claim(ctx(t), "k", "owner-a", longTTL)
	wantErr(t, "Claim by the same owner under a live lease", err, webhook.ErrLeaseHeld)

	// Left by a crash: the lease expires by the store's clock and anyone may
	// take it over then, and not before.
	insert(t, s, "k2", "sale:2")
	old := claimTTL(t, s, "k2", shortTTL)
	deadline := time.Now().Add(waitBound)
	var r2 webhook.Record
	for {
		r2, err = s.Claim(ctx(t), "k2", "owner-b", longTTL)
		if err == nil {
			break
		}
		wantErr(t, "Claim before the lease expired", err, webhook.ErrLeaseHeld)
		if time.Now().After(deadline) {
			t.Fatalf("lease of %v not taken over %v after it was granted", shortTTL, waitBound)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r2.Attempts != 2 || r2.LeaseToken != 2 || r2.LeaseOwner != "owner-b" {
		t.Errorf("reclaimed = attempts %d token %d owner %q; want 2 2 owner-b", r2.Attempts, r2.LeaseToken, r2.LeaseOwner)
	}
	if takenAt := r2.LeaseExpiresAt.Add(-longTTL); takenAt.Before(old.LeaseExpiresAt) {
		t.Errorf("lease taken over at %v by the store's clock, before it expired at %v", takenAt, old.LeaseExpiresAt)
	}
}

func testClaimWrongState(t *testing.T, s webhook.Store) {
	_, err := s.Claim(ctx(t), "missing", "o", longTTL)
	wantErr(t, "Claim(missing)", err, webhook.ErrNotFound)
	for _, st := range []webhook.State{webhook.StateProcessed, webhook.StateDead} {
		key := "k-" + string(st)
		insert(t, s, key, "sale:"+key)
		complete(t, s, claim(t, s, key), webhook.Outcome{State: st, Error: "x"})
		_, err := s.Claim(ctx(t), key, "o", longTTL)
		wantErr(t, "Claim("+string(st)+")", err, webhook.ErrWrongState)
	}
}

func testClaimIgnoresBackoff(t *testing.T, s webhook.Store) {
	insert(t, s, "k", "sale:1")
	complete(t, s, claim(t, s, "k"), webhook.Outcome{State: webhook.StateError, Error: "boom", RetryAfter: time.Hour})
	r := claim(t, s, "k") // a duplicate delivery resumes it early
	if r.Attempts != 2 {
		t.Errorf("Attempts = %d, want 2", r.Attempts)
	}
}

func testEntityExclusion(t *testing.T, s webhook.Store) {
	insert(t, s, "a", "sale:1")
	insert(t, s, "b", "sale:1")
	insert(t, s, "c", "sale:2")
	insert(t, s, "d", "sale:1")
	a := claim(t, s, "a")
	_, err := s.Claim(ctx(t), "b", "owner-b", longTTL)
	wantErr(t, "Claim of another event of a busy entity", err, webhook.ErrEntityBusy)
	if g := mustGet(t, s, "b"); g.State != webhook.StateReceived || g.Attempts != 0 {
		t.Errorf("refused Claim changed the record: %s attempts %d", g.State, g.Attempts)
	}
	claim(t, s, "c") // another entity is free
	complete(t, s, a, webhook.Outcome{State: webhook.StateProcessed})
	claimTTL(t, s, "b", shortTTL)
	// b's lease expires (a crash): d may run then, and not before.
	deadline := time.Now().Add(waitBound)
	for {
		_, err := s.Claim(ctx(t), "d", "owner-b", longTTL)
		if err == nil {
			break
		}
		wantErr(t, "Claim while the entity's lease is live", err, webhook.ErrEntityBusy)
		if time.Now().After(deadline) {
			t.Fatalf("d not claimable %v after b's lease of %v", waitBound, shortTTL)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// b, now stale, cannot be reclaimed while d is live.
	_, err = s.Claim(ctx(t), "b", "owner-c", longTTL)
	wantErr(t, "Claim of a stale event while its entity is busy", err, webhook.ErrEntityBusy)
}

func testConcurrentClaims(t *testing.T, s webhook.Store) {
	const n = 12
	insert(t, s, "k", "sale:1")
	if got := raceClaims(t, s, n, func(i int) string { return "k" }); got != 1 {
		t.Errorf("%d concurrent Claims of one event: %d succeeded, want 1", n, got)
	}
	for i := range n {
		insert(t, s, fmt.Sprintf("e%d", i), "subscription:9")
	}
	if got := raceClaims(t, s, n, func(i int) string { return fmt.Sprintf("e%d", i) }); got != 1 {
		t.Errorf("%d concurrent Claims of one entity's events: %d succeeded, want 1", n, got)
	}
}

func raceClaims(t *testing.T, s webhook.Store, n int, key func(int) string) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			_, err := s.Claim(ctx(t), key(i), fmt.Sprintf("owner-%d", i), longTTL)
			switch {
			case err == nil:
				mu.Lock()
				ok++
				mu.Unlock()
			case errors.Is(err, webhook.ErrLeaseHeld), errors.Is(err, webhook.ErrEntityBusy):
			default:
				t.Errorf("Claim(%s): %v", key(i), err)
			}
		}(i)
	}
	close(start)
	wg.Wait()
	return ok
}

func testRenew(t *testing.T, s webhook.Store) {
	_, err := s.Renew(ctx(t), "missing", 1, longTTL)
	wantErr(t, "Renew(missing)", err, webhook.ErrNotFound)
	insert(t, s, "k", "sale:1")
	r := claim(t, s, "k")
	tick()
	lo := time.Now()
	got, err := s.Renew(ctx(t), "k", r.LeaseToken, 2*longTTL)
	hi := time.Now()
	if err != nil {
		t.Fatalf("Renew: %v", err)
	}
	wantNear(t, "LeaseExpiresAt after Renew", got.LeaseExpiresAt, lo.Add(2*longTTL), hi.Add(2*longTTL))
	if !got.LeaseExpiresAt.After(r.LeaseExpiresAt.Add(longTTL / 2)) {
		t.Errorf("Renew for %v moved the expiry from %v to %v", 2*longTTL, r.LeaseExpiresAt, got.LeaseExpiresAt)
	}
	if got.LeaseToken != r.LeaseToken || got.Attempts != r.Attempts || !got.UpdatedAt.Equal(r.UpdatedAt) {
		t.Errorf("Renew changed more than the expiry: %+v (was %+v)", got, r)
	}
	_, err = s.Renew(ctx(t), "k", r.LeaseToken+1, longTTL)
	wantErr(t, "Renew with a wrong token", err, webhook.ErrLeaseLost)

	// Expired by the store's clock: lost, whatever the caller thinks.
	insert(t, s, "k2", "sale:2")
	r2 := claimTTL(t, s, "k2", shortTTL)
	waitDue(t, s, "k2")
	_, err = s.Renew(ctx(t), "k2", r2.LeaseToken, longTTL)
	wantErr(t, "Renew of an expired lease", err, webhook.ErrLeaseLost)
	// The expired lease is taken over: the old token is fenced off.
	r3, err := s.Claim(ctx(t), "k2", "owner-b", longTTL)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Renew(ctx(t), "k2", r2.LeaseToken, longTTL)
	wantErr(t, "Renew with a fenced token", err, webhook.ErrLeaseLost)
	complete(t, s, r3, webhook.Outcome{State: webhook.StateProcessed})
	_, err = s.Renew(ctx(t), "k2", r3.LeaseToken, longTTL)
	wantErr(t, "Renew after Complete", err, webhook.ErrLeaseLost)
}

func testComplete(t *testing.T, s webhook.Store) {
	_, err := s.Complete(ctx(t), "missing", 1, webhook.Outcome{State: webhook.StateProcessed})
	wantErr(t, "Complete(missing)", err, webhook.ErrNotFound)
	insert(t, s, "k", "sale:1")
	r := claim(t, s, "k")
	for _, bad := range []webhook.Outcome{
		{State: webhook.StateProcessing},
		{State: webhook.StateError, NotAttempted: true},
		{State: webhook.StateError, RetryAfter: -time.Second},
	} {
		if _, err := s.Complete(ctx(t), "k", r.LeaseToken, bad); err == nil {
			t.Errorf("Complete with outcome %+v succeeded, want an error", bad)
		}
	}
	if g := mustGet(t, s, "k"); g.State != webhook.StateProcessing || g.LeaseToken != r.LeaseToken {
		t.Fatalf("a refused Complete changed the record: %+v", g)
	}
	lo := time.Now()
	got := complete(t, s, r, webhook.Outcome{State: webhook.StateError, Error: "db down", RetryAfter: 10 * time.Minute})
	hi := time.Now()
	if got.State != webhook.StateError || got.LastError != "db down" || got.LeaseOwner != "" || got.LeaseToken != r.LeaseToken || got.Attempts != 1 {
		t.Errorf("after Complete(error) = %+v", got)
	}
	wantNear(t, "UpdatedAt", got.UpdatedAt, lo, hi)
	wantTime(t, "NextAttemptAt", got.NextAttemptAt, got.UpdatedAt.Add(10*time.Minute))
	_, err = s.Complete(ctx(t), "k", r.LeaseToken, webhook.Outcome{State: webhook.StateProcessed})
	wantErr(t, "second Complete", err, webhook.ErrLeaseLost)

	// Expired but not taken over: the outcome still counts.
	r = claimTTL(t, s, "k", shortTTL)
	waitDue(t, s, "k")
	got, err = s.Complete(ctx(t), "k", r.LeaseToken, webhook.Outcome{State: webhook.StateProcessed})
	if err != nil {
		t.Fatalf("Complete after the lease expired, nobody else claiming: %v", err)
	}
	if got.State != webhook.StateProcessed || got.LastError != "db down" || !got.NextAttemptAt.IsZero() {
		t.Errorf("processed = %s error %q next %v; want processed keeping the last error, no next attempt", got.State, got.LastError, got.NextAttemptAt)
	}
	if g := mustGet(t, s, "k"); g.State != webhook.StateProcessed || g.Attempts != 2 {
		t.Errorf("Get = %s attempts %d", g.State, g.Attempts)
	}

	// Taken over: the first worker's outcome is refused.
	insert(t, s, "k2", "sale:2")
	old := claimTTL(t, s, "k2", shortTTL)
	waitDue(t, s, "k2")
	nw, err := s.Claim(ctx(t), "k2", "owner-b", longTTL)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Complete(ctx(t), "k2", old.LeaseToken, webhook.Outcome{State: webhook.StateProcessed})
	wantErr(t, "Complete with a fenced token", err, webhook.ErrLeaseLost)
	got = complete(t, s, nw, webhook.Outcome{State: webhook.StateReceived, Error: "shutdown"})
	if got.State != webhook.StateReceived || got.Attempts != 2 {
		t.Errorf("handed back = %s attempts %d, want received 2 (a hand-back without NotAttempted counts)", got.State, got.Attempts)
	}
	wantTime(t, "NextAttemptAt of a hand-back", got.NextAttemptAt, got.UpdatedAt)
}

// A hand-back that did not run (a shutdown) gives its attempt back, however
// often it happens; a fenced one changes nothing.
func testNotAttempted(t *testing.T, s webhook.Store) {
	insert(t, s, "k", "sale:1")
	for i := 1; i <= 3; i++ {
		r := claim(t, s, "k")
		if r.Attempts != 1 || r.LeaseToken != int64(i) {
			t.Fatalf("claim %d: attempts %d token %d, want 1 and %d", i, r.Attempts, r.LeaseToken, i)
		}
		got := complete(t, s, r, webhook.Outcome{State: webhook.StateReceived, NotAttempted: true, Error: "interrupted by shutdown"})
		if got.State != webhook.StateReceived || got.Attempts != 0 || got.LeaseOwner != "" || got.LeaseToken != int64(i) {
			t.Fatalf("hand-back %d = %s attempts %d owner %q token %d; want received, 0 attempts, no owner, token %d",
				i, got.State, got.Attempts, got.LeaseOwner, got.LeaseToken, i)
		}
		wantTime(t, "NextAttemptAt of a hand-back", got.NextAttemptAt, got.UpdatedAt)
		if g := mustGet(t, s, "k"); g.Attempts != 0 || g.State != webhook.StateReceived {
			t.Fatalf("stored after hand-back %d: %s attempts %d", i, g.State, g.Attempts)
		}
	}
	if rs, err := s.Due(ctx(t), 10); err != nil || keysOf(rs) != "k" {
		t.Fatalf("handed-back event not due at once: %s, %v", keysOf(rs), err)
	}
	r := claim(t, s, "k")
	if r.Attempts != 1 {
		t.Errorf("attempts after three hand-backs and a claim = %d, want 1", r.Attempts)
	}
	if got := complete(t, s, r, webhook.Outcome{State: webhook.StateProcessed}); got.Attempts != 1 {
		t.Errorf("processed with %d attempts, want 1", got.Attempts)
	}

	// A fenced hand-back gives nothing back.
	insert(t, s, "k2", "sale:2")
	old := claimTTL(t, s, "k2", shortTTL)
	waitDue(t, s, "k2")
	if _, err := s.Claim(ctx(t), "k2", "owner-b", longTTL); err != nil {
		t.Fatal(err)
	}
	_, err := s.Complete(ctx(t), "k2", old.LeaseToken, webhook.Outcome{State: webhook.StateReceived, NotAttempted: true})
	wantErr(t, "fenced hand-back", err, webhook.ErrLeaseLost)
	if g := mustGet(t, s, "k2"); g.Attempts != 2 || g.State != webhook.StateProcessing || g.LeaseOwner != "owner-b" {
		t.Errorf("after a fenced hand-back: %s attempts %d owner %q; want processing 2 owner-b", g.State, g.Attempts, g.LeaseOwner)
	}
}

func keysOf(rs []webhook.Record) string {
	var ks []string
	for _, r := range rs {
		ks = append(ks, r.Key)
	}
	return strings.Join(ks, ",")
}

// Keys are chosen so that their order agrees with the order in which the
// store's clock stamps them: a store with millisecond precision may give
// two of them the same time, and ties go by key.
func testDue(t *testing.T, s webhook.Store) {
	insert(t, s, "a-late", "sale:0")
	insert(t, s, "r1", "sale:1")
	insert(t, s, "r2", "sale:2")
	for i, k := range []string{"err", "proc", "done", "dead"} {
		insert(t, s, k, fmt.Sprintf("sale:%d", 3+i))
	}
	claim(t, s, "a-late")
	complete(t, s, claim(t, s, "err"), webhook.Outcome{State: webhook.StateError, Error: "x", RetryAfter: time.Hour})
	claim(t, s, "proc") // a live lease
	complete(t, s, claim(t, s, "done"), webhook.Outcome{State: webhook.StateProcessed})
	complete(t, s, claim(t, s, "dead"), webhook.Outcome{State: webhook.StateDead, Error: "x"})

	due := func(limit int) string {
		t.Helper()
		rs, err := s.Due(ctx(t), limit)
		if err != nil {
			t.Fatalf("Due: %v", err)
		}
		return keysOf(rs)
	}
	if got := due(10); got != "r1,r2" {
		t.Errorf("Due = %s, want r1,r2", got)
	}
	// x1-exp's lease expires, then x2-soon's backoff ends, then a-late's:
	// the order is the time each became due, not the time received.
	insert(t, s, "x1-exp", "sale:8")
	claimTTL(t, s, "x1-exp", shortTTL)
	insert(t, s, "x2-soon", "sale:9")
	complete(t, s, claim(t, s, "x2-soon"), webhook.Outcome{State: webhook.StateError, RetryAfter: shortTTL})
	complete(t, s, mustGet(t, s, "a-late"), webhook.Outcome{State: webhook.StateError, RetryAfter: 3 * shortTTL})
	waitDue(t, s, "a-late", "x1-exp", "x2-soon")
	if got := due(10); got != "r1,r2,x1-exp,x2-soon,a-late" {
		t.Errorf("Due = %s, want r1,r2,x1-exp,x2-soon,a-late (err's backoff and proc's lease have not ended)", got)
	}
	if got := due(3); got != "r1,r2,x1-exp" {
		t.Errorf("Due(limit 3) = %s, want r1,r2,x1-exp", got)
	}
}

func testList(t *testing.T, s webhook.Store) {
	insert(t, s, "k3", "sale:3")
	insert(t, s, "k1", "sale:1")
	insert(t, s, "k2", "sale:2")
	complete(t, s, claim(t, s, "k2"), webhook.Outcome{State: webhook.StateDead, Error: "x"})
	tick()
	k3 := complete(t, s, claim(t, s, "k3"), webhook.Outcome{State: webhook.StateDead, Error: "x"})
	list := func(f webhook.Filter) string {
		t.Helper()
		rs, err := s.List(ctx(t), f)
		if err != nil {
			t.Fatalf("List(%+v): %v", f, err)
		}
		return keysOf(rs)
	}
	if got := list(webhook.Filter{}); got != "k1,k2,k3" {
		t.Errorf("List(all) = %s, want k1,k2,k3 (oldest UpdatedAt first)", got)
	}
	if got := list(webhook.Filter{States: []webhook.State{webhook.StateDead}}); got != "k2,k3" {
		t.Errorf("List(dead) = %s, want k2,k3", got)
	}
	if got := list(webhook.Filter{States: []webhook.State{webhook.StateReceived, webhook.StateProcessed}}); got != "k1" {
		t.Errorf("List(received, processed) = %s, want k1", got)
	}
	if got := list(webhook.Filter{UpdatedBefore: k3.UpdatedAt}); got != "k1,k2" {
		t.Errorf("List(updated before k3's last change) = %s, want k1,k2", got)
	}
	if got := list(webhook.Filter{Limit: 2}); got != "k1,k2" {
		t.Errorf("List(limit 2) = %s, want k1,k2", got)
	}
	rs, err := s.List(ctx(t), webhook.Filter{States: []webhook.State{webhook.StateDead}, Limit: 1})
	if err != nil || len(rs) != 1 || rs[0].LastError != "x" || rs[0].Attempts != 1 || len(rs[0].Payload) == 0 {
		t.Errorf("List returns full records: %+v, %v", rs, err)
	}
}

// A List that read each state's index on its
// own listed an event twice (or missed it) when it changed state between
// two reads. Events move through every state while List runs; each List
// must return each event exactly once.
func testListSnapshot(t *testing.T, s webhook.Store) {
	const n, churners = 24, 3
	var all []string
	for i := range n {
		k := fmt.Sprintf("ev%02d", i)
		insert(t, s, k, "sale:"+k)
		all = append(all, k)
	}
	stop := make(chan struct{})
	var moves atomic.Int64
	var wg sync.WaitGroup
	for c := range churners {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := all[(i*churners+c)%n] // each churner owns its keys
				r, err := s.Claim(ctx(t), k, fmt.Sprintf("churner-%d", c), longTTL)
				if err != nil {
					t.Errorf("churn Claim(%s): %v", k, err)
					return
				}
				outs := []webhook.Outcome{
					{State: webhook.StateError, Error: "churn"},
					{State: webhook.StateReceived, NotAttempted: true},
					{State: webhook.StateDead, Error: "churn"},
				}
				out := outs[i%len(outs)]
				if _, err := s.Complete(ctx(t), k, r.LeaseToken, out); err != nil {
					t.Errorf("churn Complete(%s): %v", k, err)
					return
				}
				if out.State == webhook.StateDead {
					if _, err := s.Retry(ctx(t), k); err != nil {
						t.Errorf("churn Retry(%s): %v", k, err)
						return
					}
				}
				moves.Add(1)
			}
		})
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()
	// At least 400 Lists and 20 state changes among them (a loaded machine
	// may starve the churners for a while), within 30 s.
	deadline := time.Now().Add(30 * time.Second)
	lists := 0
	filters := []webhook.Filter{
		{Limit: 1000},
		{States: []webhook.State{webhook.StateReceived, webhook.StateProcessing, webhook.StateError, webhook.StateDead}, Limit: 1000},
	}
	for (lists < 400 || moves.Load() < 20) && time.Now().Before(deadline) {
		f := filters[lists%len(filters)]
		rs, err := s.List(ctx(t), f)
		if err != nil {
			t.Fatalf("List under churn: %v", err)
		}
		lists++
		seen := map[string]int{}
		for _, r := range rs {
			seen[r.Key]++
		}
		for _, k := range all {
			if seen[k] != 1 {
				t.Fatalf("List %d (after %d state changes) listed %s %d times, want once: %s", lists, moves.Load(), k, seen[k], keysOf(rs))
			}
		}
		if len(rs) != n {
			t.Fatalf("List %d returned %d records, want %d", lists, len(rs), n)
		}
		for i := 1; i < len(rs); i++ {
			a, b := rs[i-1], rs[i]
			if b.UpdatedAt.Before(a.UpdatedAt) || b.UpdatedAt.Equal(a.UpdatedAt) && b.Key < a.Key {
				t.Fatalf("List %d out of order at %d: %s (%v) before %s (%v)", lists, i, a.Key, a.UpdatedAt, b.Key, b.UpdatedAt)
			}
		}
	}
	if moves.Load() == 0 {
		t.Fatalf("no state changed during %d Lists: the test proved nothing", lists)
	}
}

func testRetry(t *testing.T, s webhook.Store) {
	_, err := s.Retry(ctx(t), "missing")
	wantErr(t, "Retry(missing)", err, webhook.ErrNotFound)
	insert(t, s, "k", "sale:1")
	_, err = s.Retry(ctx(t), "k")
	wantErr(t, "Retry(received)", err, webhook.ErrWrongState)
	complete(t, s, claim(t, s, "k"), webhook.Outcome{State: webhook.StateDead, Error: "poison"})
	lo := time.Now()
	r, err := s.Retry(ctx(t), "k")
	hi := time.Now()
	if err != nil {
		t.Fatalf("Retry(dead): %v", err)
	}
	if r.State != webhook.StateReceived || r.Attempts != 0 || r.LastError != "poison" {
		t.Errorf("retried = %s attempts %d error %q; want received 0 poison", r.State, r.Attempts, r.LastError)
	}
	wantNear(t, "UpdatedAt", r.UpdatedAt, lo, hi)
	wantTime(t, "NextAttemptAt", r.NextAttemptAt, r.UpdatedAt)
	if rs, _ := s.Due(ctx(t), 10); keysOf(rs) != "k" {
		t.Errorf("retried event not due: %s", keysOf(rs))
	}
	c := claim(t, s, "k")
	if c.Attempts != 1 {
		t.Errorf("Attempts after Retry and Claim = %d, want 1", c.Attempts)
	}
	complete(t, s, c, webhook.Outcome{State: webhook.StateError, RetryAfter: time.Hour})
	if _, err := s.Retry(ctx(t), "k"); err != nil {
		t.Errorf("Retry(error): %v", err)
	}
	complete(t, s, claim(t, s, "k"), webhook.Outcome{State: webhook.StateProcessed})
	_, err = s.Retry(ctx(t), "k")
	wantErr(t, "Retry(processed)", err, webhook.ErrWrongState)
}

func testDeleteExpired(t *testing.T, s webhook.Store) {
	// Unfinished events, however old, are never removed.
	insert(t, s, "err", "sale:e")
	complete(t, s, claim(t, s, "err"), webhook.Outcome{State: webhook.StateError, Error: "x"})
	insert(t, s, "recv", "sale:r")
	insert(t, s, "proc", "sale:q")
	claim(t, s, "proc")
	// Old finished ones, each later than the one before.
	var last webhook.Record
	for _, k := range []string{"p0", "p1", "d0", "p2"} {
		tick()
		insert(t, s, k, "sale:"+k)
		st := webhook.StateProcessed
		if k[0] == 'd' {
			st = webhook.StateDead
		}
		last = complete(t, s, claim(t, s, k), webhook.Outcome{State: st, Error: "x"})
	}
	cutoff := last.UpdatedAt.Add(time.Microsecond)
	tick()
	// Recent ones.
	for _, k := range []string{"p3", "d1"} {
		insert(t, s, k, "sale:"+k)
		st := webhook.StateProcessed
		if k[0] == 'd' {
			st = webhook.StateDead
		}
		complete(t, s, claim(t, s, k), webhook.Outcome{State: st, Error: "x"})
	}
	exists := func(k string) bool {
		_, err := s.Get(ctx(t), k)
		if err != nil && !errors.Is(err, webhook.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	n, err := s.DeleteExpired(ctx(t), cutoff, 2)
	if err != nil || n != 2 {
		t.Fatalf("DeleteExpired(limit 2) = %d, %v; want 2", n, err)
	}
	if exists("p0") || exists("p1") || !exists("d0") || !exists("p2") {
		t.Errorf("DeleteExpired(limit 2) did not remove the two oldest (p0, p1) first")
	}
	n, err = s.DeleteExpired(ctx(t), cutoff, 100)
	if err != nil || n != 2 {
		t.Fatalf("second DeleteExpired = %d, %v; want 2", n, err)
	}
	if n, err := s.DeleteExpired(ctx(t), cutoff, 100); err != nil || n != 0 {
		t.Fatalf("third DeleteExpired = %d, %v; want 0", n, err)
	}
	rs, err := s.List(ctx(t), webhook.Filter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	left := map[string]bool{}
	for _, r := range rs {
		left[r.Key] = true
	}
	for _, k := range []string{"p3", "d1", "err", "recv", "proc"} {
		if !left[k] {
			t.Errorf("%s was removed", k)
		}
	}
	for _, k := range []string{"p0", "p1", "p2", "d0"} {
		if left[k] || exists(k) {
			t.Errorf("%s was kept", k)
		}
	}
	// A key past retention is new again.
	if _, ins, err := s.Insert(ctx(t), newRec("p0", "sale:p0")); err != nil || !ins {
		t.Errorf("Insert of an expired key = %v, %v; want inserted", ins, err)
	}
}

func testPayload(t *testing.T, s webhook.Store) {
	big := strings.Repeat("x", 200<<10)
	rec := newRec("k", "sale:ç")
	rec.Payload = []byte(`{"event":"TRANSACTION_PAID","note":"ação ☃ \u0000 ` + big + `"}`)
	if _, _, err := s.Insert(ctx(t), rec); err != nil {
		t.Fatal(err)
	}
	if g := mustGet(t, s, "k"); !bytes.Equal(g.Payload, rec.Payload) || g.Entity != "sale:ç" {
		t.Errorf("payload or entity not kept byte for byte (len %d vs %d)", len(g.Payload), len(rec.Payload))
	}
	// A sealed payload is binary, starting with a NUL.
	bin := newRec("bin", "sale:b")
	bin.Payload = []byte("\x00PW1\x02k1\xff\xfe\x00\x01 binary \x80")
	if _, _, err := s.Insert(ctx(t), bin); err != nil {
		t.Fatal(err)
	}
	if g := mustGet(t, s, "bin"); !bytes.Equal(g.Payload, bin.Payload) {
		t.Errorf("binary payload not kept byte for byte: %q, want %q", g.Payload, bin.Payload)
	}
}

func testCancelled(t *testing.T, s webhook.Store) {
	c, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := s.Insert(c, newRec("k", "sale:1"))
	wantErr(t, "Insert with a cancelled context", err, webhook.ErrUnavailable)
	_, err = s.Get(c, "k")
	wantErr(t, "Get with a cancelled context", err, webhook.ErrUnavailable)
	_, err = s.Claim(c, "k", "o", longTTL)
	wantErr(t, "Claim with a cancelled context", err, webhook.ErrUnavailable)
	_, err = s.Due(c, 10)
	wantErr(t, "Due with a cancelled context", err, webhook.ErrUnavailable)
	_, err = s.List(c, webhook.Filter{})
	wantErr(t, "List with a cancelled context", err, webhook.ErrUnavailable)
}

// offsetClock is a process clock off by d; its waits are real.
type offsetClock struct{ d time.Duration }

func (c offsetClock) Now() time.Time                         { return time.Now().Add(c.d) }
func (c offsetClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// spyStore counts Due calls and can go down (every call fails) as the store
// of a process that crashed or was cut off.
type spyStore struct {
	webhook.Store
	down atomic.Bool
	dues atomic.Int64
}

var errDown = fmt.Errorf("%w: inboxtest: this process is cut off", webhook.ErrUnavailable)

func (s *spyStore) Insert(ctx context.Context, rec webhook.Record) (webhook.Record, bool, error) {
	if s.down.Load() {
		return webhook.Record{}, false, errDown
	}
	return s.Store.Insert(ctx, rec)
}

func (s *spyStore) Claim(ctx context.Context, key, owner string, ttl time.Duration) (webhook.Record, error) {
	if s.down.Load() {
		return webhook.Record{}, errDown
	}
	return s.Store.Claim(ctx, key, owner, ttl)
}

func (s *spyStore) Renew(ctx context.Context, key string, token int64, ttl time.Duration) (webhook.Record, error) {
	if s.down.Load() {
		return webhook.Record{}, errDown
	}
	return s.Store.Renew(ctx, key, token, ttl)
}

func (s *spyStore) Complete(ctx context.Context, key string, token int64, out webhook.Outcome) (webhook.Record, error) {
	if s.down.Load() {
		return webhook.Record{}, errDown
	}
	return s.Store.Complete(ctx, key, token, out)
}

func (s *spyStore) Due(ctx context.Context, limit int) ([]webhook.Record, error) {
	if s.down.Load() {
		return nil, errDown
	}
	defer s.dues.Add(1)
	return s.Store.Due(ctx, limit)
}

func (s *spyStore) DeleteExpired(ctx context.Context, before time.Time, limit int) (int, error) {
	if s.down.Load() {
		return 0, errDown
	}
	return s.Store.DeleteExpired(ctx, before, limit)
}

// deliver posts body to in as PagPolar would, and wants 200.
func deliver(t *testing.T, in *webhook.Inbox, body string) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/webhooks/pagpolar", strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+inboxToken)
	w := httptest.NewRecorder()
	in.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("delivery: %d %s", w.Code, w.Body.String())
	}
}

const inboxToken = "whk_inboxtest"

// startInbox starts an Inbox on s whose clock is off by offset.
func startInbox(t *testing.T, s webhook.Store, owner string, offset time.Duration, edit func(*webhook.Config)) *webhook.Inbox {
	t.Helper()
	cfg := webhook.Config{
		Store: s, Tokens: []string{inboxToken}, PlaintextPayloads: true,
		Default:      func(context.Context, *webhook.Event) error { return nil },
		PollInterval: 20 * time.Millisecond, Owner: owner, Clock: offsetClock{offset},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	edit(&cfg)
	in, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), waitBound)
		defer cancel()
		if err := in.Shutdown(c); err != nil {
			t.Errorf("Shutdown %s: %v", owner, err)
		}
	})
	return in
}

func waitChan[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitBound):
		t.Fatalf("timed out after %v waiting for %s", waitBound, what)
	}
	var zero T
	return zero
}

// A process whose clock is behind holds a lease (and renews it); a process
// whose clock is far ahead scans the store again and again. Judged by the
// ahead clock the lease expired long ago; by the store's it is live, so the
// event is never claimed or run a second time.
func testSkewAheadNoSteal(t *testing.T, s webhook.Store) {
	const key = "TRANSACTION_PAID:skew1"
	entered, release := make(chan struct{}), make(chan struct{})
	holderDone := make(chan webhook.Record, 1)
	behind := startInbox(t, s, "behind", -skew, func(c *webhook.Config) {
		c.LeaseTTL = 3 * time.Second
		c.Default = func(ctx context.Context, ev *webhook.Event) error {
			close(entered)
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		c.OnOutcome = func(r webhook.Record) { holderDone <- r }
	})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce) // runs before the Shutdown startInbox registered
	deliver(t, behind, `{"id":"evt_1","event":"TRANSACTION_PAID","data":{"transaction":{"id":"skew1"}}}`)
	waitChan(t, "the event to run on the process whose clock is behind", entered)
	var stolen atomic.Int64
	spy := &spyStore{Store: s}
	startInbox(t, spy, "ahead", skew, func(c *webhook.Config) {
		c.Default = func(context.Context, *webhook.Event) error { stolen.Add(1); return nil }
	})
	deadline := time.Now().Add(waitBound)
	for spy.dues.Load() < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("the process whose clock is ahead scanned %d times in %v", spy.dues.Load(), waitBound)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := stolen.Load(); n != 0 {
		t.Fatalf("a process whose clock is %v ahead ran an event leased by one %v behind (%d runs)", skew, skew, n)
	}
	if r := mustGet(t, s, key); r.LeaseOwner != "behind" || r.LeaseToken != 1 || r.Attempts != 1 {
		t.Fatalf("after 5 scans by the ahead process: owner %q token %d attempts %d; want behind 1 1", r.LeaseOwner, r.LeaseToken, r.Attempts)
	}
	releaseOnce()
	if r := waitChan(t, "the holder's outcome", holderDone); r.State != webhook.StateProcessed || r.Attempts != 1 {
		t.Errorf("holder's outcome %s attempts %d, want processed 1", r.State, r.Attempts)
	}
	if n := stolen.Load(); n != 0 {
		t.Errorf("the event ran %d more times", n)
	}
}

// A process whose clock is far ahead claims an event and is cut off (a
// crash): its lease must expire after its TTL by the store's clock, so a
// process whose clock is behind takes the event over in about a TTL, not
// in the twenty minutes the two clocks are apart.
func testSkewLeaseExpires(t *testing.T, s webhook.Store) {
	const key = "TRANSACTION_PAID:skew2"
	const ttl = 600 * time.Millisecond
	entered, release := make(chan struct{}), make(chan struct{})
	cut := &spyStore{Store: s}
	ahead := startInbox(t, cut, "ahead", skew, func(c *webhook.Config) {
		c.LeaseTTL = ttl
		c.HandlerTimeout = -1
		c.Default = func(ctx context.Context, ev *webhook.Event) error {
			if ev.Attempt == 1 {
				close(entered)
				<-release // the crashed process: never completes
			}
			return errors.New("the crashed run")
		}
	})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce) // runs before the Shutdown startInbox registered
	deliver(t, ahead, `{"id":"evt_2","event":"TRANSACTION_PAID","data":{"transaction":{"id":"skew2"}}}`)
	waitChan(t, "the event to run on the process whose clock is ahead", entered)
	cut.down.Store(true) // from now on it neither renews nor completes
	claimedAt := time.Now()
	taken := make(chan webhook.Record, 4)
	startInbox(t, s, "behind", -skew, func(c *webhook.Config) {
		c.LeaseTTL = longTTL
		c.Default = func(context.Context, *webhook.Event) error { return nil }
		c.OnOutcome = func(r webhook.Record) { taken <- r }
	})
	r := waitChan(t, "the process whose clock is behind to take the event over", taken)
	if r.Key != key || r.State != webhook.StateProcessed || r.Attempts != 2 || r.LeaseToken != 2 {
		t.Errorf("taken over: %s %s attempts %d token %d; want %s processed 2 2", r.Key, r.State, r.Attempts, r.LeaseToken, key)
	}
	if d := time.Since(claimedAt); d > skew/2 {
		t.Errorf("taken over after %v: the lease lasted by the claimer's clock", d)
	}
	// The crashed process comes back: its outcome is fenced off.
	cut.down.Store(false)
	releaseOnce()
	c, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	if err := ahead.Shutdown(c); err != nil {
		t.Fatalf("Shutdown of the process that came back: %v", err)
	}
	if g := mustGet(t, s, key); g.State != webhook.StateProcessed || g.LeaseToken != 2 || g.Attempts != 2 {
		t.Errorf("after the crashed process returned: %s token %d attempts %d; want processed 2 2", g.State, g.LeaseToken, g.Attempts)
	}
}
