package main

// ops on stores that do not exist, and the read-only sessions of list and show.

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pagpolar/pagpolar-go/keystore/redisstore"
	"github.com/pagpolar/pagpolar-go/keystore/sqlstore"
	"github.com/redis/go-redis/v9"
)

// TestOpsReadCommandsNeverWrite: list and show open the store read-only. A
// store that does not exist, or holds no PagPolar table or key, is an
// error saying so (exit 2), and nothing is created; an existing store is
// left byte for byte as it was.
func TestOpsReadCommandsNeverWrite(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, url, want string
	}{
		{"typo in the file name", "sqlite:" + filepath.Join(dir, "typo.db"), "does not exist"},
		{"missing directory", "sqlite:" + filepath.Join(dir, "no", "such", "dir", "keys.db"), "does not exist"},
		{"memory", "memory:", "only inside the process"},
	} {
		for _, cmd := range [][]string{{"list"}, {"show", "cred/pix:x"}, {"settle", "-dry-run", "cred/pix:x"}, {"reap", "-dry-run"}} {
			out, errs, code := ops(t, append(cmd, "-store", c.url)...)
			if code != 2 || out != "" || !strings.Contains(errs, c.want) {
				t.Errorf("%s: ops %v: code %d, stdout %q, stderr %q; want 2 and %q", c.name, cmd, code, out, errs, c.want)
			}
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a read command created %v", entries)
	}

	// A SQLite file that is not a key store (here: an inbox's neighbour
	// table): "no table", and the table is not created.
	other := filepath.Join(dir, "other.db")
	db, err := sql.Open("sqlite", other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE orders (id TEXT)"); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	for _, cmd := range []string{"list", "settle", "reap"} {
		args := []string{cmd, "-store", "sqlite:" + other}
		if cmd == "settle" {
			t.Setenv("PAGPOLAR_TOKEN", "tok")
			args = append(args, "-credential", "c", "-all", "-base-url", "http://127.0.0.1:1/v1")
		}
		if _, errs, code := ops(t, args...); code != 2 || !strings.Contains(errs, "no table pagpolar_operations") {
			t.Errorf("ops %s on a file without the table: code %d %q", cmd, code, errs)
		}
	}
	db, _ = sql.Open("sqlite", other)
	var n int
	if err := db.QueryRow("SELECT count(*) FROM sqlite_master WHERE name = 'pagpolar_operations'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("the table was created (%d, %v)", n, err)
	}
	_ = db.Close()

	// An existing store: list and show leave the database file as it was.
	url := sqliteStore(t, "cred_1", "pix:A")
	path := strings.TrimPrefix(url, "sqlite:")
	was, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if out, errs, code := ops(t, "list", "-store", url); code != 0 || !strings.Contains(out, "cred_1/pix:A") {
		t.Fatalf("list: %d %s%s", code, out, errs)
	}
	if _, errs, code := ops(t, "show", "-store", url, "cred_1/pix:A"); code != 0 {
		t.Fatalf("show: %d %s", code, errs)
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, was) {
		t.Fatal("list or show changed the database file")
	}
}

func randomSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// TestOpsReadOnlyPostgres: against PostgreSQL, list on a table that does
// not exist says so (exit 2) and does not create it.
func TestOpsReadOnlyPostgres(t *testing.T) {
	dsn := os.Getenv(pgEnv)
	if dsn == "" {
		t.Skip(pgEnv + " is not set")
	}
	table := "ops_ro_" + randomSuffix()
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	url := dsn + sep + "table=" + table
	if _, errs, code := ops(t, "list", "-store", url); code != 2 || !strings.Contains(errs, "no table "+table) {
		t.Fatalf("list on a missing table: code %d %q", code, errs)
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var found sql.NullString
	if err := db.QueryRow("SELECT to_regclass($1)::text", table).Scan(&found); err != nil || found.Valid {
		t.Fatalf("table %s exists after list (%v)", table, err)
	}
	// With the table (made by the SDK's Migrate), list reads in a
	// read-only session.
	s, err := sqlstore.OpenPostgres(dsn, sqlstore.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t.Cleanup(func() { _, _ = db.Exec("DROP TABLE IF EXISTS " + table) })
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := ops(t, "list", "-store", url); code != 0 || !strings.Contains(out, "0 operation(s)") {
		t.Fatalf("list: code %d %s%s", code, out, errs)
	}
}

// TestOpsReadOnlyRedis: against Redis, list under a prefix that holds no
// store says so (exit 2) and writes no key.
func TestOpsReadOnlyRedis(t *testing.T) {
	raw := os.Getenv(redisEnv)
	if raw == "" {
		t.Skip(redisEnv + " is not set")
	}
	prefix := "ops-ro-" + randomSuffix()
	sep := "?"
	if strings.Contains(raw, "?") {
		sep = "&"
	}
	if _, errs, code := ops(t, "list", "-store", raw+sep+"prefix="+prefix); code != 2 || !strings.Contains(errs, prefix+":{"+prefix+":0}:mark") {
		t.Fatalf("list under an empty prefix: code %d %q", code, errs)
	}
	opt, err := redis.ParseURL(raw)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	defer c.Close()
	keys, err := c.Keys(context.Background(), prefix+"*").Result()
	if err != nil || len(keys) != 0 {
		t.Fatalf("list wrote %v (%v)", keys, err)
	}

	// A prefix the SDK wrote (shard markers) is a store: list reads it and reap removes from it (with the
	// store's own volatile=1: this Redis keeps nothing on disk).
	t.Cleanup(func() {
		if keys, err := c.Keys(context.Background(), prefix+"*").Result(); err == nil && len(keys) > 0 {
			c.Del(context.Background(), keys...)
		}
	})
	if _, err := redisstore.New(c, redisstore.WithPrefix(prefix), redisstore.AllowVolatile(),
		redisstore.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := ops(t, "list", "-store", raw+sep+"prefix="+prefix+"&volatile=1"); code != 0 || !strings.Contains(out, "0 operation(s)") {
		t.Fatalf("list under a prefix the SDK wrote: code %d %s%s", code, out, errs)
	}
	if out, errs, code := ops(t, "reap", "-store", raw+sep+"prefix="+prefix+"&volatile=1"); code != 0 || !strings.Contains(out, "removed 0 ") {
		t.Fatalf("reap under a prefix the SDK wrote: code %d %s%s", code, out, errs)
	}
}
