package sqlinbox_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/pagpolar/pagpolar-go/webhook/sqlinbox"
)

// withSessionSetting returns dsn with a PostgreSQL run-time setting for its
// sessions only (the shared server's configuration is never touched).
func withSessionSetting(t *testing.T, dsn, setting string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("options", "-c "+setting)
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // pgx reads + literally
	return u.String()
}

// A PostgreSQL session with synchronous_commit off is refused at start-up
// unless the caller opts out by name; on (the default) needs nothing.
func TestPostgresRefusesAsyncCommit(t *testing.T) {
	dsn := os.Getenv("PAGPOLAR_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Skip("PAGPOLAR_TEST_POSTGRES_DSN is not set")
	}
	async := withSessionSetting(t, dsn, "synchronous_commit=off")
	if s, err := sqlinbox.OpenPostgres(async); !errors.Is(err, sqlinbox.ErrAsyncCommit) {
		if s != nil {
			_ = s.Close()
		}
		t.Fatalf("OpenPostgres with synchronous_commit=off: %v, want ErrAsyncCommit", err)
	}
	s, err := sqlinbox.OpenPostgres(async, sqlinbox.AllowAsyncCommit())
	if err != nil {
		t.Fatalf("OpenPostgres with AllowAsyncCommit: %v", err)
	}
	_ = s.Close()
	for _, setting := range []string{"synchronous_commit=on", "synchronous_commit=local", "synchronous_commit=remote_write"} {
		s, err := sqlinbox.OpenPostgres(withSessionSetting(t, dsn, setting))
		if err != nil {
			t.Fatalf("OpenPostgres with %s: %v", setting, err)
		}
		_ = s.Close()
	}

	// New on the caller's *sql.DB checks the same.
	db, err := sqlinboxDB(async)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := sqlinbox.New(db); !errors.Is(err, sqlinbox.ErrAsyncCommit) {
		t.Fatalf("New on a session with synchronous_commit=off: %v, want ErrAsyncCommit", err)
	}
	if _, err := sqlinbox.New(db, sqlinbox.AllowAsyncCommit()); err != nil {
		t.Fatalf("New with AllowAsyncCommit: %v", err)
	}
	var v string
	if err := db.QueryRowContext(context.Background(), "SHOW synchronous_commit").Scan(&v); err != nil || v != "off" {
		t.Fatalf("the session setting did not apply (%q, %v): the test proved nothing", v, err)
	}
}
