package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
)

func testAcquireHeld(t *testing.T, s keystore.Store) {
	ctx := context.Background()
	rec := create(t, s, "acq/held", "owner-a", longTTL)
	got, err := s.Acquire(ctx, "acq/held", "owner-b", longTTL)
	wantErr(t, "Acquire of a held lease", err, keystore.ErrLeaseHeld)
	wantSame(t, "Acquire of a held lease returns the current record", got, rec)
	wantSame(t, "record after a refused Acquire", get(t, s, "acq/held"), rec)
	// The holder's token still works.
	update(t, s, rec, func(r *keystore.Record) { r.Attempts = 1 })
}

func testAcquireAfterRelease(t *testing.T, s keystore.Store) {
	ctx := context.Background()
	rec := create(t, s, "acq/released", "owner-a", longTTL)
	if err := s.Release(ctx, "acq/released", rec.LeaseToken); err != nil {
		t.Fatalf("Release: %v", err)
	}
	afterRelease := time.Now()
	rel := get(t, s, "acq/released")
	if rel.LeaseToken != rec.LeaseToken {
		t.Fatalf("Release changed LeaseToken from %d to %d", rec.LeaseToken, rel.LeaseToken)
	}
	if rel.LeaseExpiresAt.After(afterRelease.Add(clockTolerance)) {
		t.Fatalf("LeaseExpiresAt after Release = %v, want at most the release time %v", rel.LeaseExpiresAt, afterRelease)
	}
	if rel.Version != rec.Version {
		t.Fatalf("Release changed Version from %d to %d; lease changes leave Version alone", rec.Version, rel.Version)
	}

	before := time.Now()
	got, err := s.Acquire(ctx, "acq/released", "owner-b", longTTL)
	after := time.Now()
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	if got.LeaseOwner != "owner-b" || got.LeaseToken != rec.LeaseToken+1 {
		t.Fatalf("lease after Acquire = (%q, %d), want (%q, %d)", got.LeaseOwner, got.LeaseToken, "owner-b", rec.LeaseToken+1)
	}
	if got.Version != rec.Version {
		t.Fatalf("Acquire changed Version from %d to %d; lease changes leave Version alone", rec.Version, got.Version)
	}
	wantNear(t, "LeaseExpiresAt", got.LeaseExpiresAt, before.Add(longTTL), after.Add(longTTL))
	wantStored(t, s, "Acquire", got)

	// The released token is fenced off.
	_, err = s.Update(ctx, withAttempts(rec, 5))
	wantErr(t, "Update with the released token", err, keystore.ErrLeaseLost)
	update(t, s, got, func(r *keystore.Record) { r.Attempts = 5 })
}

func withAttempts(r keystore.Record, n int) keystore.Record {
	r.Attempts = n
	return r
}

func testAcquireSameOwner(t *testing.T, s keystore.Store) {
	ctx := context.Background()
	first := create(t, s, "acq/same", "owner-a", longTTL)
	second, err := s.Acquire(ctx, "acq/same", "owner-a", longTTL)
	if err != nil {
		t.Fatalf("re-Acquire by the holder: %v", err)
	}
	if second.LeaseToken != first.LeaseToken+1 || second.LeaseOwner != "owner-a" {
		t.Fatalf("lease after re-Acquire = (%q, %d), want (%q, %d)", second.LeaseOwner, second.LeaseToken, "owner-a", first.LeaseToken+1)
	}
	_, err = s.Update(ctx, withAttempts(first, 1))
	wantErr(t, "Update with the token replaced by a re-Acquire", err, keystore.ErrLeaseLost)
	_, err = s.Renew(ctx, "acq/same", first.LeaseToken, longTTL)
	wantErr(t, "Renew with the token replaced by a re-Acquire", err, keystore.ErrLeaseLost)
	if err := s.Release(ctx, "acq/same", first.LeaseToken); err != nil {
		t.Fatalf("Release with a stale token: %v", err)
	}
	// The old token's Release had no effect: the lease is still held.
	if _, err := s.Acquire(ctx, "acq/same", "owner-b", longTTL); err == nil {
		t.Fatal("a stale token's Release gave the lease up")
	}
	update(t, s, second, func(r *keystore.Record) { r.Attempts = 2 })
}

