// Package reapload measures live charges while a reap removes a large
// number of expired records. It is a measurement, not a
// unit test: it runs only when PAGPOLAR_REAP_LOAD names the stores to
// measure (comma-separated: sqlite, postgres, redis), and prints its figures
// with t.Log (run with -v).
//
//	PAGPOLAR_REAP_LOAD=sqlite     stores to measure
//	PAGPOLAR_REAP_N=500000        expired records filled before the reap
//	PAGPOLAR_REAP_MODE=proc       proc: `pagpolar ops reap` in its own process; inproc: keystore.Reap on the live Store
//	PAGPOLAR_REAP_PAR=1           live callers
//	PAGPOLAR_REAP_BASE=8s         length of the baseline phases (before and after the reap)
//	PAGPOLAR_REAP_ARGS=""         extra `ops reap` flags (proc), e.g. "-batch 200"
//
// Each run: one real PIX charge through the SDK gives a settled record, which
// is copied N times with an UpdatedAt 40 days old (through the store's own
// schema: SQL INSERT ... SELECT, or the Redis hash and index the store
// writes); then live charges run for BASE (before), during the reap, and for
// BASE again (after). The ratios compare the reap phase with the mean of
// before and after.
package reapload

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/redisstore"
	"github.com/pagpolar/pagpolar-go/keystore/sqlstore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

const retention = 30 * 24 * time.Hour

var customer = pagpolar.Customer{Name: "Maria Silva", Email: "maria@example.com", Document: "12345678909", Phone: "11912345678"}

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// target is one store under measurement.
type target struct {
	store keystore.Store
	url   string // for `pagpolar ops reap -store`
	// fill copies the record of opID n times as state, last updated age
	// ago, their IDs opID-fill<tag>-<i>.
	fill func(t *testing.T, opID, tag string, n int, state string, age time.Duration)
	// expired counts the terminal records older than the cut-off.
	expired func(t *testing.T) int
	// explain prints query plans and index depth (SQL stores).
	explain func(t *testing.T)
}

func TestReapUnderLoad(t *testing.T) {
	which := os.Getenv("PAGPOLAR_REAP_LOAD")
	if which == "" {
		t.Skip("PAGPOLAR_REAP_LOAD not set (a measurement: see the package doc)")
	}
	n, _ := strconv.Atoi(env("PAGPOLAR_REAP_N", "500000"))
	par, _ := strconv.Atoi(env("PAGPOLAR_REAP_PAR", "1"))
	base, err := time.ParseDuration(env("PAGPOLAR_REAP_BASE", "8s"))
	if err != nil {
		t.Fatal(err)
	}
	mode := env("PAGPOLAR_REAP_MODE", "proc")
	var bin string
	if mode == "proc" {
		bin = filepath.Join(t.TempDir(), "pagpolar")
		out, err := exec.Command("go", "build", "-o", bin, "../../cmd/pagpolar").CombinedOutput()
		if err != nil {
			t.Fatalf("build: %v\n%s", err, out)
		}
	}
	for _, name := range strings.Split(which, ",") {
		t.Run(name, func(t *testing.T) {
			var tg target
			switch name {
			case "sqlite":
				tg = sqliteTarget(t)
			case "postgres":
				tg = postgresTarget(t)
			case "redis":
				tg = redisTarget(t)
			default:
				t.Fatalf("unknown store %q", name)
			}
			measure(t, tg, n, par, base, mode, bin)
		})
	}
}

type phase struct {
	lat   []time.Duration
	wall  time.Duration
	fails int
}

func (p phase) rate() float64 { return float64(len(p.lat)) / p.wall.Seconds() }

func (p phase) q(f float64) time.Duration {
	if len(p.lat) == 0 {
		return 0
	}
	s := slices.Clone(p.lat)
	slices.Sort(s)
	return s[min(len(s)-1, int(f*float64(len(s))))]
}

