// Package inboxtest is the conformance suite every webhook.Store passes
// unchanged: the memory store, the SQL stores (SQLite and PostgreSQL) and
// the Redis store. Times are whole microseconds, the precision durable stores
// keep.
package inboxtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/webhook"
)

// Factory returns an empty store for one subtest and arranges its cleanup.
type Factory func(t *testing.T) webhook.Store

// T0 is the time the suite starts from.
var t0 = time.Date(2031, 3, 4, 5, 6, 7, 891011000, time.UTC)

const ttl = time.Minute

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
		{"Due", testDue},
		{"List", testList},
		{"Retry", testRetry},
		{"DeleteExpired", testDeleteExpired},
		{"Payload", testPayload},
		{"CancelledContext", testCancelled},
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

func insert(t *testing.T, s webhook.Store, key, entity string, now time.Time) webhook.Record {
	t.Helper()
	r, ins, err := s.Insert(ctx(t), newRec(key, entity), now)
	if err != nil || !ins {
		t.Fatalf("Insert(%s) = inserted %v, %v; want a new record", key, ins, err)
	}
	return r
}

func claim(t *testing.T, s webhook.Store, key string, now time.Time) webhook.Record {
	t.Helper()
	r, err := s.Claim(ctx(t), key, "owner-a", now, ttl)
	if err != nil {
		t.Fatalf("Claim(%s) at %v: %v", key, now.Sub(t0), err)
	}
	return r
}

