package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/sqlstore"
	"github.com/pagpolar/pagpolar-go/keystore/storetest"
)

func rec(id string) keystore.Record {
	return keystore.Record{OperationID: id, Key: "k-" + id, Kind: "pix", Fingerprint: "fp", State: keystore.StatePending}
}

// The caller's own *sql.DB: each batch borrows a connection and sets the
// pragmas on it.
func TestConformanceSQLiteCallerDB(t *testing.T) {
	storetest.Run(t, func(t *testing.T) keystore.Store {
		db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "orders.db"))
		if err != nil {
			t.Fatal(err)
		}
		s, err := sqlstore.New(db, sqlstore.WithTable("my_ops"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if err := db.Close(); err != nil {
				t.Errorf("db.Close: %v", err)
			}
		})
		if s.Dialect() != sqlstore.SQLite {
			t.Fatalf("Dialect = %q, want %q", s.Dialect(), sqlstore.SQLite)
		}
		if err := s.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestSQLiteSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ops.db")
	s, err := sqlstore.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	in := rec("order-1")
	in.Result = []byte(`{"id":"s1"}`)
	created, err := s.Create(ctx, in, "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "order-1"); err == nil {
		t.Fatal("Get after Close succeeded")
	}
	if _, err := s.Create(ctx, rec("order-2"), "w", time.Minute); !errors.Is(err, sqlstore.ErrClosed) {
		t.Fatalf("Create after Close: %v, want ErrClosed", err)
	}

	s2, err := sqlstore.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if err := s2.Migrate(ctx); err != nil { // idempotent on an existing table
		t.Fatal(err)
	}
	got, err := s2.Get(ctx, "order-1")
	if err != nil {
		t.Fatalf("Get after reopen: %v", err)
	}
	if got.Key != created.Key || !got.CreatedAt.Equal(created.CreatedAt) || string(got.Result) != `{"id":"s1"}` || got.LeaseToken != 1 {
		t.Fatalf("after reopen got %+v, want %+v", got, created)
	}
	var mode string
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q (%v), want wal", mode, err)
	}
}

// Close answers every write already queued and ends the writer; writes that
// raced with it either committed (and are on disk) or failed with ErrClosed.
func TestSQLiteCloseDrains(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ops.db")
	s, err := sqlstore.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 200
	start := make(chan struct{})
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			_, errs[i] = s.Create(ctx, rec(fmt.Sprintf("op-%d", i)), "w", time.Minute)
		}(i)
	}
	close(start)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	s2, err := sqlstore.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	ok := 0
	for i, err := range errs {
		_, gerr := s2.Get(ctx, fmt.Sprintf("op-%d", i))
		switch {
		case err == nil:
			ok++
			if gerr != nil {
				t.Fatalf("op-%d: Create returned nil but the record is not on disk: %v", i, gerr)
			}
		case errors.Is(err, sqlstore.ErrClosed) && errors.Is(err, keystore.ErrUnavailable):
			if !errors.Is(gerr, keystore.ErrNotFound) {
				t.Fatalf("op-%d: Create returned %v but Get says %v", i, err, gerr)
			}
		default:
			t.Fatalf("op-%d: Create during Close: %v", i, err)
		}
	}
	t.Logf("%d of %d creates committed before Close", ok, n)
}

// Two Stores on one file stand for two processes: SQLite's lock, not the
// writer goroutine, keeps them apart.
func TestSQLiteTwoProcesses(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "shared.db")
	var stores [2]*sqlstore.Store
	for i := range stores {
		s, err := sqlstore.OpenSQLite(path)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		stores[i] = s
	}
	for round := range 5 {
		id := fmt.Sprintf("order-%d", round)
		const per = 16
		var wg sync.WaitGroup
		results := make(chan error, 2*per)
		for i := range 2 * per {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				_, err := stores[i%2].Create(ctx, rec(id), fmt.Sprintf("owner-%d", i), time.Minute)
				results <- err
			}(i)
		}
		wg.Wait()
		close(results)
		wins := 0
		for err := range results {
			switch {
			case err == nil:
				wins++
			case !errors.Is(err, keystore.ErrExists):
				t.Fatalf("Create: %v", err)
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d Creates won across two stores, want 1", round, wins)
		}
		// The lease is exclusive across the two as well.
		cur, err := stores[0].Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if err := stores[1].Release(ctx, id, cur.LeaseToken); err != nil {
			t.Fatal(err)
		}
		a, errA := stores[0].Acquire(ctx, id, "a", time.Minute)
		_, errB := stores[1].Acquire(ctx, id, "b", time.Minute)
		if errA != nil || !errors.Is(errB, keystore.ErrLeaseHeld) {
			t.Fatalf("Acquire on store 0: %v; on store 1: %v, want nil and ErrLeaseHeld", errA, errB)
		}
		if _, err := stores[1].Update(ctx, a); err != nil {
			t.Fatalf("Update through the other store with the holder's token: %v", err)
		}
	}
}

