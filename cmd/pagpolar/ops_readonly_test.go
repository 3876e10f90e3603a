package main

// The read commands of pagpolar ops and ops inbox, on each store (SQLite,
// PostgreSQL, Redis), change nothing: not a byte of a file (no -wal or
// -shm created either), not a row or table, not a key; and a store that
// does not exist is exit 2 and is not created.

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/redisstore"
	"github.com/pagpolar/pagpolar-go/keystore/sqlstore"
	"github.com/pagpolar/pagpolar-go/webhook"
	"github.com/pagpolar/pagpolar-go/webhook/redisinbox"
	"github.com/pagpolar/pagpolar-go/webhook/sqlinbox"
	"github.com/redis/go-redis/v9"
)

// readBackend is one store kind with a key store and an inbox holding one
// record each, and a snapshot of everything the test owns there.
type readBackend struct {
	keys, inbox          string // URLs
	missingKeys, noInbox string // URLs naming no store
	snapshot             func(t *testing.T) map[string]string
	warnOnRead           string // a warning each read command prints once ("" none)
}

const (
	roCred  = "cred_ro"
	roOp    = "pix:RO-1"
	roEvent = "TRANSACTION_PAID:sale_ro"
)

func seedKeyStore(t *testing.T, s keystore.Store) {
	t.Helper()
	if _, err := s.Create(context.Background(), keystore.Record{OperationID: pagpolar.RecordID(roCred, roOp), Key: "key-ro", Kind: "pix", Fingerprint: "f"}, "test", time.Millisecond); err != nil {
		t.Fatal(err)
	}
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func sqliteBackend(t *testing.T) readBackend {
	dir := t.TempDir()
	keys, inbox := filepath.Join(dir, "keys.db"), filepath.Join(dir, "inbox.db")
	ks, err := sqlstore.OpenSQLite(keys)
	if err != nil {
		t.Fatal(err)
	}
	if err := ks.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	seedKeyStore(t, ks)
	_ = ks.Close()
	is, err := sqlinbox.OpenSQLite(inbox)
	if err != nil {
		t.Fatal(err)
	}
	if err := is.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	settle(t, is, roEvent, webhook.StateDead)
	_ = is.Close()
	return readBackend{
		keys: "sqlite:" + keys, inbox: "sqlite:" + inbox,
		missingKeys: "sqlite:" + filepath.Join(dir, "nope.db"),
		// A key store is not an inbox: no inbox table is added to it.
		noInbox: "sqlite:" + keys,
		snapshot: func(t *testing.T) map[string]string {
			snap := map[string]string{}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				b, err := os.ReadFile(filepath.Join(dir, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				sum := sha256.Sum256(b)
				snap[e.Name()] = hex.EncodeToString(sum[:])
			}
			return snap
		},
	}
}

func postgresBackend(t *testing.T) readBackend {
	dsn := os.Getenv(pgEnv)
	if dsn == "" {
		t.Skip(pgEnv + " is not set")
	}
	schema := "ops_ro_" + randomSuffix()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if _, err := db.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.Exec("DROP SCHEMA " + schema + " CASCADE") })
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	// The schema is chosen through options=-c (a space inside: it must
	// reach pgx as %20, not '+'); async_commit=1 is the application's own
	// parameter, which must not reach the server.
	inSchema := dsn + sep + "options=-c%20search_path%3D" + schema
	ks, err := sqlstore.OpenPostgres(inSchema)
	if err != nil {
		t.Fatal(err)
	}
	if err := ks.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	seedKeyStore(t, ks)
	_ = ks.Close()
	is, err := sqlinbox.OpenPostgres(inSchema)
	if err != nil {
		t.Fatal(err)
	}
	if err := is.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	settle(t, is, roEvent, webhook.StateDead)
	_ = is.Close()
	return readBackend{
		keys: inSchema + "&async_commit=1", inbox: inSchema + "&async_commit=1",
		missingKeys: inSchema + "&table=nope", noInbox: inSchema + "&table=nope",
		snapshot: func(t *testing.T) map[string]string {
			snap := map[string]string{}
			rows, err := db.Query("SELECT table_name FROM information_schema.tables WHERE table_schema = $1", schema)
			if err != nil {
				t.Fatal(err)
			}
			var tables []string
			for rows.Next() {
				var n string
				if err := rows.Scan(&n); err != nil {
					t.Fatal(err)
				}
				tables = append(tables, n)
			}
			_ = rows.Close()
			for _, tb := range tables {
				var sum sql.NullString
				q := fmt.Sprintf("SELECT md5(string_agg(r::text, '|' ORDER BY r::text)) FROM %s.%s r", schema, tb)
				if err := db.QueryRow(q).Scan(&sum); err != nil {
					t.Fatal(err)
				}
				snap[tb] = sum.String
			}
			return snap
		},
	}
}

