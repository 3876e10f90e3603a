package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
)

func errorsIsAny(err error, targets ...error) bool {
	for _, target := range targets {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

func testUpdateWrites(t *testing.T, s keystore.Store) {
	rec := create(t, s, "update/writes", "owner-a", longTTL)
	pause()
	sent := time.Now().Add(-time.Minute)
	before := time.Now()
	got := update(t, s, rec, func(r *keystore.Record) {
		r.State = keystore.StateSucceeded
		r.Attempts = 3
		r.FirstSentAt, r.LastSentAt = sent, sent.Add(time.Second)
		r.ResultRef, r.Result, r.Error, r.Meta = "sale_1", []byte(`{"id":"sale_1"}`), "was unknown", []byte("snapshot")
		r.Fingerprint = "fp-v2"
	})
	after := time.Now()
	if got.State != keystore.StateSucceeded || got.Attempts != 3 || got.ResultRef != "sale_1" ||
		string(got.Result) != `{"id":"sale_1"}` || got.Error != "was unknown" || string(got.Meta) != "snapshot" ||
		got.Fingerprint != "fp-v2" {
		t.Fatalf("Update did not write the mutable fields: %+v", got)
	}
	wantTimeRoundTrip(t, "FirstSentAt", got.FirstSentAt, sent)
	wantTimeRoundTrip(t, "LastSentAt", got.LastSentAt, sent.Add(time.Second))
	if got.Version != rec.Version+1 {
		t.Fatalf("Version = %d, want %d", got.Version, rec.Version+1)
	}
	if !got.CreatedAt.Equal(rec.CreatedAt) {
		t.Fatalf("Update changed CreatedAt from %v to %v", rec.CreatedAt, got.CreatedAt)
	}
	if !got.UpdatedAt.After(rec.UpdatedAt) {
		t.Fatalf("UpdatedAt = %v, want after the previous %v", got.UpdatedAt, rec.UpdatedAt)
	}
	wantNear(t, "UpdatedAt", got.UpdatedAt, before, after)
	wantStored(t, s, "Update", got)

	// The record Update returned is the base of the next Update.
	again := update(t, s, got, func(r *keystore.Record) { r.Attempts = 4 })
	if again.Version != rec.Version+2 || again.State != keystore.StateSucceeded {
		t.Fatalf("second Update: version %d state %q, want %d %q", again.Version, again.State, rec.Version+2, keystore.StateSucceeded)
	}
}

func testUpdateImmutable(t *testing.T, s keystore.Store) {
	rec := create(t, s, "update/immutable", "owner-a", longTTL)
	got := update(t, s, rec, func(r *keystore.Record) {
		r.Key, r.Kind = "changed-key", "refund"
		r.LeaseOwner, r.LeaseExpiresAt = "intruder", time.Now().Add(24*time.Hour)
		r.CreatedAt, r.UpdatedAt = time.Unix(1, 0), time.Unix(2, 0)
		r.State = keystore.StateUnknown
	})
	if got.Key != rec.Key || got.Kind != rec.Kind || got.OperationID != rec.OperationID {
		t.Fatalf("Update changed identity to (%q, %q, %q), want (%q, %q, %q)",
			got.OperationID, got.Key, got.Kind, rec.OperationID, rec.Key, rec.Kind)
	}
	if got.LeaseOwner != rec.LeaseOwner || got.LeaseToken != rec.LeaseToken || !got.LeaseExpiresAt.Equal(rec.LeaseExpiresAt) {
		t.Fatalf("Update changed the lease to (%q, %d, %v), want (%q, %d, %v)",
			got.LeaseOwner, got.LeaseToken, got.LeaseExpiresAt, rec.LeaseOwner, rec.LeaseToken, rec.LeaseExpiresAt)
	}
	if !got.CreatedAt.Equal(rec.CreatedAt) || got.UpdatedAt.Before(rec.UpdatedAt) {
		t.Fatalf("Update took the caller's timestamps: CreatedAt %v UpdatedAt %v", got.CreatedAt, got.UpdatedAt)
	}
	wantStored(t, s, "Update", got)
}

func testUpdateStale(t *testing.T, s keystore.Store) {
	ctx := context.Background()
	rec := create(t, s, "update/stale", "owner-a", longTTL)
	cur := update(t, s, rec, func(r *keystore.Record) { r.Attempts = 1 })
	for _, v := range []int64{rec.Version, cur.Version + 1, 0} {
		stale := cur
		stale.Version, stale.Attempts = v, 9
		_, err := s.Update(ctx, stale)
		wantErr(t, "Update with a stale version", err, keystore.ErrConflict)
	}
	wantSame(t, "record after stale Updates", get(t, s, "update/stale"), cur)
}

func testUpdateNoLease(t *testing.T, s keystore.Store) {
	ctx := context.Background()
	rec := create(t, s, "update/nolease", "owner-a", longTTL)
	for _, tok := range []int64{0, rec.LeaseToken + 1} {
		bad := withAttempts(rec, 9)
		bad.LeaseToken = tok
		_, err := s.Update(ctx, bad)
		wantErr(t, "Update with a token that is not the lease's", err, keystore.ErrLeaseLost)
	}
	if err := s.Release(ctx, "update/nolease", rec.LeaseToken); err != nil {
		t.Fatalf("Release: %v", err)
	}
	_, err := s.Update(ctx, withAttempts(rec, 9))
	wantErr(t, "Update after Release", err, keystore.ErrLeaseLost)
	got := get(t, s, "update/nolease")
	if got.Attempts != 0 || got.Version != rec.Version {
		t.Fatalf("a refused Update wrote: attempts %d version %d", got.Attempts, got.Version)
	}
}

func testUpdateExpired(t *testing.T, s keystore.Store) {
	rec := create(t, s, "update/expired", "owner-a", shortTTL)
	create(t, s, "update/expired/probe", "owner-a", shortTTL)
	waitStorePast(t, s, "update/expired/probe")
	_, err := s.Update(context.Background(), withAttempts(rec, 9))
	wantErr(t, "Update after the lease expired (nobody took it)", err, keystore.ErrLeaseLost)
	if got := get(t, s, "update/expired"); got.Attempts != 0 || got.Version != rec.Version {
		t.Fatalf("a refused Update wrote: attempts %d version %d", got.Attempts, got.Version)
	}
}

func testUpdateTerminal(t *testing.T, s keystore.Store) {
	ctx := context.Background()
	for _, term := range []keystore.State{keystore.StateSucceeded, keystore.StateFailed} {
		id := "update/terminal/" + string(term)
		rec := create(t, s, id, "owner-a", longTTL)
		done := update(t, s, rec, func(r *keystore.Record) { r.State = term; r.ResultRef = "r1" })
		for _, next := range []keystore.State{
			keystore.StatePending, keystore.StateUnknown, keystore.StateNotExecuted,
			keystore.StateSucceeded, keystore.StateFailed,
		} {
			if next == term {
				continue
			}
			bad := done
			bad.State = next
			_, err := s.Update(ctx, bad)
			wantErr(t, "Update of a "+string(term)+" record to "+string(next), err, keystore.ErrConflict)
		}
		wantSame(t, "terminal record after refused Updates", get(t, s, id), done)
		// Writing the same terminal state (e.g. to record more detail) is not a change of state.
		same := update(t, s, done, func(r *keystore.Record) { r.Attempts = 2 })
		if same.State != term || same.Version != done.Version+1 {
			t.Fatalf("same-state Update of a %s record: state %q version %d", term, same.State, same.Version)
		}
		// Even a new lease holder cannot change it.
		if err := s.Release(ctx, id, same.LeaseToken); err != nil {
			t.Fatalf("Release: %v", err)
		}
		other, err := s.Acquire(ctx, id, "owner-b", longTTL)
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		other.State = keystore.StatePending
		_, err = s.Update(ctx, other)
		wantErr(t, "Update of a terminal record by a new holder", err, keystore.ErrConflict)
		if got := get(t, s, id); got.State != term {
			t.Fatalf("terminal state changed to %q", got.State)
		}
	}
}

func testUpdateTransitions(t *testing.T, s keystore.Store) {
	rec := create(t, s, "update/transitions", "owner-a", longTTL)
	for _, next := range []keystore.State{
		keystore.StateUnknown, keystore.StatePending, keystore.StateNotExecuted,
		keystore.StatePending, keystore.StateUnknown, keystore.StateSucceeded,
	} {
		prev := rec
		rec = update(t, s, rec, func(r *keystore.Record) { r.State = next })
		if rec.State != next || rec.Version != prev.Version+1 {
			t.Fatalf("Update %s → %s: got state %q version %d", prev.State, next, rec.State, rec.Version)
		}
	}
}

func testUpdateInvalid(t *testing.T, s keystore.Store) {
	rec := create(t, s, "update/invalid", "owner-a", longTTL)
	for _, st := range []keystore.State{"", "settled", "PENDING"} {
		bad := rec
		bad.State = st
		if _, err := s.Update(context.Background(), bad); err == nil {
			t.Fatalf("Update to invalid state %q succeeded", st)
		}
	}
	wantSame(t, "record after invalid Updates", get(t, s, "update/invalid"), rec)
}

func testUpdateMissing(t *testing.T, s keystore.Store) {
	rec := newRecord("missing")
	rec.Version, rec.LeaseToken = 1, 1
	_, err := s.Update(context.Background(), rec)
	wantErr(t, "Update of a missing record", err, keystore.ErrNotFound)
}
