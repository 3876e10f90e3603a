// The stores the reap load is measured on: how each is opened, filled with
// expired records and its expired records counted.

package reapload

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore/redisstore"
	"github.com/pagpolar/pagpolar-go/keystore/sqlstore"
	"github.com/redis/go-redis/v9"
)

// The SQL fills copy the template row n times in chunks, UpdatedAt 40 days
// back (each copy one millisecond apart).
func sqlFill(t *testing.T, db *sql.DB, table, opID, tag string, n int, state string, age time.Duration, series func(lo, hi int) string) {
	cols := "idempotency_key, kind, fingerprint, version, attempts, first_sent_at, last_sent_at, result_ref, " +
		"result_data, error_text, meta_data, lease_owner, lease_token, lease_expires_at"
	old := time.Now().Add(-age).UnixMilli() - int64(n)
	const chunk = 50000
	for lo := 0; lo < n; lo += chunk {
		hi := min(n, lo+chunk)
		q := fmt.Sprintf("INSERT INTO %[1]s (operation_id, state, %[2]s, created_at, updated_at) SELECT r.operation_id || '-fill%[5]s-' || g.n, $2, %[2]s, %[3]d + g.n, %[3]d + g.n "+
			"FROM %[1]s r, (%[4]s) g WHERE r.operation_id = $1", table, cols, old, series(lo, hi), tag)
		if _, err := db.Exec(q, opID, state); err != nil {
			t.Fatalf("fill: %v", err)
		}
	}
}

func sqlExpired(t *testing.T, db *sql.DB, table string) int {
	var k int
	cut := time.Now().Add(-retention).UnixMilli()
	if err := db.QueryRow(fmt.Sprintf("SELECT count(*) FROM %s WHERE state IN ('succeeded','failed') AND updated_at < $1", table), cut).Scan(&k); err != nil {
		t.Fatal(err)
	}
	return k
}

func sqliteTarget(t *testing.T) target {
	path := filepath.Join(t.TempDir(), "keys.db")
	s, err := sqlstore.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	return target{
		store: s,
		url:   "sqlite:" + path,
		fill: func(t *testing.T, opID, tag string, n int, state string, age time.Duration) {
			sqlFill(t, db, sqlstore.DefaultTable, opID, tag, n, state, age, func(lo, hi int) string {
				return fmt.Sprintf("WITH RECURSIVE c(n) AS (SELECT %d UNION ALL SELECT n+1 FROM c WHERE n < %d) SELECT n FROM c", lo, hi-1)
			})
			if _, err := db.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
				t.Fatal(err)
			}
			if fi, err := os.Stat(path); err == nil {
				t.Logf("SQLite file %d bytes", fi.Size())
			}
		},
		expired: func(t *testing.T) int { return sqlExpired(t, db, sqlstore.DefaultTable) },
		explain: func(t *testing.T) {
			explainSQL(t, db, "EXPLAIN QUERY PLAN ", sqlstore.DefaultTable)
			// B-tree depth of the table and its indexes (dbstat, when compiled in).
			rows, err := db.Query("SELECT name, max(length(path) - length(replace(path, '/', ''))) + 1, count(*) FROM dbstat GROUP BY name")
			if err != nil {
				t.Logf("dbstat: %v", err)
				return
			}
			defer rows.Close()
			for rows.Next() {
				var name string
				var depth, pages int
				_ = rows.Scan(&name, &depth, &pages)
				t.Logf("DEPTH %s: %d levels, %d pages", name, depth, pages)
			}
		},
	}
}

var pgSeq atomic.Int64

func postgresTarget(t *testing.T) target {
	dsn := os.Getenv("PAGPOLAR_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Skip("PAGPOLAR_TEST_POSTGRES_DSN not set")
	}
	table := fmt.Sprintf("reapload_%d_%d", os.Getpid(), pgSeq.Add(1))
	s, err := sqlstore.OpenPostgres(dsn, sqlstore.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Close()
		_, _ = db.Exec("DROP TABLE IF EXISTS " + table)
		_, _ = db.Exec("DROP TABLE IF EXISTS " + table + "_meta")
		_ = db.Close()
	})
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return target{
		store: s,
		url:   dsn + sep + "table=" + table,
		fill: func(t *testing.T, opID, tag string, n int, state string, age time.Duration) {
			sqlFill(t, db, table, opID, tag, n, state, age, func(lo, hi int) string {
				return fmt.Sprintf("SELECT generate_series(%d, %d) AS n", lo, hi-1)
			})
			if _, err := db.Exec("VACUUM ANALYZE " + table); err != nil {
				t.Fatal(err)
			}
			var size int64
			if err := db.QueryRow("SELECT pg_total_relation_size($1)", table).Scan(&size); err == nil {
				t.Logf("PostgreSQL table %d bytes", size)
			}
		},
		expired: func(t *testing.T) int { return sqlExpired(t, db, table) },
		explain: func(t *testing.T) {
			explainSQL(t, db, "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ", table)
			for _, ix := range []string{table + "_pkey", table + "_state_updated", table + "_updated"} {
				var depth int
				var size int64
				// The root's level in the b-tree metapage (pageinspect), else only sizes.
				if err := db.QueryRow("SELECT level FROM bt_metap($1)", ix).Scan(&depth); err != nil {
					depth = -1
				}
				_ = db.QueryRow("SELECT pg_relation_size($1)", ix).Scan(&size)
				t.Logf("DEPTH %s: root level %d (-1: pageinspect not installed), %d bytes", ix, depth, size)
			}
		},
	}
}