func testTakeover(t *testing.T, s keystore.Store) {
	ctx := context.Background()
	old := create(t, s, "acq/takeover", "owner-a", shortTTL)
	// Poll for the takeover itself: it must happen once, and only once, the
	// lease expired by the store's clock.
	const ttl2 = longTTL
	deadline := time.Now().Add(waitBound)
	var cur keystore.Record
	for {
		got, err := s.Acquire(ctx, "acq/takeover", "owner-b", ttl2)
		if err == nil {
			cur = got
			break
		}
		wantErr(t, "Acquire before expiry", err, keystore.ErrLeaseHeld)
		if got.LeaseToken != old.LeaseToken || got.LeaseOwner != "owner-a" {
			t.Fatalf("refused Acquire returned lease (%q, %d), want (%q, %d)", got.LeaseOwner, got.LeaseToken, "owner-a", old.LeaseToken)
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease of %v not taken over %v after it expired", shortTTL, waitBound)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if cur.LeaseOwner != "owner-b" || cur.LeaseToken != old.LeaseToken+1 {
		t.Fatalf("lease after takeover = (%q, %d), want (%q, %d)", cur.LeaseOwner, cur.LeaseToken, "owner-b", old.LeaseToken+1)
	}
	// The store's "now" at takeover is LeaseExpiresAt - ttl2: not before the
	// old lease's expiry.
	if takenAt := cur.LeaseExpiresAt.Add(-ttl2); takenAt.Before(old.LeaseExpiresAt.Add(-precision)) {
		t.Fatalf("lease taken over at %v by the store's clock, before it expired at %v", takenAt, old.LeaseExpiresAt)
	}
	wantStored(t, s, "Acquire (takeover)", cur)

	// The old holder is fenced off.
	_, err := s.Update(ctx, withAttempts(old, 1))
	wantErr(t, "Update by the old holder", err, keystore.ErrLeaseLost)
	_, err = s.Renew(ctx, "acq/takeover", old.LeaseToken, longTTL)
	wantErr(t, "Renew by the old holder", err, keystore.ErrLeaseLost)
	if err := s.Release(ctx, "acq/takeover", old.LeaseToken); err != nil {
		t.Fatalf("Release by the old holder: %v, want nil", err)
	}
	wantSame(t, "record after the old holder's calls", get(t, s, "acq/takeover"), cur)
	if _, err := s.Acquire(ctx, "acq/takeover", "owner-c", longTTL); err == nil {
		t.Fatal("the old holder's Release gave the new holder's lease up")
	}
	update(t, s, cur, func(r *keystore.Record) { r.Attempts = 1 })
}

func testAcquireMissing(t *testing.T, s keystore.Store) {
	_, err := s.Acquire(context.Background(), "missing", "o", longTTL)
	wantErr(t, "Acquire of a missing record", err, keystore.ErrNotFound)
}

func testRenew(t *testing.T, s keystore.Store) {
	ctx := context.Background()
	// Renew must come within the short TTL; a machine that stalls longer
	// than that gets a fresh record (a refusal then is correct behaviour).
	var rec, got keystore.Record
	for attempt := 0; ; attempt++ {
		id := fmt.Sprintf("renew/ok/%d", attempt)
		rec = create(t, s, id, "owner-a", shortTTL)
		before := time.Now()
		var err error
		got, err = s.Renew(ctx, id, rec.LeaseToken, longTTL)
		after := time.Now()
		if errors.Is(err, keystore.ErrLeaseLost) && attempt < 5 {
			continue
		}
		if err != nil {
			t.Fatalf("Renew right after Create: %v", err)
		}
		wantNear(t, "LeaseExpiresAt after Renew", got.LeaseExpiresAt, before.Add(longTTL), after.Add(longTTL))
		break
	}
	if got.LeaseToken != rec.LeaseToken || got.LeaseOwner != "owner-a" || got.Version != rec.Version {
		t.Fatalf("Renew changed (owner, token, version) from (%q, %d, %d) to (%q, %d, %d)",
			rec.LeaseOwner, rec.LeaseToken, rec.Version, got.LeaseOwner, got.LeaseToken, got.Version)
	}
	wantStored(t, s, "Renew", got)

	// The renewed lease outlives the original TTL.
	create(t, s, "renew/ok/probe", "owner-a", shortTTL)
	waitStorePast(t, s, "renew/ok/probe")
	if _, err := s.Acquire(ctx, rec.OperationID, "owner-b", longTTL); err == nil {
		t.Fatal("Acquire took a renewed lease after the original TTL")
	} else {
		wantErr(t, "Acquire of a renewed lease", err, keystore.ErrLeaseHeld)
	}
	update(t, s, got, func(r *keystore.Record) { r.Attempts = 1 })
}

func testRenewExpired(t *testing.T, s keystore.Store) {
	ctx := context.Background()
	rec := create(t, s, "renew/expired", "owner-a", shortTTL)
	create(t, s, "renew/expired/probe", "owner-a", shortTTL)
	waitStorePast(t, s, "renew/expired/probe")
	_, err := s.Renew(ctx, "renew/expired", rec.LeaseToken, longTTL)
	wantErr(t, "Renew of an expired lease nobody took", err, keystore.ErrLeaseLost)
	// It did not come back to life.
	if _, err := s.Acquire(ctx, "renew/expired", "owner-b", longTTL); err != nil {
		t.Fatalf("Acquire after a refused Renew: %v", err)
	}
}

func testRenewStale(t *testing.T, s keystore.Store) {
	ctx := context.Background()
	rec := create(t, s, "renew/stale", "owner-a", longTTL)
	_, err := s.Renew(ctx, "renew/stale", rec.LeaseToken+1, longTTL)
	wantErr(t, "Renew with a future token", err, keystore.ErrLeaseLost)
	if err := s.Release(ctx, "renew/stale", rec.LeaseToken); err != nil {
		t.Fatalf("Release: %v", err)
	}
	_, err = s.Renew(ctx, "renew/stale", rec.LeaseToken, longTTL)
	wantErr(t, "Renew after Release", err, keystore.ErrLeaseLost)

	_, err = s.Renew(ctx, "missing", 1, longTTL)
	if err == nil {
		t.Fatal("Renew of a missing record succeeded")
	}
	if !errorsIsAny(err, keystore.ErrNotFound, keystore.ErrLeaseLost) {
		t.Fatalf("Renew of a missing record: %v, want ErrNotFound or ErrLeaseLost", err)
	}
}

func testReleaseStale(t *testing.T, s keystore.Store) {
	ctx := context.Background()
	rec := create(t, s, "release/stale", "owner-a", longTTL)
	for _, tok := range []int64{rec.LeaseToken - 1, rec.LeaseToken + 1, 0, -5} {
		if err := s.Release(ctx, "release/stale", tok); err != nil {
			t.Fatalf("Release with stale token %d: %v, want nil", tok, err)
		}
	}
	wantSame(t, "record after stale Releases", get(t, s, "release/stale"), rec)
	// Releasing twice is harmless too.
	if err := s.Release(ctx, "release/stale", rec.LeaseToken); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := s.Release(ctx, "release/stale", rec.LeaseToken); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	got := get(t, s, "release/stale")
	if got.LeaseToken != rec.LeaseToken || got.Version != rec.Version {
		t.Fatalf("Release changed (token, version) from (%d, %d) to (%d, %d)", rec.LeaseToken, rec.Version, got.LeaseToken, got.Version)
	}
}

func testReleaseMissing(t *testing.T, s keystore.Store) {
	err := s.Release(context.Background(), "missing", 1)
	if err != nil && !errorsIsAny(err, keystore.ErrNotFound) {
		t.Fatalf("Release of a missing record: %v, want nil or ErrNotFound", err)
	}
}
