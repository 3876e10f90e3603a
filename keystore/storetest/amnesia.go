package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// AmnesiaBackend is a store under test together with the hooks RunAmnesia
// needs to make its backend forget.
type AmnesiaBackend struct {
	// Store is a fresh, empty store, isolated like Run's (it must implement
	// keystore.AmnesiaGuard).
	Store keystore.Store
	// Wipe empties the backend behind Store: every record and whatever
	// else the store keeps there (FLUSHALL on a private Redis, DELETE FROM
	// the table), as a Redis restarted without persistence would. Store
	// itself stays open.
	Wipe func(t *testing.T)
	// Lose makes the backend forget the named records only, as a failover
	// to a replica that had not received them would. nil: the tests that
	// need it are skipped.
	Lose func(t *testing.T, operationIDs ...string)
	// Reopen returns another Store on the same backend, as another process
	// would open it (its clean-up registered with t.Cleanup). nil: the
	// tests that need it are skipped.
	Reopen func(t *testing.T) keystore.Store
}

// RunAmnesia checks the keystore.AmnesiaGuard contract: a store that lost
// what it acknowledged refuses Create (ErrAmnesia and ErrUnavailable,
// nothing written) until an operator accepts the loss, keeps serving the
// records that survived, and tells the loss from records removed on
// purpose. newBackend must return a fresh backend per call; the subtests
// run in parallel.
func RunAmnesia(t *testing.T, newBackend func(t *testing.T) AmnesiaBackend) {
	t.Helper()
	cases := []struct {
		name string
		fn   func(t *testing.T, b AmnesiaBackend)
	}{
		{"FreshStoreReportsNoLoss", testAmnesiaFresh},
		{"WipeRefusesCreateUntilAccepted", testAmnesiaWipe},
		{"LostRecordCannotBeCreatedAgain", testAmnesiaLose},
		{"SurvivorsStillServedDuringAmnesia", testAmnesiaSurvivors},
		{"DetectionIsSharedWithOtherStores", testAmnesiaShared},
		{"StoreOpenedAfterWipeIsStoppedByRunningOnes", testAmnesiaOpenedAfter},
		{"DeleteExpiredIsNotALoss", testAmnesiaReaped},
		{"AcceptLossNeedsANote", testAmnesiaNote},
		{"AcceptWithoutLossDoesNothing", testAmnesiaAcceptNoLoss},
		{"Engine/WipeAfterCommitThen500SendsNothing", testAmnesiaEngine},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := newBackend(t)
			if _, ok := b.Store.(keystore.AmnesiaGuard); !ok {
				t.Fatalf("%T does not implement keystore.AmnesiaGuard", b.Store)
			}
			c.fn(t, b)
		})
	}
}

func guard(t *testing.T, s keystore.Store) keystore.AmnesiaGuard {
	t.Helper()
	g, ok := s.(keystore.AmnesiaGuard)
	if !ok {
		t.Fatalf("%T does not implement keystore.AmnesiaGuard", s)
	}
	return g
}

func report(t *testing.T, s keystore.Store) keystore.AmnesiaReport {
	t.Helper()
	r, err := guard(t, s).Amnesia(context.Background())
	if err != nil {
		t.Fatalf("Amnesia: %v", err)
	}
	return r
}

// wantAmnesia checks that Create of id is refused for amnesia and wrote
// nothing.
func wantAmnesia(t *testing.T, s keystore.Store, id string) {
	t.Helper()
	_, err := s.Create(context.Background(), newRecord(id), "w", longTTL)
	if !errors.Is(err, keystore.ErrAmnesia) || !errors.Is(err, keystore.ErrUnavailable) {
		t.Fatalf("Create(%q) after the loss: %v; want an error wrapping ErrAmnesia and ErrUnavailable", id, err)
	}
	var ae *keystore.AmnesiaError
	if !errors.As(err, &ae) || ae.Part == "" || ae.Reason == "" {
		t.Fatalf("Create(%q): %v; want an *AmnesiaError naming the part and the reason", id, err)
	}
	if msg := err.Error(); !strings.Contains(msg, "AcceptLoss") || !strings.Contains(msg, "lookup") {
		t.Fatalf("Create(%q): %q; want a message that says what to do (settle by lookup, AcceptLoss)", id, msg)
	}
	if _, err := s.Get(context.Background(), id); !errors.Is(err, keystore.ErrNotFound) {
		t.Fatalf("Get(%q) after a refused Create: %v; want ErrNotFound (nothing written)", id, err)
	}
}

