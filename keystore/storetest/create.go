package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
)

func testCreateStores(t *testing.T, s keystore.Store) {
	ctx := context.Background()
	in := newRecord("create/1")
	// Fields the store owns are overwritten whatever the caller passes.
	in.Version = 42
	in.LeaseOwner, in.LeaseToken = "someone-else", 99
	in.LeaseExpiresAt = time.Unix(1, 0)
	in.CreatedAt, in.UpdatedAt = time.Unix(2, 0), time.Unix(3, 0)

	before := time.Now()
	rec, err := s.Create(ctx, in, "owner-a", longTTL)
	after := time.Now()
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if rec.OperationID != in.OperationID || rec.Key != in.Key || rec.Kind != in.Kind ||
		rec.Fingerprint != in.Fingerprint || rec.State != keystore.StatePending {
		t.Fatalf("Create returned %+v, want the caller's identity fields and state pending", rec)
	}
	if rec.Version != 1 {
		t.Fatalf("Version = %d, want 1", rec.Version)
	}
	if rec.LeaseOwner != "owner-a" || rec.LeaseToken != 1 {
		t.Fatalf("lease = (%q, %d), want (%q, 1)", rec.LeaseOwner, rec.LeaseToken, "owner-a")
	}
	wantNear(t, "CreatedAt", rec.CreatedAt, before, after)
	if !rec.UpdatedAt.Equal(rec.CreatedAt) {
		t.Fatalf("UpdatedAt = %v, want CreatedAt %v", rec.UpdatedAt, rec.CreatedAt)
	}
	wantNear(t, "LeaseExpiresAt", rec.LeaseExpiresAt, before.Add(longTTL), after.Add(longTTL))
	if d := rec.LeaseExpiresAt.Sub(rec.CreatedAt) - longTTL; d < -50*time.Millisecond || d > 50*time.Millisecond {
		t.Fatalf("LeaseExpiresAt - CreatedAt = %v, want the TTL %v", rec.LeaseExpiresAt.Sub(rec.CreatedAt), longTTL)
	}
	wantStored(t, s, "Create", rec)

	// The lease Create gave is a real one: another owner cannot take it.
	if _, err := s.Acquire(ctx, in.OperationID, "owner-b", longTTL); err == nil {
		t.Fatal("Acquire by another owner succeeded during the lease Create gave")
	} else {
		wantErr(t, "Acquire during Create's lease", err, keystore.ErrLeaseHeld)
	}
}

func testCreateDefaultState(t *testing.T, s keystore.Store) {
	in := newRecord("create/default-state")
	in.State = ""
	rec, err := s.Create(context.Background(), in, "o", longTTL)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if rec.State != keystore.StatePending {
		t.Fatalf("State = %q, want %q", rec.State, keystore.StatePending)
	}
	wantStored(t, s, "Create", rec)
}

func testCreateExists(t *testing.T, s keystore.Store) {
	ctx := context.Background()
	first := create(t, s, "create/dup", "owner-a", longTTL)
	pause()
	again := newRecord("create/dup")
	again.Key, again.Kind, again.Fingerprint = "other-key", "boleto", "other-fp"
	again.State = keystore.StateUnknown
	got, err := s.Create(ctx, again, "owner-b", longTTL)
	wantErr(t, "second Create", err, keystore.ErrExists)
	wantSame(t, "second Create's record", got, first)
	wantSame(t, "record after a refused Create", get(t, s, "create/dup"), first)

	// An expired lease does not change that: Create never takes over.
	short := create(t, s, "create/dup-expired", "owner-a", shortTTL)
	create(t, s, "create/dup-expired/probe", "owner-a", shortTTL)
	waitStorePast(t, s, "create/dup-expired/probe")
	got, err = s.Create(ctx, newRecord("create/dup-expired"), "owner-b", longTTL)
	wantErr(t, "Create over an expired lease", err, keystore.ErrExists)
	wantSame(t, "Create over an expired lease", got, short)
	wantSame(t, "record after a refused Create", get(t, s, "create/dup-expired"), short)
}

func testCreateEmptyID(t *testing.T, s keystore.Store) {
	if _, err := s.Create(context.Background(), newRecord(""), "o", longTTL); err == nil {
		t.Fatal("Create with an empty OperationID succeeded")
	}
}