func complete(t *testing.T, s webhook.Store, r webhook.Record, out webhook.Outcome, now time.Time) webhook.Record {
	t.Helper()
	got, err := s.Complete(ctx(t), r.Key, r.LeaseToken, out, now)
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

func testInsertNew(t *testing.T, s webhook.Store) {
	in := newRec("TRANSACTION_PAID:s1", "sale:s1")
	got, ins, err := s.Insert(ctx(t), in, t0)
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
		wantTime(t, "NextAttemptAt", r.NextAttemptAt, t0)
		wantTime(t, "ReceivedAt", r.ReceivedAt, t0)
		wantTime(t, "UpdatedAt", r.UpdatedAt, t0)
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
	first := insert(t, s, "k", "sale:1", t0)
	dup := newRec("k", "sale:other")
	dup.Payload, dup.EnvelopeID, dup.Event = []byte(`{"other":true}`), "env-2", "TRANSACTION_CREATED"
	got, ins, err := s.Insert(ctx(t), dup, t0.Add(time.Minute))
	if err != nil || ins {
		t.Fatalf("duplicate Insert = inserted %v, %v; want existing record", ins, err)
	}
	if got.Deliveries != 2 || !bytes.Equal(got.Payload, first.Payload) || got.EnvelopeID != first.EnvelopeID || got.Entity != first.Entity || got.Event != first.Event {
		t.Errorf("after duplicate: %+v; want the first record with Deliveries 2", got)
	}
	wantTime(t, "UpdatedAt after duplicate", got.UpdatedAt, t0)
	if g := mustGet(t, s, "k"); g.Deliveries != 2 {
		t.Errorf("Get after duplicate: Deliveries %d, want 2", g.Deliveries)
	}
	// A duplicate of a processed record changes nothing but the count.
	r := claim(t, s, "k", t0)
	complete(t, s, r, webhook.Outcome{State: webhook.StateProcessed}, t0.Add(time.Second))
	got, ins, err = s.Insert(ctx(t), dup, t0.Add(time.Hour))
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
			_, ins, err := s.Insert(ctx(t), newRec("k", "sale:1"), t0)
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
	insert(t, s, "k", "sale:1", t0)
	now := t0.Add(time.Second)
	r := claim(t, s, "k", now)
	if r.State != webhook.StateProcessing || r.Attempts != 1 || r.LeaseOwner != "owner-a" || r.LeaseToken != 1 {
		t.Errorf("claimed = state %s attempts %d owner %q token %d; want processing 1 owner-a 1", r.State, r.Attempts, r.LeaseOwner, r.LeaseToken)
	}
	wantTime(t, "LeaseExpiresAt", r.LeaseExpiresAt, now.Add(ttl))
	wantTime(t, "UpdatedAt", r.UpdatedAt, now)
	if g := mustGet(t, s, "k"); g.State != webhook.StateProcessing || g.LeaseToken != 1 {
		t.Errorf("Get after Claim = %s token %d", g.State, g.LeaseToken)
	}
	_, err := s.Claim(ctx(t), "k", "owner-b", now.Add(ttl-time.Microsecond), ttl)
	wantErr(t, "Claim by another owner under a live lease", err, webhook.ErrLeaseHeld)
	_, err = s.Claim(ctx(t), "k", "owner-a", now.Add(time.Second), ttl)
	wantErr(t, "Claim by the same owner under a live lease", err, webhook.ErrLeaseHeld)
	// Left by a crash: the lease expires and anyone may take it over.
	later := now.Add(ttl)
	r2, err := s.Claim(ctx(t), "k", "owner-b", later, ttl)
	if err != nil {
		t.Fatalf("Claim after the lease expired: %v", err)
	}
	if r2.Attempts != 2 || r2.LeaseToken != 2 || r2.LeaseOwner != "owner-b" {
		t.Errorf("reclaimed = attempts %d token %d owner %q; want 2 2 owner-b", r2.Attempts, r2.LeaseToken, r2.LeaseOwner)
	}
	wantTime(t, "LeaseExpiresAt after reclaim", r2.LeaseExpiresAt, later.Add(ttl))
}

func testClaimWrongState(t *testing.T, s webhook.Store) {
	_, err := s.Claim(ctx(t), "missing", "o", t0, ttl)
	wantErr(t, "Claim(missing)", err, webhook.ErrNotFound)
	for _, st := range []webhook.State{webhook.StateProcessed, webhook.StateDead} {
		key := "k-" + string(st)
		insert(t, s, key, "sale:"+key, t0)
		complete(t, s, claim(t, s, key, t0), webhook.Outcome{State: st, Error: "x"}, t0)
		_, err := s.Claim(ctx(t), key, "o", t0.Add(time.Hour), ttl)
		wantErr(t, "Claim("+string(st)+")", err, webhook.ErrWrongState)
	}
}

func testClaimIgnoresBackoff(t *testing.T, s webhook.Store) {
	insert(t, s, "k", "sale:1", t0)
	next := t0.Add(time.Hour)
	complete(t, s, claim(t, s, "k", t0), webhook.Outcome{State: webhook.StateError, Error: "boom", NextAttemptAt: next}, t0)
	r := claim(t, s, "k", t0.Add(time.Second)) // a duplicate delivery resumes it early
	if r.Attempts != 2 {
		t.Errorf("Attempts = %d, want 2", r.Attempts)
	}
}

func testEntityExclusion(t *testing.T, s webhook.Store) {
	insert(t, s, "a", "sale:1", t0)
	insert(t, s, "b", "sale:1", t0)
	insert(t, s, "c", "sale:2", t0)
	insert(t, s, "d", "sale:1", t0)
	a := claim(t, s, "a", t0)
	_, err := s.Claim(ctx(t), "b", "owner-b", t0.Add(time.Second), ttl)
	wantErr(t, "Claim of another event of a busy entity", err, webhook.ErrEntityBusy)
	if g := mustGet(t, s, "b"); g.State != webhook.StateReceived || g.Attempts != 0 {
		t.Errorf("refused Claim changed the record: %s attempts %d", g.State, g.Attempts)
	}
	claim(t, s, "c", t0) // another entity is free
	complete(t, s, a, webhook.Outcome{State: webhook.StateProcessed}, t0.Add(time.Second))
	b := claim(t, s, "b", t0.Add(2*time.Second))
	// b's lease expires (a crash): d may run.
	d, err := s.Claim(ctx(t), "d", "owner-b", b.LeaseExpiresAt, ttl)
	if err != nil {
		t.Fatalf("Claim of an entity whose only lease expired: %v", err)
	}
	// b, now stale, cannot be reclaimed while d is live.
	_, err = s.Claim(ctx(t), "b", "owner-c", b.LeaseExpiresAt.Add(time.Second), ttl)
	wantErr(t, "Claim of a stale event while its entity is busy", err, webhook.ErrEntityBusy)
	_ = d
}

func testConcurrentClaims(t *testing.T, s webhook.Store) {
	const n = 12
	insert(t, s, "k", "sale:1", t0)
	if got := raceClaims(t, s, n, func(i int) string { return "k" }); got != 1 {
		t.Errorf("%d concurrent Claims of one event: %d succeeded, want 1", n, got)
	}
	for i := range n {
		insert(t, s, fmt.Sprintf("e%d", i), "subscription:9", t0)
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
			_, err := s.Claim(ctx(t), key(i), fmt.Sprintf("owner-%d", i), t0, ttl)
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
	_, err := s.Renew(ctx(t), "missing", 1, t0, ttl)
	wantErr(t, "Renew(missing)", err, webhook.ErrNotFound)
	insert(t, s, "k", "sale:1", t0)
	r := claim(t, s, "k", t0)
	now := t0.Add(ttl / 2)
	got, err := s.Renew(ctx(t), "k", r.LeaseToken, now, ttl)
	if err != nil {
		t.Fatalf("Renew: %v", err)
	}
	wantTime(t, "LeaseExpiresAt after Renew", got.LeaseExpiresAt, now.Add(ttl))
	_, err = s.Renew(ctx(t), "k", r.LeaseToken+1, now, ttl)
	wantErr(t, "Renew with a wrong token", err, webhook.ErrLeaseLost)
	_, err = s.Renew(ctx(t), "k", r.LeaseToken, now.Add(ttl), ttl)
	wantErr(t, "Renew of an expired lease", err, webhook.ErrLeaseLost)
	// The expired lease is taken over: the old token is fenced off.
	r2, err := s.Claim(ctx(t), "k", "owner-b", now.Add(ttl), ttl)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Renew(ctx(t), "k", r.LeaseToken, now.Add(ttl), ttl)
	wantErr(t, "Renew with a fenced token", err, webhook.ErrLeaseLost)
	complete(t, s, r2, webhook.Outcome{State: webhook.StateProcessed}, now.Add(ttl))
	_, err = s.Renew(ctx(t), "k", r2.LeaseToken, now.Add(ttl), ttl)
	wantErr(t, "Renew after Complete", err, webhook.ErrLeaseLost)
}

func testComplete(t *testing.T, s webhook.Store) {
	_, err := s.Complete(ctx(t), "missing", 1, webhook.Outcome{State: webhook.StateProcessed}, t0)
	wantErr(t, "Complete(missing)", err, webhook.ErrNotFound)
	insert(t, s, "k", "sale:1", t0)
	r := claim(t, s, "k", t0)
	if _, err := s.Complete(ctx(t), "k", r.LeaseToken, webhook.Outcome{State: webhook.StateProcessing}, t0); err == nil {
		t.Errorf("Complete with outcome processing succeeded, want an error")
	}
	next := t0.Add(10 * time.Minute)
	got := complete(t, s, r, webhook.Outcome{State: webhook.StateError, Error: "db down", NextAttemptAt: next}, t0.Add(time.Second))
	if got.State != webhook.StateError || got.LastError != "db down" || got.LeaseOwner != "" || got.LeaseToken != r.LeaseToken || got.Attempts != 1 {
		t.Errorf("after Complete(error) = %+v", got)
	}
	wantTime(t, "NextAttemptAt", got.NextAttemptAt, next)
	wantTime(t, "UpdatedAt", got.UpdatedAt, t0.Add(time.Second))
	_, err = s.Complete(ctx(t), "k", r.LeaseToken, webhook.Outcome{State: webhook.StateProcessed}, t0.Add(time.Second))
	wantErr(t, "second Complete", err, webhook.ErrLeaseLost)

	// Expired but not taken over: the outcome still counts.
	r = claim(t, s, "k", next)
	got, err = s.Complete(ctx(t), "k", r.LeaseToken, webhook.Outcome{State: webhook.StateProcessed}, next.Add(2*ttl))
	if err != nil {
		t.Fatalf("Complete after the lease expired, nobody else claiming: %v", err)
	}
	if got.State != webhook.StateProcessed || got.LastError != "db down" {
		t.Errorf("processed = %s error %q; want processed keeping the last error", got.State, got.LastError)
	}
	g := mustGet(t, s, "k")
	if g.State != webhook.StateProcessed || g.Attempts != 2 {
		t.Errorf("Get = %s attempts %d", g.State, g.Attempts)
	}

	// Taken over: the first worker's outcome is refused.
	insert(t, s, "k2", "sale:2", t0)
	old := claim(t, s, "k2", t0)
	nw, err := s.Claim(ctx(t), "k2", "owner-b", t0.Add(ttl), ttl)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Complete(ctx(t), "k2", old.LeaseToken, webhook.Outcome{State: webhook.StateProcessed}, t0.Add(ttl))
	wantErr(t, "Complete with a fenced token", err, webhook.ErrLeaseLost)
	got = complete(t, s, nw, webhook.Outcome{State: webhook.StateReceived, NextAttemptAt: t0.Add(ttl), Error: "shutdown"}, t0.Add(ttl))
	if got.State != webhook.StateReceived {
		t.Errorf("handed back = %s, want received", got.State)
	}
}

func keys(rs []webhook.Record) string {
	var ks []string
	for _, r := range rs {
		ks = append(ks, r.Key)
	}
	return strings.Join(ks, ",")
}

func testDue(t *testing.T, s webhook.Store) {
	insert(t, s, "r1", "sale:1", t0)
	insert(t, s, "r2", "sale:2", t0.Add(1*time.Second))
	insert(t, s, "err", "sale:3", t0.Add(2*time.Second))
	insert(t, s, "proc", "sale:4", t0.Add(3*time.Second))
	insert(t, s, "done", "sale:5", t0.Add(4*time.Second))
	insert(t, s, "dead", "sale:6", t0.Add(5*time.Second))
	now := t0.Add(10 * time.Second)
	complete(t, s, claim(t, s, "err", now), webhook.Outcome{State: webhook.StateError, Error: "x", NextAttemptAt: now.Add(time.Minute)}, now)
	claim(t, s, "proc", now) // lease until now+ttl
	complete(t, s, claim(t, s, "done", now), webhook.Outcome{State: webhook.StateProcessed}, now)
	complete(t, s, claim(t, s, "dead", now), webhook.Outcome{State: webhook.StateDead, Error: "x"}, now)

	due := func(at time.Time, limit int) string {
		t.Helper()
		rs, err := s.Due(ctx(t), at, limit)
		if err != nil {
			t.Fatalf("Due: %v", err)
		}
		return keys(rs)
	}
	if got := due(now, 10); got != "r1,r2" {
		t.Errorf("Due(now) = %s, want r1,r2", got)
	}
	if got := due(now.Add(time.Minute), 10); got != "r1,r2,err,proc" {
		t.Errorf("Due(now+1m) = %s, want r1,r2,err,proc (proc's lease expired; err and proc due at once, by key)", got)
	}
	if got := due(now.Add(time.Minute), 3); got != "r1,r2,err" {
		t.Errorf("Due(now+1m, limit 3) = %s, want r1,r2,err", got)
	}
	// The order is the time each became due, not the time received.
	r3 := insert(t, s, "r3", "sale:7", t0.Add(-time.Hour))
	complete(t, s, claim(t, s, "r3", now), webhook.Outcome{State: webhook.StateError, NextAttemptAt: now.Add(30 * time.Second)}, now)
	if got := due(now.Add(time.Minute), 10); got != "r1,r2,r3,err,proc" {
		t.Errorf("Due(now+1m) = %s, want r1,r2,r3,err,proc", got)
	}
	_ = r3
}

func testList(t *testing.T, s webhook.Store) {
	insert(t, s, "a", "sale:1", t0)
	insert(t, s, "b", "sale:2", t0.Add(time.Second))
	insert(t, s, "c", "sale:3", t0.Add(2*time.Second))
	complete(t, s, claim(t, s, "a", t0.Add(3*time.Second)), webhook.Outcome{State: webhook.StateDead, Error: "x"}, t0.Add(5*time.Second))
	complete(t, s, claim(t, s, "c", t0.Add(3*time.Second)), webhook.Outcome{State: webhook.StateDead, Error: "x"}, t0.Add(4*time.Second))
	list := func(f webhook.Filter) string {
		t.Helper()
		rs, err := s.List(ctx(t), f)
		if err != nil {
			t.Fatalf("List(%+v): %v", f, err)
		}
		return keys(rs)
	}
	if got := list(webhook.Filter{}); got != "b,c,a" {
		t.Errorf("List(all) = %s, want b,c,a (oldest UpdatedAt first)", got)
	}
	if got := list(webhook.Filter{States: []webhook.State{webhook.StateDead}}); got != "c,a" {
		t.Errorf("List(dead) = %s, want c,a", got)
	}
	if got := list(webhook.Filter{States: []webhook.State{webhook.StateReceived, webhook.StateProcessed}}); got != "b" {
		t.Errorf("List(received, processed) = %s, want b", got)
	}
	if got := list(webhook.Filter{UpdatedBefore: t0.Add(5 * time.Second)}); got != "b,c" {
		t.Errorf("List(updated before +5s) = %s, want b,c", got)
	}
	if got := list(webhook.Filter{Limit: 2}); got != "b,c" {
		t.Errorf("List(limit 2) = %s, want b,c", got)
	}
	rs, err := s.List(ctx(t), webhook.Filter{States: []webhook.State{webhook.StateDead}, Limit: 1})
	if err != nil || len(rs) != 1 || rs[0].LastError != "x" || rs[0].Attempts != 1 || len(rs[0].Payload) == 0 {
		t.Errorf("List returns full records: %+v, %v", rs, err)
	}
}

func testRetry(t *testing.T, s webhook.Store) {
	_, err := s.Retry(ctx(t), "missing", t0)
	wantErr(t, "Retry(missing)", err, webhook.ErrNotFound)
	insert(t, s, "k", "sale:1", t0)
	_, err = s.Retry(ctx(t), "k", t0)
	wantErr(t, "Retry(received)", err, webhook.ErrWrongState)
	complete(t, s, claim(t, s, "k", t0), webhook.Outcome{State: webhook.StateDead, Error: "poison"}, t0)
	now := t0.Add(time.Hour)
	r, err := s.Retry(ctx(t), "k", now)
	if err != nil {
		t.Fatalf("Retry(dead): %v", err)
	}
	if r.State != webhook.StateReceived || r.Attempts != 0 || r.LastError != "poison" {
		t.Errorf("retried = %s attempts %d error %q; want received 0 poison", r.State, r.Attempts, r.LastError)
	}
	wantTime(t, "NextAttemptAt", r.NextAttemptAt, now)
	wantTime(t, "UpdatedAt", r.UpdatedAt, now)
	if rs, _ := s.Due(ctx(t), now, 10); keys(rs) != "k" {
		t.Errorf("retried event not due: %s", keys(rs))
	}
	c := claim(t, s, "k", now)
	if c.Attempts != 1 {
		t.Errorf("Attempts after Retry and Claim = %d, want 1", c.Attempts)
	}
	complete(t, s, c, webhook.Outcome{State: webhook.StateError, NextAttemptAt: now.Add(time.Hour)}, now)
	if _, err := s.Retry(ctx(t), "k", now); err != nil {
		t.Errorf("Retry(error): %v", err)
	}
	complete(t, s, claim(t, s, "k", now), webhook.Outcome{State: webhook.StateProcessed}, now)
	_, err = s.Retry(ctx(t), "k", now)
	wantErr(t, "Retry(processed)", err, webhook.ErrWrongState)
}

func testDeleteExpired(t *testing.T, s webhook.Store) {
	for i := range 5 {
		k := fmt.Sprintf("p%d", i)
		insert(t, s, k, "sale:"+k, t0)
		complete(t, s, claim(t, s, k, t0), webhook.Outcome{State: webhook.StateProcessed}, t0.Add(time.Duration(i)*time.Hour))
	}
	insert(t, s, "dead", "sale:d", t0)
	complete(t, s, claim(t, s, "dead", t0), webhook.Outcome{State: webhook.StateDead, Error: "x"}, t0)
	insert(t, s, "err", "sale:e", t0)
	complete(t, s, claim(t, s, "err", t0), webhook.Outcome{State: webhook.StateError, Error: "x", NextAttemptAt: t0}, t0)
	insert(t, s, "recv", "sale:r", t0)
	insert(t, s, "proc", "sale:q", t0)
	claim(t, s, "proc", t0)

	before := t0.Add(3 * time.Hour) // p0, p1, p2 are older
	n, err := s.DeleteExpired(ctx(t), before, 2)
	if err != nil || n != 2 {
		t.Fatalf("DeleteExpired(limit 2) = %d, %v; want 2", n, err)
	}
	n, err = s.DeleteExpired(ctx(t), before, 100)
	if err != nil || n != 1 {
		t.Fatalf("second DeleteExpired = %d, %v; want 1", n, err)
	}
	rs, err := s.List(ctx(t), webhook.Filter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	left := map[string]bool{}
	for _, r := range rs {
		left[r.Key] = true
	}
	for _, k := range []string{"p3", "p4", "dead", "err", "recv", "proc"} {
		if !left[k] {
			t.Errorf("%s was removed", k)
		}
	}
	for _, k := range []string{"p0", "p1", "p2"} {
		if left[k] {
			t.Errorf("%s was kept", k)
		}
		if _, err := s.Get(ctx(t), k); !errors.Is(err, webhook.ErrNotFound) {
			t.Errorf("Get(%s) after removal: %v, want ErrNotFound", k, err)
		}
	}
	// A key past retention is new again.
	if _, ins, err := s.Insert(ctx(t), newRec("p0", "sale:p0"), before); err != nil || !ins {
		t.Errorf("Insert of an expired key = %v, %v; want inserted", ins, err)
	}
}

func testPayload(t *testing.T, s webhook.Store) {
	big := strings.Repeat("x", 200<<10)
	rec := newRec("k", "sale:ç")
	rec.Payload = []byte(`{"event":"TRANSACTION_PAID","note":"ação ☃ \u0000 ` + big + `"}`)
	insert := func() {
		if _, _, err := s.Insert(ctx(t), rec, t0); err != nil {
			t.Fatal(err)
		}
	}
	insert()
	if g := mustGet(t, s, "k"); !bytes.Equal(g.Payload, rec.Payload) || g.Entity != "sale:ç" {
		t.Errorf("payload or entity not kept byte for byte (len %d vs %d)", len(g.Payload), len(rec.Payload))
	}
}

func testCancelled(t *testing.T, s webhook.Store) {
	c, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := s.Insert(c, newRec("k", "sale:1"), t0)
	wantErr(t, "Insert with a cancelled context", err, webhook.ErrUnavailable)
	_, err = s.Get(c, "k")
	wantErr(t, "Get with a cancelled context", err, webhook.ErrUnavailable)
	_, err = s.Claim(c, "k", "o", t0, ttl)
	wantErr(t, "Claim with a cancelled context", err, webhook.ErrUnavailable)
	_, err = s.Due(c, t0, 10)
	wantErr(t, "Due with a cancelled context", err, webhook.ErrUnavailable)
}