func (p phase) String() string {
	return fmt.Sprintf("%6.0f charges/s  p50 %7.2f ms  p99 %7.2f ms  max %7.1f ms  (%d charges, %d failed, %.1f s)",
		p.rate(), ms(p.q(0.5)), ms(p.q(0.99)), ms(p.q(1)), len(p.lat), p.fails, p.wall.Seconds())
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func measure(t *testing.T, tg target, n, par int, base time.Duration, mode, bin string) {
	ctx := context.Background()
	srv := pagpolartest.NewServer(t)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}}
	c, err := pagpolar.NewClient(srv.CredentialID, pagpolar.StaticToken(srv.Token), pagpolar.WithBaseURL(srv.URL),
		pagpolar.WithHTTPClient(hc), pagpolar.WithStore(tg.store))
	if err != nil {
		t.Fatal(err)
	}
	var seq atomic.Int64
	charge := func() error {
		ref := fmt.Sprintf("live-%d-%d", time.Now().UnixNano(), seq.Add(1))
		_, err := c.Payments.Pix(ctx, pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: ref, Customer: customer})
		return err
	}
	if err := charge(); err != nil {
		t.Fatal(err)
	}
	recs, err := tg.store.List(ctx, keystore.Filter{States: []keystore.State{keystore.StateSucceeded}, Limit: 1})
	if err != nil || len(recs) != 1 {
		t.Fatalf("template record: %v %d", err, len(recs))
	}
	// run runs live charges until stop is closed (or for d when stop is nil).
	run := func(d time.Duration, stop <-chan struct{}) phase {
		var mu sync.Mutex
		var p phase
		var wg sync.WaitGroup
		end := time.Now().Add(d)
		t0 := time.Now()
		for range par {
			wg.Go(func() {
				var lat []time.Duration
				fails := 0
				stopped := func() bool {
					if stop == nil {
						return time.Now().After(end)
					}
					select {
					case <-stop:
						return true
					default:
						return false
					}
				}
				for !stopped() {
					s := time.Now()
					if err := charge(); err != nil {
						fails++
						if fails < 3 {
							t.Logf("charge: %v", err)
						}
						continue
					}
					lat = append(lat, time.Since(s))
				}
				mu.Lock()
				p.lat = append(p.lat, lat...)
				p.fails += fails
				mu.Unlock()
			})
		}
		wg.Wait()
		p.wall = time.Since(t0)
		return p
	}

	reap := func() (string, time.Duration, error) {
		s := time.Now()
		if mode == "inproc" {
			o := keystore.ReapOptions{Retention: retention}
			fs := flag.NewFlagSet("reap", flag.ContinueOnError)
			fs.IntVar(&o.Batch, "batch", 0, "")
			fs.Float64Var(&o.Yield, "yield", 0, "")
			fs.DurationVar(&o.MinPause, "min-pause", 0, "")
			fs.DurationVar(&o.MaxPause, "max-pause", 0, "")
			if err := fs.Parse(strings.Fields(os.Getenv("PAGPOLAR_REAP_ARGS"))); err != nil {
				return "", 0, err
			}
			var batches int
			var busy, paused time.Duration
			o.Progress = func(b keystore.ReapBatch) { batches++; busy += b.Took; paused += b.Pause }
			k, err := keystore.ReapWith(ctx, tg.store, o)
			return fmt.Sprintf("removed %d in %d batches: %.1f s deleting, %.1f s paused", k, batches, busy.Seconds(), paused.Seconds()), time.Since(s), err
		}
		args := append([]string{"ops", "reap", "-store", tg.url}, strings.Fields(os.Getenv("PAGPOLAR_REAP_ARGS"))...)
		out, err := exec.Command(bin, args...).CombinedOutput()
		return strings.ReplaceAll(strings.TrimSpace(string(out)), "\n", "; "), time.Since(s), err
	}

	rounds, _ := strconv.Atoi(env("PAGPOLAR_REAP_ROUNDS", "1"))
	t.Logf("load average at start: %s", loadavg())
	prev := run(base, nil)
	t.Logf("base 0: %s", prev)
	var tput, p99s, p50s []float64
	for r := range rounds {
		start := time.Now()
		tg.fill(t, recs[0].OperationID, fmt.Sprintf("r%d", r), n, "succeeded", 40*24*time.Hour)
		t.Logf("round %d: filled %d expired records in %.1f s; expired now %d", r, n, time.Since(start).Seconds(), tg.expired(t))
		stop := make(chan struct{})
		var reapOut string
		var reapWall time.Duration
		var reapErr error
		go func() {
			defer close(stop)
			reapOut, reapWall, reapErr = reap()
		}()
		during := run(0, stop)
		<-stop // with no live callers, run returns at once
		t.Logf("round %d: during the %s reap (%.1f s, load average %s): %s", r, mode, reapWall.Seconds(), loadavg(), during)
		t.Logf("round %d: reap: %s (err %v)", r, reapOut, reapErr)
		next := run(base, nil)
		t.Logf("base %d: %s", r+1, next)
		if left := tg.expired(t); reapErr != nil || left != 0 {
			t.Errorf("reap: %v, %d expired records left", reapErr, left)
		}
		if during.fails > 0 {
			t.Errorf("%d live charges failed during the reap", during.fails)
		}
		ref := phase{lat: append(slices.Clone(prev.lat), next.lat...), wall: prev.wall + next.wall}
		tput = append(tput, during.rate()/ref.rate())
		p99s = append(p99s, ms(during.q(0.99))/ms(ref.q(0.99)))
		p50s = append(p50s, ms(during.q(0.5))/ms(ref.q(0.5)))
		t.Logf("RESULT round %d %s %s par=%d n=%d: throughput %.2fx (%.0f vs %.0f/s), p99 %.2fx (%.2f vs %.2f ms), p50 %.2fx, reap %.1f s",
			r, t.Name(), mode, par, n, tput[r], during.rate(), ref.rate(),
			p99s[r], ms(during.q(0.99)), ms(ref.q(0.99)), p50s[r], reapWall.Seconds())
		prev = next
	}
	t.Logf("SUMMARY %s %s par=%d n=%d rounds=%d args=%q: throughput median %s, p99 median %s, p50 median %s; load average at end %s",
		t.Name(), mode, par, n, rounds, os.Getenv("PAGPOLAR_REAP_ARGS"), medRange(tput), medRange(p99s), medRange(p50s), loadavg())
}

// medRange is "median (min–max)" of xs, as ratios.
func medRange(xs []float64) string {
	s := slices.Clone(xs)
	slices.Sort(s)
	return fmt.Sprintf("%.2fx (%.2f–%.2f)", s[len(s)/2], s[0], s[len(s)-1])
}

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
