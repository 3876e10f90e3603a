package storetest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/pagpolar/pagpolar-go/keystore"
)

func list(t *testing.T, s keystore.Store, f keystore.Filter) []keystore.Record {
	t.Helper()
	recs, err := s.List(context.Background(), f)
	if err != nil {
		t.Fatalf("List(%+v): %v", f, err)
	}
	for i := 1; i < len(recs); i++ {
		if recs[i].UpdatedAt.Before(recs[i-1].UpdatedAt) {
			t.Fatalf("List(%+v) not oldest UpdatedAt first: %s at %v after %s at %v", f,
				recs[i].OperationID, recs[i].UpdatedAt, recs[i-1].OperationID, recs[i-1].UpdatedAt)
		}
	}
	return recs
}

func ids(recs []keystore.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.OperationID
	}
	return out
}

func wantIDs(t *testing.T, what string, recs []keystore.Record, want ...string) {
	t.Helper()
	got := ids(recs)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%s: got %q, want %q", what, got, want)
	}
}

func wantIDSet(t *testing.T, what string, recs []keystore.Record, want ...string) {
	t.Helper()
	got := ids(recs)
	sort.Strings(got)
	w := append([]string(nil), want...)
	sort.Strings(w)
	if strings.Join(got, "\n") != strings.Join(w, "\n") {
		t.Fatalf("%s: got %q, want %q", what, got, w)
	}
}

// allStates creates one record per state, in this order, with distinct
// UpdatedAt values, and returns them as stored.
func allStates(t *testing.T, s keystore.Store, prefix string) map[keystore.State]keystore.Record {
	out := map[keystore.State]keystore.Record{}
	for _, st := range []keystore.State{
		keystore.StatePending, keystore.StateUnknown, keystore.StateSucceeded,
		keystore.StateFailed, keystore.StateNotExecuted,
	} {
		out[st] = settle(t, s, prefix+string(st), st)
		pause()
	}
	return out
}

func testListStates(t *testing.T, s keystore.Store) {
	recs := allStates(t, s, "s/")
	got := list(t, s, keystore.Filter{States: []keystore.State{keystore.StatePending, keystore.StateUnknown}})
	wantIDs(t, "List pending+unknown", got, "s/pending", "s/unknown")
	wantSame(t, "listed record", got[0], recs[keystore.StatePending])
	got = list(t, s, keystore.Filter{States: []keystore.State{keystore.StateNotExecuted}})
	wantIDs(t, "List not_executed", got, "s/not_executed")
	got = list(t, s, keystore.Filter{})
	wantIDs(t, "List all", got, "s/pending", "s/unknown", "s/succeeded", "s/failed", "s/not_executed")
	for _, r := range got {
		wantSame(t, "listed record", r, get(t, s, r.OperationID))
	}
	if got := list(t, s, keystore.Filter{Prefix: "nothing/"}); len(got) != 0 {
		t.Fatalf("List of no match = %q, want empty", ids(got))
	}
}

func testListOrder(t *testing.T, s keystore.Store) {
	a := create(t, s, "o/a", "w", longTTL)
	pause()
	create(t, s, "o/b", "w", longTTL)
	pause()
	create(t, s, "o/c", "w", longTTL)
	pause()
	wantIDs(t, "List in creation order", list(t, s, keystore.Filter{}), "o/a", "o/b", "o/c")
	update(t, s, a, func(r *keystore.Record) { r.Attempts = 1 })
	wantIDs(t, "List after updating the oldest", list(t, s, keystore.Filter{}), "o/b", "o/c", "o/a")
}

