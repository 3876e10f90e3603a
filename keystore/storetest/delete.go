package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
)

func deleteExpired(t *testing.T, s keystore.Store, before time.Time, limit int) int {
	t.Helper()
	n, err := s.DeleteExpired(context.Background(), before, limit)
	if err != nil {
		t.Fatalf("DeleteExpired(%v, %d): %v", before, limit, err)
	}
	return n
}

func testDeleteExpired(t *testing.T, s keystore.Store) {
	old := allStates(t, s, "old/")
	cut := settle(t, s, "cut", keystore.StatePending)
	pause()
	newer := allStates(t, s, "new/")
	if !old[keystore.StateNotExecuted].UpdatedAt.Before(cut.UpdatedAt) || !cut.UpdatedAt.Before(newer[keystore.StatePending].UpdatedAt) {
		t.Fatalf("store clock did not advance between writes")
	}
	n := deleteExpired(t, s, cut.UpdatedAt, 100)
	if n != 2 {
		t.Fatalf("DeleteExpired removed %d records, want 2 (old succeeded and failed)", n)
	}
	for st, r := range old {
		_, err := s.Get(context.Background(), r.OperationID)
		if st.Terminal() {
			wantErr(t, "Get of a removed record", err, keystore.ErrNotFound)
		} else if err != nil {
			t.Fatalf("DeleteExpired removed %s record %s: %v", st, r.OperationID, err)
		}
	}
	for _, r := range newer {
		get(t, s, r.OperationID)
	}
	get(t, s, "cut")
	if n := deleteExpired(t, s, cut.UpdatedAt, 100); n != 0 {
		t.Fatalf("second DeleteExpired removed %d records, want 0", n)
	}
	// A removed operation can be created afresh.
	rec := create(t, s, old[keystore.StateSucceeded].OperationID, "w", longTTL)
	if rec.Version != 1 || rec.State != keystore.StatePending || rec.LeaseToken != 1 {
		t.Fatalf("re-created record = version %d state %q token %d, want a fresh record", rec.Version, rec.State, rec.LeaseToken)
	}
	// Unfinished records are never removed, however old.
	n = deleteExpired(t, s, get(t, s, rec.OperationID).UpdatedAt.Add(time.Hour), 100)
	if n != 2 {
		t.Fatalf("DeleteExpired of everything removed %d records, want 2 (new succeeded and failed)", n)
	}
	left := list(t, s, keystore.Filter{})
	for _, r := range left {
		if r.State.Terminal() {
			t.Fatalf("DeleteExpired left terminal record %s", r.OperationID)
		}
	}
	if len(left) != 8 {
		t.Fatalf("%d records left, want 8: %q", len(left), ids(left))
	}
}

func testDeleteLimit(t *testing.T, s keystore.Store) {
	for i := range 5 {
		settle(t, s, fmt.Sprintf("lim/s%d", i), keystore.StateSucceeded)
		settle(t, s, fmt.Sprintf("lim/u%d", i), keystore.StateUnknown)
	}
	pause()
	cut := settle(t, s, "lim/cut", keystore.StatePending).UpdatedAt
	if n := deleteExpired(t, s, cut, 0); n != 0 {
		t.Fatalf("DeleteExpired(limit 0) removed %d, want 0", n)
	}
	total := 0
	for _, want := range []int{2, 2, 1, 0} {
		n := deleteExpired(t, s, cut, 2)
		if n != want {
			t.Fatalf("DeleteExpired(limit 2) removed %d, want %d (removed %d before)", n, want, total)
		}
		total += n
	}
	left := list(t, s, keystore.Filter{Prefix: "lim/"})
	if len(left) != 6 {
		t.Fatalf("%d records left, want 6 (5 unknown + cut): %q", len(left), ids(left))
	}
}
