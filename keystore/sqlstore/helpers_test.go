package sqlstore_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/pagpolar/pagpolar-go/keystore/sqlstore"
)

func randomSuffix(t testing.TB) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// newSQLite opens a migrated store on a new file in a temporary directory.
func newSQLite(t testing.TB, opts ...sqlstore.Option) *sqlstore.Store {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ops.db")
	s, err := sqlstore.OpenSQLite(path, opts...)
	if err != nil {
		t.Fatalf("OpenSQLite: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s
}

// postgresDSN returns PAGPOLAR_TEST_POSTGRES_DSN or skips the test.
func postgresDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("PAGPOLAR_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Skip("PAGPOLAR_TEST_POSTGRES_DSN is not set (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable): skipping PostgreSQL tests")
	}
	return dsn
}

// sharedPG is one connection pool for every PostgreSQL test of a test
// function, so parallel subtests stay well under max_connections.
type sharedPG struct {
	once sync.Once
	db   *sql.DB
	err  error
}

func (p *sharedPG) get(t testing.TB) *sql.DB {
	t.Helper()
	dsn := postgresDSN(t)
	p.once.Do(func() {
		p.db, p.err = sql.Open("pgx", dsn)
		if p.err == nil {
			p.db.SetMaxOpenConns(20)
			p.err = p.db.PingContext(context.Background())
		}
	})
	if p.err != nil {
		t.Fatalf("PostgreSQL at PAGPOLAR_TEST_POSTGRES_DSN unreachable: %v", p.err)
	}
	return p.db
}

func (p *sharedPG) close() {
	if p.db != nil {
		_ = p.db.Close()
	}
}

// newPostgres returns a migrated store on a table of its own in db, dropped
// on clean-up.
func newPostgres(t testing.TB, db *sql.DB, opts ...sqlstore.Option) *sqlstore.Store {
	t.Helper()
	table := "pagpolar_test_" + randomSuffix(t)
	s, err := sqlstore.New(db, append(opts, sqlstore.WithTable(table))...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		for _, tb := range []string{table, table + "_meta"} {
			if _, err := db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+tb); err != nil {
				t.Errorf("drop %s: %v", tb, err)
			}
		}
	})
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s
}
