package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// newRecord returns a record as the client would create it: pending, no
// lease fields (the store sets them), a few caller-owned fields filled.
func newRecord(id string) keystore.Record {
	return keystore.Record{
		OperationID: id,
		Key:         "key-" + id,
		Kind:        "pix",
		Fingerprint: "fp-" + id,
		State:       keystore.StatePending,
	}
}

func create(t *testing.T, s keystore.Store, id, owner string, ttl time.Duration) keystore.Record {
	t.Helper()
	rec, err := s.Create(context.Background(), newRecord(id), owner, ttl)
	if err != nil {
		t.Fatalf("Create(%q): %v", id, err)
	}
	return rec
}

func get(t *testing.T, s keystore.Store, id string) keystore.Record {
	t.Helper()
	rec, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get(%q): %v", id, err)
	}
	return rec
}

// update applies mutate to rec and stores it, failing the test on error.
func update(t *testing.T, s keystore.Store, rec keystore.Record, mutate func(*keystore.Record)) keystore.Record {
	t.Helper()
	mutate(&rec)
	got, err := s.Update(context.Background(), rec)
	if err != nil {
		t.Fatalf("Update(%q, version %d, token %d): %v", rec.OperationID, rec.Version, rec.LeaseToken, err)
	}
	return got
}

// settle creates id and moves it to state (through pending), leaving the
// lease released.
func settle(t *testing.T, s keystore.Store, id string, state keystore.State) keystore.Record {
	t.Helper()
	rec := create(t, s, id, "settler", longTTL)
	if state != keystore.StatePending {
		rec = update(t, s, rec, func(r *keystore.Record) { r.State = state })
	}
	if err := s.Release(context.Background(), id, rec.LeaseToken); err != nil {
		t.Fatalf("Release(%q): %v", id, err)
	}
	return get(t, s, id)
}

func wantErr(t *testing.T, op string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want one wrapping %q", op, err, target)
	}
}

// sameRecord reports how got and want differ; times must be equal instants
// (the store returns what it stored, so no tolerance applies).
func sameRecord(got, want keystore.Record) string {
	var d []string
	add := func(field string, g, w any) { d = append(d, fmt.Sprintf("%s: got %v, want %v", field, g, w)) }
	if got.OperationID != want.OperationID {
		add("OperationID", got.OperationID, want.OperationID)
	}
	if got.Key != want.Key {
		add("Key", got.Key, want.Key)
	}
	if got.Kind != want.Kind {
		add("Kind", got.Kind, want.Kind)
	}
	if got.Fingerprint != want.Fingerprint {
		add("Fingerprint", got.Fingerprint, want.Fingerprint)
	}
	if got.State != want.State {
		add("State", got.State, want.State)
	}
	if got.Version != want.Version {
		add("Version", got.Version, want.Version)
	}
	if got.Attempts != want.Attempts {
		add("Attempts", got.Attempts, want.Attempts)
	}
	if got.ResultRef != want.ResultRef {
		add("ResultRef", got.ResultRef, want.ResultRef)
	}
	if !bytes.Equal(got.Result, want.Result) {
		add("Result", got.Result, want.Result)
	}
	if got.Error != want.Error {
		add("Error", got.Error, want.Error)
	}
	if !bytes.Equal(got.Meta, want.Meta) {
		add("Meta", got.Meta, want.Meta)
	}
	if got.LeaseOwner != want.LeaseOwner {
		add("LeaseOwner", got.LeaseOwner, want.LeaseOwner)
	}
	if got.LeaseToken != want.LeaseToken {
		add("LeaseToken", got.LeaseToken, want.LeaseToken)
	}
	for _, f := range []struct {
		name string
		g, w time.Time
	}{
		{"FirstSentAt", got.FirstSentAt, want.FirstSentAt},
		{"LastSentAt", got.LastSentAt, want.LastSentAt},
		{"LeaseExpiresAt", got.LeaseExpiresAt, want.LeaseExpiresAt},
		{"CreatedAt", got.CreatedAt, want.CreatedAt},
		{"UpdatedAt", got.UpdatedAt, want.UpdatedAt},
	} {
		if !f.g.Equal(f.w) || f.g.IsZero() != f.w.IsZero() {
			add(f.name, f.g, f.w)
		}
	}
	return strings.Join(d, "; ")
}

func wantSame(t *testing.T, what string, got, want keystore.Record) {
	t.Helper()
	if d := sameRecord(got, want); d != "" {
		t.Fatalf("%s: %s", what, d)
	}
}

// wantStored checks that what an operation returned is what Get now returns.
func wantStored(t *testing.T, s keystore.Store, what string, returned keystore.Record) {
	t.Helper()
	wantSame(t, what+" returned a record that differs from Get", get(t, s, returned.OperationID), returned)
}

// wantNear checks a store-set time against this process's clock.
func wantNear(t *testing.T, field string, got, lo, hi time.Time) {
	t.Helper()
	if got.IsZero() {
		t.Fatalf("%s is zero, want a time between %v and %v", field, lo, hi)
	}
	if got.Before(lo.Add(-clockTolerance)) || got.After(hi.Add(clockTolerance)) {
		t.Fatalf("%s = %v, want between %v and %v (± %v)", field, got, lo, hi, clockTolerance)
	}
}

// wantTimeRoundTrip checks a caller-set time kept at millisecond precision.
func wantTimeRoundTrip(t *testing.T, field string, got, want time.Time) {
	t.Helper()
	if want.IsZero() {
		if !got.IsZero() {
			t.Fatalf("%s = %v, want the zero time", field, got)
		}
		return
	}
	if d := got.Sub(want); d <= -precision || d >= precision {
		t.Fatalf("%s = %v, want %v (within %v)", field, got, want, precision)
	}
}

// waitStorePast blocks until the store's own clock has passed the lease
// expiry of probeID's lease, proven by another owner taking the lease over.
// Create the probe right after the records whose lease must expire, with the
// same TTL, so its expiry is not earlier than theirs.
func waitStorePast(t *testing.T, s keystore.Store, probeID string) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for {
		_, err := s.Acquire(context.Background(), probeID, "probe-waiter", longTTL)
		if err == nil {
			return
		}
		if !errors.Is(err, keystore.ErrLeaseHeld) {
			t.Fatalf("Acquire(%q) while waiting for expiry: %v", probeID, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease of %q still held after %v; the store's lease expiry does not work", probeID, waitBound)
		}
		time.Sleep(20 * time.Millisecond) // real time is what is under test here
	}
}

// pause makes the store clock move past the current millisecond, so that
// records written before and after it get distinct UpdatedAt values.
func pause() { time.Sleep(3 * precision) }