// A write lock held elsewhere (another process, a long transaction) makes
// writes fail with ErrUnavailable after the busy timeout, a caller's
// deadline ends its wait sooner, and the store works again once the lock
// is gone.
func TestSQLiteLockedThenBack(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ops.db")
	s, err := sqlstore.OpenSQLite(path, sqlstore.WithBusyTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, rec("before"), "w", time.Minute); err != nil {
		t.Fatal(err)
	}

	other, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	lock, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := lock.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}

	_, err = s.Create(ctx, rec("during"), "w", time.Minute)
	if !errors.Is(err, keystore.ErrUnavailable) {
		t.Fatalf("Create while another connection holds the write lock: %v, want ErrUnavailable", err)
	}
	// Reads go on beside the lock (WAL).
	if _, err := s.Get(ctx, "before"); err != nil {
		t.Fatalf("Get while the write lock is held: %v", err)
	}
	// A deadline shorter than the busy timeout ends the wait, and the write
	// is not applied later.
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, err = s.Create(short, rec("gave-up"), "w", time.Minute)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, keystore.ErrUnavailable) {
		t.Fatalf("Create with a short deadline while locked: %v, want DeadlineExceeded and ErrUnavailable", err)
	}

	if _, err := lock.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, rec("after"), "w", time.Minute); err != nil {
		t.Fatalf("Create after the lock was released: %v", err)
	}
	for _, id := range []string{"during", "gave-up"} {
		if _, err := s.Get(ctx, id); !errors.Is(err, keystore.ErrNotFound) {
			t.Fatalf("Get(%s) of a failed Create: %v, want ErrNotFound", id, err)
		}
	}
}

func TestSQLiteMissingTable(t *testing.T) {
	s, err := sqlstore.OpenSQLite(filepath.Join(t.TempDir(), "ops.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.Ping(ctx); !errors.Is(err, keystore.ErrUnavailable) {
		t.Fatalf("Ping before Migrate: %v, want ErrUnavailable", err)
	}
	if _, err := s.Create(ctx, rec("x"), "w", time.Minute); !errors.Is(err, keystore.ErrUnavailable) {
		t.Fatalf("Create before Migrate: %v, want ErrUnavailable", err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, rec("x"), "w", time.Minute); err != nil {
		t.Fatalf("Create after Migrate (the writer recovered from the failed batch): %v", err)
	}
}

func TestOptions(t *testing.T) {
	for _, name := range []string{"", "1abc", "a-b", "a.b", "ops; DROP TABLE x", "a b", "ção"} {
		if _, err := sqlstore.OpenSQLite(filepath.Join(t.TempDir(), "x.db"), sqlstore.WithTable(name)); err == nil {
			t.Errorf("WithTable(%q) accepted", name)
		}
	}
	if _, err := sqlstore.OpenSQLite(filepath.Join(t.TempDir(), "x.db"), sqlstore.WithDialect("mysql")); err == nil {
		t.Error("WithDialect(mysql) accepted")
	}
	if _, err := sqlstore.OpenSQLite(filepath.Join(t.TempDir(), "x.db"), sqlstore.WithMaxBatch(0)); err == nil {
		t.Error("WithMaxBatch(0) accepted")
	}
	if _, err := sqlstore.OpenSQLite(""); err == nil {
		t.Error("OpenSQLite(\"\") accepted")
	}
	if _, err := sqlstore.New(nil); err == nil {
		t.Error("New(nil) accepted")
	}
	s, err := sqlstore.OpenSQLite(filepath.Join(t.TempDir(), "x.db"), sqlstore.WithTable("Shop_Ops_2"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Table() != "Shop_Ops_2" {
		t.Errorf("Table = %q", s.Table())
	}
}

// A second Migrate on a store whose writer holds the file's one write
// connection used to wait forever.
func TestMigrateAgainAfterWrites(t *testing.T) {
	s := newSQLite(t)
	ctx := context.Background()
	if _, err := s.Create(ctx, keystore.Record{OperationID: "op-1", Key: "k", Kind: "pix"}, "w", time.Minute); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.Migrate(mctx); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	if _, err := s.Create(ctx, keystore.Record{OperationID: "op-2", Key: "k2", Kind: "pix"}, "w", time.Minute); err != nil {
		t.Fatalf("write after the second Migrate: %v", err)
	}
}
