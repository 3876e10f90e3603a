package sqlinbox_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/webhook"
	"github.com/pagpolar/pagpolar-go/webhook/inboxtest"
	"github.com/pagpolar/pagpolar-go/webhook/sqlinbox"
)

// newSQLite returns a migrated store on a fresh file in t.TempDir().
func newSQLite(t testing.TB) *sqlinbox.Store {
	t.Helper()
	s, err := sqlinbox.OpenSQLite(filepath.Join(t.TempDir(), "inbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// newPostgres returns a migrated store on a table of its own, dropped at the
// end; it skips when PAGPOLAR_TEST_POSTGRES_DSN is unset and fails when the
// database cannot be reached.
func newPostgres(t testing.TB) *sqlinbox.Store {
	t.Helper()
	dsn := os.Getenv("PAGPOLAR_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Skip("PAGPOLAR_TEST_POSTGRES_DSN is not set: skipping the PostgreSQL store")
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	table := "inbox_test_" + hex.EncodeToString(b)
	s, err := sqlinbox.OpenPostgres(dsn, sqlinbox.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Migrate(ctx); err != nil {
		_ = s.Close()
		t.Fatalf("PostgreSQL at PAGPOLAR_TEST_POSTGRES_DSN: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		db, err := sqlinboxDB(dsn)
		if err == nil {
			_, err = db.ExecContext(ctx, "DROP TABLE IF EXISTS "+table)
			_ = db.Close()
		}
		if err != nil {
			t.Errorf("drop %s: %v", table, err)
		}
		_ = s.Close()
	})
	return s
}

func TestSQLiteConformance(t *testing.T) {
	inboxtest.Run(t, func(t *testing.T) webhook.Store { return newSQLite(t) })
}

func TestPostgresConformance(t *testing.T) {
	if os.Getenv("PAGPOLAR_TEST_POSTGRES_DSN") == "" {
		t.Skip("PAGPOLAR_TEST_POSTGRES_DSN is not set: skipping the PostgreSQL store")
	}
	inboxtest.Run(t, func(t *testing.T) webhook.Store { return newPostgres(t) })
}