func testRoundTrip(t *testing.T, s keystore.Store) {
	ctx := context.Background()
	loc := time.FixedZone("BRT", -3*3600)
	in := keystore.Record{
		OperationID: "round/trip: ção/%_\\'\"",
		Key:         "0f5c2b1e-8a4d-5b7e-9c3f-1a2b3c4d5e6f",
		Kind:        "credit_card",
		Fingerprint: "hmac-sha256:ab01",
		State:       keystore.StateUnknown,
		Attempts:    7,
		FirstSentAt: time.Date(2024, 2, 29, 23, 59, 58, 123456789, loc),
		LastSentAt:  time.Now().Add(-time.Second),
		ResultRef:   "sale_123",
		Result:      []byte(`{"identifier":"sale_123","amount":9990,"status":"paid"}`),
		Error:       "timeout after the request was written — ação",
		Meta:        []byte{0, 1, 2, 0xff, 0xfe, '\n', '\'', '"', 0},
	}
	rec, err := s.Create(ctx, in, "o", longTTL)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	for _, got := range []keystore.Record{rec, get(t, s, in.OperationID)} {
		if got.OperationID != in.OperationID || got.Key != in.Key || got.Kind != in.Kind ||
			got.Fingerprint != in.Fingerprint || got.State != in.State || got.Attempts != in.Attempts ||
			got.ResultRef != in.ResultRef || string(got.Result) != string(in.Result) ||
			got.Error != in.Error || string(got.Meta) != string(in.Meta) {
			t.Fatalf("record does not round-trip:\n got %+v\nwant %+v", got, in)
		}
		wantTimeRoundTrip(t, "FirstSentAt", got.FirstSentAt, in.FirstSentAt)
		wantTimeRoundTrip(t, "LastSentAt", got.LastSentAt, in.LastSentAt)
	}

	// Zero times and empty byte fields stay zero and empty.
	z := create(t, s, "round/zero", "o", longTTL)
	for _, got := range []keystore.Record{z, get(t, s, "round/zero")} {
		if !got.FirstSentAt.IsZero() || !got.LastSentAt.IsZero() || len(got.Result) != 0 || len(got.Meta) != 0 ||
			got.Attempts != 0 || got.ResultRef != "" || got.Error != "" {
			t.Fatalf("zero fields do not round-trip as zero: %+v", got)
		}
	}

	// Update round-trips the same way.
	want := in
	up := update(t, s, z, func(r *keystore.Record) {
		r.State, r.Attempts = want.State, want.Attempts
		r.FirstSentAt, r.LastSentAt = want.FirstSentAt, want.LastSentAt
		r.ResultRef, r.Result, r.Error, r.Meta, r.Fingerprint = want.ResultRef, want.Result, want.Error, want.Meta, want.Fingerprint
	})
	for _, got := range []keystore.Record{up, get(t, s, "round/zero")} {
		if got.Fingerprint != in.Fingerprint || got.State != in.State || got.Attempts != in.Attempts ||
			got.ResultRef != in.ResultRef || string(got.Result) != string(in.Result) ||
			got.Error != in.Error || string(got.Meta) != string(in.Meta) {
			t.Fatalf("Update does not round-trip:\n got %+v\nwant %+v", got, in)
		}
		wantTimeRoundTrip(t, "FirstSentAt", got.FirstSentAt, in.FirstSentAt)
		wantTimeRoundTrip(t, "LastSentAt", got.LastSentAt, in.LastSentAt)
	}
	// And back to zero.
	back := update(t, s, up, func(r *keystore.Record) {
		r.FirstSentAt, r.LastSentAt, r.Result, r.Meta, r.Error, r.ResultRef = time.Time{}, time.Time{}, nil, nil, "", ""
	})
	for _, got := range []keystore.Record{back, get(t, s, "round/zero")} {
		if !got.FirstSentAt.IsZero() || !got.LastSentAt.IsZero() || len(got.Result) != 0 || len(got.Meta) != 0 ||
			got.ResultRef != "" || got.Error != "" {
			t.Fatalf("Update to zero fields does not round-trip: %+v", got)
		}
	}
}

func testCopies(t *testing.T, s keystore.Store) {
	ctx := context.Background()
	in := newRecord("copies")
	in.Result, in.Meta = []byte("result"), []byte("meta")
	rec, err := s.Create(ctx, in, "o", longTTL)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if len(rec.Result) == 0 || len(rec.Meta) == 0 {
		t.Fatalf("Create returned Result %q, Meta %q; want %q, %q", rec.Result, rec.Meta, "result", "meta")
	}
	in.Result[0], in.Meta[0] = 'X', 'X'
	rec.Result[0], rec.Meta[0] = 'Y', 'Y'
	got := get(t, s, "copies")
	if string(got.Result) != "result" || string(got.Meta) != "meta" {
		t.Fatalf("stored bytes changed through the caller's slices: Result %q, Meta %q", got.Result, got.Meta)
	}
	got.Result[0] = 'Z' // non-empty: checked above
	if again := get(t, s, "copies"); string(again.Result) != "result" {
		t.Fatalf("stored bytes changed through Get's slice: %q", again.Result)
	}
}

func testGetMissing(t *testing.T, s keystore.Store) {
	_, err := s.Get(context.Background(), "missing")
	wantErr(t, "Get of a missing record", err, keystore.ErrNotFound)
}