func testListUpdatedBefore(t *testing.T, s keystore.Store) {
	a := create(t, s, "ub/a", "w", longTTL)
	pause()
	b := create(t, s, "ub/b", "w", longTTL)
	pause()
	c := create(t, s, "ub/c", "w", longTTL)
	if !a.UpdatedAt.Before(b.UpdatedAt) || !b.UpdatedAt.Before(c.UpdatedAt) {
		t.Fatalf("store clock did not advance between writes: %v, %v, %v", a.UpdatedAt, b.UpdatedAt, c.UpdatedAt)
	}
	wantIDs(t, "UpdatedBefore b (strictly)", list(t, s, keystore.Filter{UpdatedBefore: b.UpdatedAt}), "ub/a")
	wantIDs(t, "UpdatedBefore c", list(t, s, keystore.Filter{UpdatedBefore: c.UpdatedAt}), "ub/a", "ub/b")
	wantIDs(t, "UpdatedBefore a", list(t, s, keystore.Filter{UpdatedBefore: a.UpdatedAt}))
	wantIDs(t, "UpdatedBefore after c", list(t, s, keystore.Filter{UpdatedBefore: c.UpdatedAt.Add(precision)}), "ub/a", "ub/b", "ub/c")
}

func testListPrefix(t *testing.T, s keystore.Store) {
	// LIKE and GLOB metacharacters must be taken literally.
	for _, id := range []string{"p_1/x", "pa1/x", "p%/y", "pz/y", `p\z`, "p*q", "p[ab]", "pa", "P_1"} {
		create(t, s, id, "w", longTTL)
	}
	cases := map[string][]string{
		"p_":    {"p_1/x"},
		"p%":    {"p%/y"},
		`p\`:    {`p\z`},
		"p*":    {"p*q"},
		"p[":    {"p[ab]"},
		"pa":    {"pa1/x", "pa"},
		"pa1/x": {"pa1/x"},
		"q":     nil,
		"P":     {"P_1"},
	}
	for prefix, want := range cases {
		wantIDSet(t, fmt.Sprintf("List(Prefix %q)", prefix), list(t, s, keystore.Filter{Prefix: prefix}), want...)
	}
}

func testListLimit(t *testing.T, s keystore.Store) {
	for _, id := range []string{"l/1", "l/2", "l/3", "l/4", "l/5"} {
		create(t, s, id, "w", longTTL)
		pause()
	}
	wantIDs(t, "List(Limit 2)", list(t, s, keystore.Filter{Limit: 2}), "l/1", "l/2")
	wantIDs(t, "List(Limit 1)", list(t, s, keystore.Filter{Limit: 1}), "l/1")
	wantIDs(t, "List(Limit 9)", list(t, s, keystore.Filter{Limit: 9}), "l/1", "l/2", "l/3", "l/4", "l/5")
}

func testListDefaultLimit(t *testing.T, s keystore.Store) {
	const n = 120
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 8 {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				if _, err := s.Create(context.Background(), newRecord(fmt.Sprintf("d/%03d", i)), "w", longTTL); err != nil {
					errs <- err
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Create: %v", err)
	}
	for _, limit := range []int{0, -1} {
		got := list(t, s, keystore.Filter{Limit: limit})
		if len(got) < 100 || len(got) > n {
			t.Fatalf("List(Limit %d) returned %d records, want at least 100 (the default) of %d", limit, len(got), n)
		}
	}
}

func testListCombined(t *testing.T, s keystore.Store) {
	old := allStates(t, s, "c/old/")
	cut := settle(t, s, "c/cut", keystore.StatePending)
	pause()
	allStates(t, s, "c/new/")
	allStates(t, s, "x/old/")
	if !old[keystore.StateNotExecuted].UpdatedAt.Before(cut.UpdatedAt) {
		t.Fatalf("store clock did not advance between writes")
	}
	f := keystore.Filter{
		States:        []keystore.State{keystore.StatePending, keystore.StateUnknown, keystore.StateSucceeded},
		UpdatedBefore: cut.UpdatedAt,
		Prefix:        "c/",
	}
	wantIDs(t, "List(pending+unknown+succeeded, before cut, c/)", list(t, s, f), "c/old/pending", "c/old/unknown", "c/old/succeeded")
	f.Limit = 2
	wantIDs(t, "same with Limit 2", list(t, s, f), "c/old/pending", "c/old/unknown")
}
