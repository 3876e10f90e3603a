// Conformance cases for inserting, reading and claiming inbox records:
// duplicates, concurrent inserts and claims, the lifecycle of a claim,
// exclusion per entity, and renewing a lease.

package inboxtest

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/webhook"
)

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