func redisBackend(t *testing.T) readBackend {
	raw := os.Getenv(redisEnv)
	if raw == "" {
		t.Skip(redisEnv + " is not set")
	}
	tag := "opsro" + randomSuffix()
	opt, err := redis.ParseURL(raw)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	ourKeys := func(t *testing.T) []string {
		keys, err := c.Keys(ctx, "*"+tag+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		return keys
	}
	t.Cleanup(func() {
		if keys := ourKeys(t); len(keys) > 0 {
			c.Del(ctx, keys...)
		}
	})
	ks, err := redisstore.New(c, redisstore.WithPrefix(tag), redisstore.AllowVolatile(), redisstore.WithLogger(quietLog()))
	if err != nil {
		t.Fatal(err)
	}
	seedKeyStore(t, ks)
	is, err := redisinbox.New(c, redisinbox.WithPrefix(tag+"-inbox"), redisinbox.AllowVolatile(), redisinbox.WithLogger(quietLog()))
	if err != nil {
		t.Fatal(err)
	}
	settle(t, is, roEvent, webhook.StateDead)
	sep := "?"
	if strings.Contains(raw, "?") {
		sep = "&"
	}
	var warn string
	if aof, _ := c.ConfigGet(ctx, "appendonly").Result(); aof["appendonly"] != "yes" {
		warn = "keeps no append-only file"
	}
	return readBackend{
		keys: raw + sep + "prefix=" + tag, inbox: raw + sep + "prefix=" + tag + "-inbox",
		missingKeys: raw + sep + "prefix=" + tag + "-none", noInbox: raw + sep + "prefix=" + tag + "-none",
		warnOnRead: warn,
		snapshot: func(t *testing.T) map[string]string {
			snap := map[string]string{}
			for _, k := range ourKeys(t) {
				v, err := c.Dump(ctx, k).Result()
				if err != nil {
					t.Fatal(err)
				}
				snap[k] = v
			}
			return snap
		},
	}
}

// readCommands are every read command of ops and ops inbox, with b's URLs.
func readCommands(b readBackend) [][]string {
	id := pagpolar.RecordID(roCred, roOp)
	return [][]string{
		{"list", "-store", b.keys},
		{"list", "-store", b.keys, "-json", "-limit", "1"},
		{"list", "-store", b.keys, "-state", "pending", "-credential", roCred},
		{"show", "-store", b.keys, id},
		{"show", "-store", b.keys, "-json", "-credential", roCred, roOp},
		{"settle", "-dry-run", "-store", b.keys, id},
		{"settle", "-dry-run", "-store", b.keys, "-credential", roCred, "-all"},
		{"reap", "-dry-run", "-store", b.keys},
		{"recover", "-store", b.keys},
		{"inbox", "list", "-store", b.inbox},
		{"inbox", "list", "-store", b.inbox, "-json", "-state", "dead"},
		{"inbox", "show", "-store", b.inbox, roEvent},
		{"inbox", "show", "-store", b.inbox, "-payload", roEvent},
		{"inbox", "reap", "-dry-run", "-store", b.inbox},
	}
}

func TestOpsReadCommandsChangeNothing(t *testing.T) {
	for name, mk := range map[string]func(*testing.T) readBackend{"sqlite": sqliteBackend, "postgres": postgresBackend, "redis": redisBackend} {
		t.Run(name, func(t *testing.T) {
			b := mk(t)
			was := b.snapshot(t)
			if len(was) == 0 {
				t.Fatal("the snapshot is empty: nothing to compare")
			}
			for _, args := range readCommands(b) {
				out, errs, code := ops(t, args...)
				if code != 0 || out == "" {
					t.Errorf("ops %s: exit %d\n%s%s", redactArgs(args), code, out, errs)
					continue
				}
				if strings.Contains(out, "no webhook event") || (args[0] == "show" && !strings.Contains(out, roOp)) ||
					(args[0] == "inbox" && args[1] == "show" && !strings.Contains(out, roEvent)) {
					t.Errorf("ops %s: the record is not shown:\n%s", redactArgs(args), out)
				}
				if n := strings.Count(errs, "warning:"); b.warnOnRead != "" && (n != 1 || !strings.Contains(errs, b.warnOnRead)) {
					t.Errorf("ops %s: want one warning naming %q, stderr:\n%s", redactArgs(args), b.warnOnRead, errs)
				} else if b.warnOnRead == "" && n != 0 {
					t.Errorf("ops %s: unexpected warning:\n%s", redactArgs(args), errs)
				}
			}
			for _, args := range [][]string{
				{"list", "-store", b.missingKeys},
				{"show", "-store", b.missingKeys, pagpolar.RecordID(roCred, roOp)},
				{"settle", "-dry-run", "-store", b.missingKeys, "-credential", roCred, "-all"},
				{"reap", "-dry-run", "-store", b.missingKeys},
				{"recover", "-store", b.missingKeys},
				{"inbox", "list", "-store", b.noInbox},
				{"inbox", "show", "-store", b.noInbox, roEvent},
				{"inbox", "reap", "-dry-run", "-store", b.noInbox},
			} {
				out, errs, code := ops(t, args...)
				if code != exitUsage || out != "" || !strings.Contains(errs, "no ") {
					t.Errorf("ops %s on no store: exit %d, stdout %q, stderr %q; want 2 saying there is none", redactArgs(args), code, out, errs)
				}
			}
			now := b.snapshot(t)
			if !maps.Equal(was, now) {
				t.Errorf("the read commands changed the store:\nbefore %v\nafter  %v", sortedKeys(was), sortedKeys(now))
				for k, v := range now {
					if was[k] != v {
						t.Errorf("changed or added: %s", k)
					}
				}
			}
		})
	}
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

// redactArgs shortens the store URLs of args for messages.
func redactArgs(args []string) string {
	out := slices.Clone(args)
	for i, a := range out {
		if len(a) > 60 {
			out[i] = a[:25] + "…" + a[len(a)-30:]
		}
	}
	return strings.Join(out, " ")
}

// TestOpsReadsARedisCluster: ops reaches the redis+cluster:// stores the
// SDK opens (a Cluster named by its nodes), read-only; without a Cluster
// at the address the error is the store's being unreachable (exit 1), not
// the URL's form.
func TestOpsReadsARedisCluster(t *testing.T) {
	if _, errs, code := ops(t, "list", "-store", "redis+cluster://127.0.0.1:1,127.0.0.1:2/?dial_timeout=500ms"); code != exitFailed || strings.Contains(errs, "scheme") {
		t.Errorf("list on an unreachable Cluster: exit %d, %q; want 1 (unreachable)", code, errs)
	}
	nodes := os.Getenv("PAGPOLAR_TEST_REDIS_CLUSTER")
	if nodes == "" {
		t.Skip("PAGPOLAR_TEST_REDIS_CLUSTER is not set (.ci/run starts one)")
	}
	prefix := "opsro" + randomSuffix()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(nodes, ",")})
	defer c.Close()
	t.Cleanup(func() { deleteClusterPrefix(t, strings.Split(nodes, ","), prefix) })
	s, err := redisstore.New(c, redisstore.WithPrefix(prefix), redisstore.AllowVolatile(), redisstore.WithLogger(quietLog()))
	if err != nil {
		t.Fatal(err)
	}
	seedKeyStore(t, s)
	url := "redis+cluster://" + nodes + "/?prefix=" + prefix
	for _, args := range [][]string{{"list", "-store", url}, {"show", "-store", url, pagpolar.RecordID(roCred, roOp)}, {"reap", "-dry-run", "-store", url}} {
		if out, errs, code := ops(t, args...); code != 0 {
			t.Errorf("ops %s: exit %d\n%s%s", redactArgs(args), code, out, errs)
		}
	}
	if _, errs, code := ops(t, "list", "-store", "redis+cluster://"+nodes+"/?prefix="+prefix+"-none"); code != exitUsage {
		t.Errorf("list under an empty prefix: exit %d %q", code, errs)
	}
}

// TestOpsInboxWritesNeedTheOptOut: on a Redis without an append-only file
// a read only warns, but retry (a write) is refused until the URL says
// ?volatile=1, as the SDK's own opener does.
func TestOpsInboxWritesNeedTheOptOut(t *testing.T) {
	b := redisBackend(t)
	if b.warnOnRead == "" {
		t.Skip("this Redis keeps an append-only file")
	}
	if _, errs, code := ops(t, "inbox", "retry", "-store", b.inbox, roEvent); code != exitFailed || !strings.Contains(errs, "?volatile=1") {
		t.Errorf("retry without the opt-out: exit %d, %q", code, errs)
	}
	if out, errs, code := ops(t, "inbox", "retry", "-store", b.inbox+"&volatile=1", roEvent); code != 0 || !strings.Contains(out, "received") {
		t.Errorf("retry with volatile=1: exit %d\n%s%s", code, out, errs)
	}
}