func accept(t *testing.T, s keystore.Store, note string) {
	t.Helper()
	if err := guard(t, s).AcceptLoss(context.Background(), note); err != nil {
		t.Fatalf("AcceptLoss: %v", err)
	}
}

func wantNoLoss(t *testing.T, what string, r keystore.AmnesiaReport) {
	t.Helper()
	if r.Detected() {
		t.Fatalf("%s: Amnesia reports %+v, want no loss", what, r.Lost)
	}
}

func testAmnesiaFresh(t *testing.T, b AmnesiaBackend) {
	r := report(t, b.Store)
	wantNoLoss(t, "fresh store", r)
	if r.Parts < 1 {
		t.Fatalf("Amnesia reports %d parts, want at least 1", r.Parts)
	}
	create(t, b.Store, "fresh", "w", longTTL)
	wantNoLoss(t, "after a Create", report(t, b.Store))
}

func testAmnesiaWipe(t *testing.T, b AmnesiaBackend) {
	s := b.Store
	before := time.Now()
	create(t, s, "a", "w", longTTL)
	settle(t, s, "b", keystore.StateSucceeded)
	b.Wipe(t)
	if _, err := s.Get(context.Background(), "a"); !errors.Is(err, keystore.ErrNotFound) {
		t.Fatalf("Get(a) after the wipe: %v; the hook did not empty the backend", err)
	}
	// The record that was lost, and one that never existed: the store
	// cannot tell them apart any more, so both are refused.
	wantAmnesia(t, s, "a")
	wantAmnesia(t, s, "never-existed")
	r := report(t, s)
	if !r.Detected() {
		t.Fatal("Amnesia reports no loss after Create refused for one")
	}
	for _, l := range r.Lost {
		if l.Part == "" || l.Reason == "" {
			t.Fatalf("lost part without a name or reason: %+v", l)
		}
		wantNear(t, "LostPart.DetectedAt", l.DetectedAt, before, time.Now())
	}
	accept(t, s, "storetest: settled what survived (nothing)")
	wantNoLoss(t, "after AcceptLoss", report(t, s))
	got := create(t, s, "a", "w", longTTL)
	if got.Version != 1 || got.LeaseToken != 1 {
		t.Fatalf("Create after AcceptLoss: %+v, want a new record", got)
	}
	create(t, s, "never-existed", "w", longTTL)
	found := false
	for _, a := range report(t, s).Accepted {
		if a.Note == "storetest: settled what survived (nothing)" && !a.At.IsZero() {
			found = true
		}
	}
	if !found {
		t.Fatalf("Amnesia does not report the accepted loss with its note: %+v", report(t, s).Accepted)
	}
}

func testAmnesiaLose(t *testing.T, b AmnesiaBackend) {
	if b.Lose == nil {
		t.Skip("the store has no hook to lose single records")
	}
	s := b.Store
	create(t, s, "kept", "w", longTTL)
	create(t, s, "lost", "w", longTTL) // the last record this Store created
	b.Lose(t, "lost")
	if _, err := s.Get(context.Background(), "lost"); !errors.Is(err, keystore.ErrNotFound) {
		t.Fatalf("Get(lost) after Lose: %v; the hook did not lose it", err)
	}
	// Created again, "lost" would look new and be sent without a lookup.
	wantAmnesia(t, s, "lost")
	if !report(t, s).Detected() {
		t.Fatal("Amnesia reports no loss")
	}
	accept(t, s, "storetest: lost one record")
	create(t, s, "lost", "w", longTTL)
}

