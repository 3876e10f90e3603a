package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/sqlstore"
	"github.com/pagpolar/pagpolar-go/keystore/storetest"
)

// sqliteBackend is a migrated SQLite store whose file a second connection
// can empty (DELETE FROM) or make forget single records.
func sqliteBackend(t *testing.T) storetest.AmnesiaBackend {
	path := filepath.Join(t.TempDir(), "ops.db")
	open := func(t *testing.T) keystore.Store {
		s, err := sqlstore.OpenSQLite(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		if err := s.Migrate(context.Background()); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
		return s
	}
	s := open(t)
	admin, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close() })
	return storetest.AmnesiaBackend{
		Store:  s,
		Wipe:   func(t *testing.T) { exec(t, admin, "DELETE FROM "+sqlstore.DefaultTable) },
		Lose:   func(t *testing.T, ids ...string) { deleteIDs(t, admin, sqlstore.DefaultTable, ids) },
		Reopen: open,
	}
}

func exec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(context.Background(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func deleteIDs(t *testing.T, db *sql.DB, table string, ids []string) {
	t.Helper()
	for _, id := range ids {
		exec(t, db, "DELETE FROM "+table+" WHERE operation_id = $1", id)
	}
}

func TestAmnesiaSQLite(t *testing.T) {
	storetest.RunAmnesia(t, sqliteBackend)
}

func TestAmnesiaPostgres(t *testing.T) {
	var pg sharedPG
	t.Cleanup(pg.close)
	db := pg.get(t)
	for _, batch := range []int{256, 1} {
		t.Run(map[int]string{256: "Batched", 1: "Unbatched"}[batch], func(t *testing.T) {
			storetest.RunAmnesia(t, func(t *testing.T) storetest.AmnesiaBackend {
				first := newPostgres(t, db, sqlstore.WithMaxBatch(batch))
				table := first.Table()
				return storetest.AmnesiaBackend{
					Store: first,
					Wipe:  func(t *testing.T) { exec(t, db, "DELETE FROM "+table) },
					Lose:  func(t *testing.T, ids ...string) { deleteIDs(t, db, table, ids) },
					Reopen: func(t *testing.T) keystore.Store {
						s, err := sqlstore.New(db, sqlstore.WithTable(table), sqlstore.WithMaxBatch(batch))
						if err != nil {
							t.Fatal(err)
						}
						t.Cleanup(func() { _ = s.Close() })
						if err := s.Migrate(context.Background()); err != nil {
							t.Fatal(err)
						}
						return s
					},
				}
			})
		})
	}
}

// TestAmnesiaSQLiteFileReplaced: the database file is replaced by a new
// one at the same path while the Store has it open (its connections still
// write the old, deleted file). The next write is refused, the new file is
// marked lost, and a process that opens the new file refuses Create too.
func TestAmnesiaSQLiteFileReplaced(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "ops.db")
	s, err := sqlstore.OpenSQLite(path)
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
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(path + suffix); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	// A fresh, empty file at the same path (what a restore of an empty
	// volume or a careless clean-up leaves).
	fresh, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	exec(t, fresh, "CREATE TABLE unrelated (x INTEGER)")
	_ = fresh.Close()

	_, err = s.Create(ctx, rec("after"), "w", time.Minute)
	if !errors.Is(err, keystore.ErrAmnesia) || !strings.Contains(err.Error(), "replaced") {
		t.Fatalf("Create after the file was replaced: %v; want ErrAmnesia naming the replaced file", err)
	}
	if _, err := s.Create(ctx, rec("after"), "w", time.Minute); !errors.Is(err, keystore.ErrAmnesia) {
		t.Fatalf("second Create: %v; want ErrAmnesia", err)
	}
	other, err := sqlstore.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Create(ctx, rec("other"), "w", time.Minute); !errors.Is(err, keystore.ErrAmnesia) {
		t.Fatalf("Create by a process that opened the new file: %v; want ErrAmnesia", err)
	}
	if err := other.AcceptLoss(ctx, "test: the file was replaced on purpose"); err != nil {
		t.Fatal(err)
	}
	for _, st := range []*sqlstore.Store{other, s} {
		if _, err := st.Create(ctx, rec("after-accept"+st.Table()), "w", time.Minute); err != nil && !errors.Is(err, keystore.ErrExists) {
			t.Fatalf("Create after AcceptLoss: %v", err)
		}
	}
	if _, err := other.Get(ctx, "before"); !errors.Is(err, keystore.ErrNotFound) {
		t.Fatalf("Get(before) on the new file: %v", err)
	}
}

// TestPostgresRefusesAsyncCommit: a session with synchronous_commit off
// (set here through the connection's options, nothing is reconfigured on
// the server) is refused by Migrate, and by the first Create of a Store
// that was not migrated, unless AllowAsyncCommit is given.
func TestPostgresRefusesAsyncCommit(t *testing.T) {
	dsn := postgresDSN(t)
	ctx := context.Background()
	off := dsn + "&options=-c%20synchronous_commit%3Doff"
	table := "pagpolar_test_" + randomSuffix(t)
	var admin sharedPG
	t.Cleanup(admin.close)
	adb := admin.get(t)
	t.Cleanup(func() {
		exec(t, adb, "DROP TABLE IF EXISTS "+table)
		exec(t, adb, "DROP TABLE IF EXISTS "+table+"_meta")
	})
	s, err := sqlstore.OpenPostgres(off, sqlstore.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.Migrate(ctx)
	if !errors.Is(err, sqlstore.ErrAsyncCommit) || !strings.Contains(err.Error(), "AllowAsyncCommit") {
		t.Fatalf("Migrate with synchronous_commit off: %v; want ErrAsyncCommit naming the opt-out", err)
	}
	ok, err := sqlstore.OpenPostgres(off, sqlstore.WithTable(table), sqlstore.AllowAsyncCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer ok.Close()
	if err := ok.Migrate(ctx); err != nil {
		t.Fatalf("Migrate with AllowAsyncCommit: %v", err)
	}
	if _, err := ok.Create(ctx, rec("x"), "w", time.Minute); err != nil {
		t.Fatal(err)
	}
	// A Store that was not migrated checks at its first Create.
	lazy, err := sqlstore.OpenPostgres(off, sqlstore.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	defer lazy.Close()
	if _, err := lazy.Create(ctx, rec("y"), "w", time.Minute); !errors.Is(err, sqlstore.ErrAsyncCommit) {
		t.Fatalf("first Create with synchronous_commit off: %v; want ErrAsyncCommit", err)
	}
	// The default (on) needs no opt-out.
	on := newPostgres(t, adb)
	if _, err := on.Create(ctx, rec("z"), "w", time.Minute); err != nil {
		t.Fatal(err)
	}
}

// TestAmnesiaDetectionTime measures how long after the loss the first
// Create is refused (the check is part of that Create), for a table
// emptied and for the last acknowledged record lost alone.
func TestAmnesiaDetectionTime(t *testing.T) {
	kinds := map[string]func(t *testing.T) (keystore.Store, *sql.DB, string){
		"sqlite": func(t *testing.T) (keystore.Store, *sql.DB, string) {
			path := filepath.Join(t.TempDir(), "ops.db")
			s, err := sqlstore.OpenSQLite(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			if err := s.Migrate(context.Background()); err != nil {
				t.Fatal(err)
			}
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close() })
			return s, db, s.Table()
		},
		"postgres": func(t *testing.T) (keystore.Store, *sql.DB, string) {
			var pg sharedPG
			t.Cleanup(pg.close)
			db := pg.get(t)
			s := newPostgres(t, db)
			return s, db, s.Table()
		},
	}
	for name, open := range kinds {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			for _, how := range []string{"table emptied", "last record lost"} {
				s, db, table := open(t)
				for i := range 50 {
					if _, err := s.Create(ctx, rec(fmt.Sprintf("r%d", i)), "w", time.Minute); err != nil {
						t.Fatal(err)
					}
				}
				if how == "table emptied" {
					exec(t, db, "DELETE FROM "+table)
				} else {
					exec(t, db, "DELETE FROM "+table+" WHERE operation_id = 'r49'")
				}
				start := time.Now()
				_, err := s.Create(ctx, rec("r49"), "w", time.Minute)
				took := time.Since(start)
				if !errors.Is(err, keystore.ErrAmnesia) {
					t.Fatalf("%s: Create after the loss: %v", how, err)
				}
				t.Logf("%s, %s: the first Create after the loss refused in %v", name, how, took.Round(time.Microsecond))
			}
		})
	}
}
