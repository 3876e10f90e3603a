package sqlstore_test

// The PostgreSQL group commit under row locks: every write answered once,
// and none left running after Close (pgbatch.go).

import (
	"context"
	"database/sql"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/sqlstore"
)

// TestPostgresLockedBatchAnswersEachWriteOnce: with the rows of a batch
// locked by another session, each statement meets the lock timeout in turn
// and is taken out to run alone, answered by its own goroutine. When the
// batch then ended at its deadline, it answered those writes again: the
// second answer blocked on the write's one-slot channel for good (a
// goroutine left behind, or Close waiting on the writer forever).
func TestPostgresLockedBatchAnswersEachWriteOnce(t *testing.T) {
	var pg sharedPG
	t.Cleanup(pg.close)
	db := pg.get(t)
	const callTimeout = time.Second
	ctx := context.Background()
	s, table := unclosedPostgres(t, db, callTimeout)
	held := make([]keystore.Record, 8)
	var err error
	for i := range held {
		if held[i], err = s.Create(ctx, rec(fmt.Sprintf("locked-%d", i)), "w", time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, "SELECT 1 FROM "+table+" WHERE operation_id LIKE 'locked-%' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(held))
	for i := range held {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			defer cancel()
			r := held[i]
			r.Attempts = 1
			_, errs[i] = s.Update(cctx, r)
		})
	}
	wg.Wait()
	// Past the batch's deadline and the alone runs' (the callers'), before
	// the lock goes.
	time.Sleep(callTimeout) // real time: the writer runs on it
	_ = tx.Rollback()
	for i, err := range errs {
		if err == nil {
			t.Errorf("write %d succeeded under the row lock", i)
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("Close did not return: a write was answered twice and the writer is stuck on the second answer:\n%s", stuckAnswers())
	}
	// Whichever answer came second blocks: the batch's (Close above waits
	// on it) or the alone run's (a goroutine left for good).
	deadline := time.Now().Add(5 * time.Second)
	for {
		stuck := stuckAnswers()
		if stuck == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a write's second answer is blocked for good:\n%s", stuck)
		}
		time.Sleep(50 * time.Millisecond) // real time: the goroutines run on it
	}
}

// TestPostgresCloseWaitsForAWriteRunningAlone: a write taken out of its
// batch after a row-lock timeout runs alone; Close returned while it still
// waited for the lock, and it committed (and answered success) after Close.
func TestPostgresCloseWaitsForAWriteRunningAlone(t *testing.T) {
	var pg sharedPG
	t.Cleanup(pg.close)
	db := pg.get(t)
	ctx := context.Background()
	s, table := unclosedPostgres(t, db, 2*time.Second)
	r, err := s.Create(ctx, rec("held"), "w", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, "SELECT 1 FROM "+table+" WHERE operation_id = 'held' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		err error
		at  time.Time
	}
	done := make(chan answer, 1)
	go func() {
		r.Attempts = 7
		_, err := s.Update(ctx, r)
		done <- answer{err, time.Now()}
	}()
	time.Sleep(600 * time.Millisecond) // real time: past the batch's lock timeout, the write runs alone
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	closedAt := time.Now()
	_ = tx.Rollback() // the lock goes once Close has returned
	got := <-done
	if got.err == nil && got.at.After(closedAt) {
		t.Fatalf("Close returned with a write still running; it committed and was answered %v after Close", got.at.Sub(closedAt))
	}
	var attempts int
	if err := db.QueryRowContext(ctx, "SELECT attempts FROM "+table+" WHERE operation_id = 'held'").Scan(&attempts); err != nil {
		t.Fatal(err)
	}
	// A write answered success is in the row. One answered unavailable may
	// still commit (the server ran it after the client gave up, as the
	// package documents): the caller was told nothing was done for sure.
	if got.err == nil && attempts != 7 {
		t.Fatalf("the write answered success, the row holds attempts %d", attempts)
	}
	t.Logf("the write answered %v; the row holds attempts %d", got.err, attempts)
}

// stuckAnswers returns the stacks of goroutines blocked sending a write's
// answer (a send on a channel that holds one answer and already has it).
func stuckAnswers() string {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "[chan send") && (strings.Contains(g, "sqlstore.(*Store).pgApply") || strings.Contains(g, "sqlstore.(*writer).execute")) {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// unclosedPostgres returns a migrated store on a table of its own in db,
// dropped on clean-up, that the test closes itself. Not newPostgres: its
// clean-up's Close would wait for good on a stuck writer, where these
// tests fail instead.
func unclosedPostgres(t *testing.T, db *sql.DB, callTimeout time.Duration) (*sqlstore.Store, string) {
	t.Helper()
	table := "pagpolar_test_" + randomSuffix(t)
	s, err := sqlstore.New(db, sqlstore.WithTable(table), sqlstore.WithCallTimeout(callTimeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, tb := range []string{table, table + "_meta"} {
			_, _ = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+tb)
		}
	})
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, table
}
