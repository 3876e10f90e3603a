// Conformance cases for finishing inbox records and reading them back:
// Complete, an attempt not made, Due, List and its snapshot under churn,
// retries, DeleteExpired, payloads and a cancelled context.

package inboxtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/webhook"
)

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