// Settling what survived needs every call but Create.
func testAmnesiaSurvivors(t *testing.T, b AmnesiaBackend) {
	if b.Lose == nil {
		t.Skip("the store has no hook to lose single records")
	}
	s := b.Store
	ctx := context.Background()
	kept := create(t, s, "survivor", "w", shortTTL)
	create(t, s, "gone", "w", longTTL)
	b.Lose(t, "gone")
	wantAmnesia(t, s, "gone")
	if err := s.Release(ctx, "survivor", kept.LeaseToken); err != nil {
		t.Fatalf("Release during amnesia: %v", err)
	}
	acq, err := s.Acquire(ctx, "survivor", "settler", longTTL)
	if err != nil {
		t.Fatalf("Acquire during amnesia: %v", err)
	}
	if _, err := s.Renew(ctx, "survivor", acq.LeaseToken, longTTL); err != nil {
		t.Fatalf("Renew during amnesia: %v", err)
	}
	acq.State = keystore.StateSucceeded
	acq.ResultRef = "sale-1"
	up, err := s.Update(ctx, acq)
	if err != nil {
		t.Fatalf("Update during amnesia: %v", err)
	}
	if up.State != keystore.StateSucceeded {
		t.Fatalf("Update during amnesia stored %s", up.State)
	}
	got, err := s.List(ctx, keystore.Filter{Prefix: "survivor"})
	if err != nil || len(got) != 1 {
		t.Fatalf("List during amnesia: %v, %v", got, err)
	}
	if _, err := s.DeleteExpired(ctx, time.Now().Add(-time.Hour), 10); err != nil {
		t.Fatalf("DeleteExpired during amnesia: %v", err)
	}
	// Still refused: settling did not accept the loss. (A store of several
	// parts may refuse only the part that lost records: the lost record's.)
	wantAmnesia(t, s, "gone")
}

func testAmnesiaShared(t *testing.T, b AmnesiaBackend) {
	if b.Reopen == nil {
		t.Skip("the store has no hook to open a second Store on its backend")
	}
	s1 := b.Store
	s2 := b.Reopen(t)
	create(t, s1, "one", "w", longTTL)
	create(t, s2, "two", "w", longTTL)
	b.Wipe(t)
	wantAmnesia(t, s1, "one")
	// s2 refuses too, whether it noticed by itself or through s1's mark.
	wantAmnesia(t, s2, "three")
	// A Store opened after the detection refuses as well.
	s3 := b.Reopen(t)
	wantAmnesia(t, s3, "four")
	if !report(t, s3).Detected() {
		t.Fatal("a Store opened after the detection reports no loss")
	}
	accept(t, s3, "storetest: accepted by another process")
	// Every Store adopts the acceptance.
	create(t, s1, "one", "w", longTTL)
	create(t, s2, "two", "w", longTTL)
	create(t, s3, "four", "w", longTTL)
	wantNoLoss(t, "s1 after another Store accepted", report(t, s1))
}

func testAmnesiaOpenedAfter(t *testing.T, b AmnesiaBackend) {
	if b.Reopen == nil {
		t.Skip("the store has no hook to open a second Store on its backend")
	}
	s1 := b.Store
	create(t, s1, "old", "w", longTTL)
	b.Wipe(t)
	// A process that starts now may not be able to tell the emptied store
	// from a new one; the running Store can.
	s2 := b.Reopen(t)
	wantAmnesia(t, s1, "old")
	for _, id := range []string{"new-1", "new-2", "new-3", "new-4"} {
		wantAmnesia(t, s2, id)
	}
	wantAmnesia(t, s1, "new-5")
}

func testAmnesiaReaped(t *testing.T, b AmnesiaBackend) {
	s := b.Store
	ctx := context.Background()
	settle(t, s, "reaped", keystore.StateSucceeded) // the last record this Store created
	n, err := s.DeleteExpired(ctx, time.Now().Add(time.Hour), 10)
	if err != nil || n != 1 {
		t.Fatalf("DeleteExpired = %d, %v; want the one terminal record removed", n, err)
	}
	create(t, s, "after", "w", longTTL)
	create(t, s, "reaped", "w", longTTL) // a late retry of a reaped operation is sent again: documented
	wantNoLoss(t, "after DeleteExpired", report(t, s))
}

func testAmnesiaNote(t *testing.T, b AmnesiaBackend) {
	s := b.Store
	create(t, s, "x", "w", longTTL)
	b.Wipe(t)
	wantAmnesia(t, s, "x")
	if err := guard(t, s).AcceptLoss(context.Background(), "  "); err == nil {
		t.Fatal("AcceptLoss with an empty note succeeded")
	}
	wantAmnesia(t, s, "x")
}

func testAmnesiaAcceptNoLoss(t *testing.T, b AmnesiaBackend) {
	s := b.Store
	create(t, s, "x", "w", longTTL)
	accept(t, s, "storetest: nothing to accept")
	wantNoLoss(t, "after an AcceptLoss without loss", report(t, s))
	create(t, s, "y", "w", longTTL)
	for _, a := range report(t, s).Accepted {
		if a.Note == "storetest: nothing to accept" {
			t.Fatalf("AcceptLoss without a loss recorded an acceptance: %+v", a)
		}
	}
}