// startRedis starts a private redis-server on a free loopback port, without
// persistence (the reap is what is measured), and stops it at the end.
func startRedis(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	dir := t.TempDir()
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no")
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for i := 0; i < 100; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			_ = c.Close()
			return addr
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("redis-server did not start")
	return ""
}

// fillScript copies a template record (redisstore's record layout r1: a
// cmsgpack array whose items 2, 6, 18 and 19 are the operation ID, state,
// CreatedAt and UpdatedAt) under a new ID, with its index entry. KEYS = the
// new record, its index; ARGV = template value, ID, state, time (µs), TTL
// (ms, 0: none), the template's ID (checked, so that a change of layout
// fails here instead of filling garbage).
var fillScript = redis.NewScript(`
local r = cmsgpack.unpack(ARGV[1])
if r[1] ~= 'r1' or r[2] ~= ARGV[6] then return redis.error_reply('fill: template is not a record of layout r1') end
r[2], r[6], r[18], r[19] = ARGV[2], ARGV[3], ARGV[4], ARGV[4]
redis.call('SET', KEYS[1], cmsgpack.pack(r))
if ARGV[5] ~= '0' then redis.call('PEXPIRE', KEYS[1], ARGV[5]) end
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[2])
return 1
`)

func redisTarget(t *testing.T) target {
	addr := startRedis(t)
	const prefix, shards = "reapload", 16
	rc := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64})
	t.Cleanup(func() { _ = rc.Close() })
	// Redis removes a terminal record by its TTL one retention after its
	// last update, and each terminal Update drops two index entries older
	// than that: a record older than the reap's cut-off exists only when the
	// store's retention is longer than the reap's, as here (90 days, reap at
	// 30; the copies get the TTL such a record has left).
	s, err := redisstore.New(rc, redisstore.WithPrefix(prefix), redisstore.AllowVolatile(), redisstore.WithRetention(90*24*time.Hour),
		redisstore.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	// The store's layout 2 (see redisstore's package doc).
	shardOf := func(id string) int {
		h := fnv.New32a()
		h.Write([]byte(id))
		return int(h.Sum32() % shards)
	}
	keyTag := func(sh int) string { return fmt.Sprintf("%s:{%s:%d}:", prefix, prefix, sh) }
	ctx := context.Background()
	return target{
		store: s,
		url:   "redis://" + addr + "/0?prefix=" + prefix + "&volatile=1",
		fill: func(t *testing.T, opID, tag string, n int, state string, age time.Duration) {
			tmpl, err := rc.Get(ctx, keyTag(shardOf(opID))+"op:"+opID).Result()
			if err != nil {
				t.Fatalf("template record: %v", err)
			}
			old := time.Now().Add(-age).UnixMicro() - int64(n)*1000
			ttl := int64(0)
			if state == "succeeded" {
				ttl = (90*24*time.Hour - age).Milliseconds()
			}
			for lo := 0; lo < n; lo += 5000 {
				pipe := rc.Pipeline()
				for i := lo; i < min(n, lo+5000); i++ {
					id := fmt.Sprintf("%s-fill%s-%d", opID, tag, i)
					ts := strconv.FormatInt(old+int64(i)*1000, 10)
					sh := shardOf(id)
					fillScript.Eval(ctx, pipe, []string{keyTag(sh) + "op:" + id, keyTag(sh) + "ix:" + state},
						tmpl, id, state, ts, ttl, opID)
				}
				if _, err := pipe.Exec(ctx); err != nil {
					t.Fatal(err)
				}
			}
			info, _ := rc.Info(ctx, "memory").Result()
			for _, l := range strings.Split(info, "\n") {
				if strings.HasPrefix(l, "used_memory:") {
					t.Logf("Redis %s", strings.TrimSpace(l))
				}
			}
		},
		expired: func(t *testing.T) int {
			cut := strconv.FormatInt(time.Now().Add(-retention).UnixMicro(), 10)
			k := 0
			for sh := range shards {
				m, err := rc.ZCount(ctx, keyTag(sh)+"ix:succeeded", "-inf", "("+cut).Result()
				if err != nil {
					t.Fatal(err)
				}
				k += int(m)
			}
			return k
		},
	}
}
