package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/sqlstore"
	"github.com/pagpolar/pagpolar-go/keystore/storetest"
)

// openAt opens and migrates a SQLite store at path (closed by the test's
// end unless closed before).
func openAt(t *testing.T, path string, opts ...sqlstore.Option) *sqlstore.Store {
	t.Helper()
	s, err := sqlstore.OpenSQLite(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s
}

func removeDB(t *testing.T, path string) {
	t.Helper()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600) // in place: the same inode
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
}

// backup writes a consistent copy of the database at path to a new file.
func backup(t *testing.T, _ *sqlstore.Store, path string) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), "backup.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("VACUUM INTO ?", to); err != nil {
		t.Fatal(err)
	}
	return to
}

// A database file deleted while the application was stopped: the new
// process's store refuses (the file beside remembers the old one), and
// nothing is charged twice.
func TestHistory_SQLiteDeletedFileIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ops.db")
	var first *sqlstore.Store
	r := storetest.HistoryLossRun(t, 20,
		func(t *testing.T) keystore.Store {
			first = openAt(t, path, sqlstore.DeclaredNew("test: a new file"))
			return first
		},
		func(t *testing.T) { _ = first.Close(); removeDB(t, path) },
		func(t *testing.T) keystore.Store { return openAt(t, path) })
	storetest.CheckHistoryLoss(t, r, false)
	if r.Refused != 2*r.Orders {
		t.Errorf("%d of %d calls refused after the file was deleted, want all", r.Refused, 2*r.Orders)
	}
}

// The same with the file beside deleted too: indistinguishable from a new
// file, so the history is unproven and every first send is looked up.
func TestHistory_SQLiteDeletedFileAndSidecarIsUnproven(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ops.db")
	var first *sqlstore.Store
	r := storetest.HistoryLossRun(t, 20,
		func(t *testing.T) keystore.Store {
			first = openAt(t, path, sqlstore.DeclaredNew("test: a new file"))
			return first
		},
		func(t *testing.T) { _ = first.Close(); removeDB(t, path); _ = os.Remove(path + "-pagpolar") },
		func(t *testing.T) keystore.Store { return openAt(t, path) })
	storetest.CheckHistoryLoss(t, r, true)
}

// A backup restored while the application was stopped: refused.
func TestHistory_SQLiteRestoredBackupIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ops.db")
	var first *sqlstore.Store
	var saved string
	r := storetest.HistoryLossRun(t, 20,
		func(t *testing.T) keystore.Store {
			first = openAt(t, path, sqlstore.DeclaredNew("test: a new file"))
			saved = backup(t, first, path)
			return first
		},
		func(t *testing.T) { _ = first.Close(); removeDB(t, path); copyFile(t, saved, path) },
		func(t *testing.T) keystore.Store { return openAt(t, path) })
	storetest.CheckHistoryLoss(t, r, false)
	if r.Refused != 2*r.Orders {
		t.Errorf("%d of %d calls refused after the restore, want all", r.Refused, 2*r.Orders)
	}
}

// A backup copied over the file a process has open: no call wedges (each
// returns within the call timeout), and once the process is gone the file
// is refused: the file beside remembers a later generation.
func TestHistory_SQLiteBackupCopiedOverLiveFileFailsClosed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ops.db")
	s := openAt(t, path, sqlstore.DeclaredNew("test: a new file"), sqlstore.WithCallTimeout(2*time.Second))
	ctx := context.Background()
	saved := backup(t, s, path)
	for i := range 50 {
		if _, err := s.Create(ctx, keystore.Record{OperationID: fmt.Sprintf("before-%d", i)}, "w", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(t, saved, path)
	var worst time.Duration
	refused := 0
	for i := range 50 {
		start := time.Now()
		_, err := s.Create(ctx, keystore.Record{OperationID: fmt.Sprintf("after-%d", i)}, "w", time.Minute)
		worst = max(worst, time.Since(start))
		if err != nil {
			refused++
		}
	}
	t.Logf("50 Creates after the copy: %d refused, the slowest in %v", refused, worst.Round(time.Millisecond))
	if worst > 3*time.Second {
		t.Fatalf("a Create after the copy took %v, beyond the call timeout", worst)
	}
	_ = s.Close()
	again, err := sqlstore.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	err = again.Migrate(ctx)
	if err == nil {
		_, err = again.Create(ctx, keystore.Record{OperationID: "next"}, "w", time.Minute)
	}
	t.Logf("a new process on the file: %v", err)
	if !errors.Is(err, keystore.ErrUnavailable) {
		t.Fatalf("a new process on a file a backup was copied over: %v; want a refusal", err)
	}
}
