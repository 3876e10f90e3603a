package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/internal/report"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/storeurl"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
	"github.com/redis/go-redis/v9"
)

// The tests of this file prove the engine across processes: crash
// points that SIGKILL a worker process, a new process that settles what it
// left, and a store that goes away mid-run.

// testMainEnv makes the test binary act as the pagpolar command: the tests
// start it as the worker process, so no build step is needed and, under
// -race, the workers are race-checked too.
const testMainEnv = "PAGPOLAR_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(testMainEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// crashWindow is the in-processing window of the fault-free crash tests:
// leases last 3 windows and an attempt half of one, which a loaded machine
// still answers in time.
const crashWindow = time.Second

// ---- stores for tests ----

const (
	pgEnv      = "PAGPOLAR_TEST_POSTGRES_DSN"
	redisEnv   = "PAGPOLAR_TEST_REDIS_URL"
	clusterEnv = "PAGPOLAR_TEST_REDIS_CLUSTER" // host:port,host:port,... (.ci/run starts one)
)

var storeKinds = []string{"sqlite", "postgres", "redis"}

func randomName(t testing.TB) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// testStoreURL returns the URL of a store of kind isolated for this test (a
// new SQLite file, a new PostgreSQL table, a new Redis prefix), removed when
// the test ends. PostgreSQL and Redis are skipped when their variable is
// unset; set but unreachable fails the test.
func testStoreURL(t *testing.T, kind string) string {
	t.Helper()
	switch kind {
	case "sqlite":
		return "sqlite:" + filepath.Join(t.TempDir(), "keys.db")
	case "postgres":
		dsn := os.Getenv(pgEnv)
		if dsn == "" {
			t.Skipf("%s is not set: skipping the PostgreSQL variant (e.g. %s=postgres://postgres@127.0.0.1:5432/test?sslmode=disable)", pgEnv, pgEnv)
		}
		table := "pp_cmd_" + randomName(t)
		t.Cleanup(func() {
			db, err := sql.Open("pgx", dsn)
			if err != nil {
				t.Errorf("cleanup: %v", err)
				return
			}
			defer db.Close()
			for _, tb := range []string{table, table + "_meta"} {
				if _, err := db.Exec("DROP TABLE IF EXISTS " + tb); err != nil {
					t.Errorf("cleanup: dropping %s: %v", tb, err)
				}
			}
		})
		return withParam(t, dsn, "table", table)
	case "redis":
		raw := os.Getenv(redisEnv)
		if raw == "" {
			t.Skipf("%s is not set: skipping the Redis variant (e.g. %s=redis://127.0.0.1:6379/0)", redisEnv, redisEnv)
		}
		prefix := "pp-cmd-" + randomName(t)
		t.Cleanup(func() { deleteRedisPrefix(t, raw, prefix) })
		// The shared test Redis keeps nothing on disk: opt out by name.
		return withParam(t, withParam(t, raw, "prefix", prefix), "volatile", "1")
	case "redis-cluster":
		nodes := os.Getenv(clusterEnv)
		if nodes == "" {
			t.Skipf("%s is not set: skipping the Redis Cluster variant (e.g. %s=127.0.0.1:7000,127.0.0.1:7001,...; .ci/run starts one)", clusterEnv, clusterEnv)
		}
		prefix := "pp-cmd-" + randomName(t)
		t.Cleanup(func() { deleteClusterPrefix(t, strings.Split(nodes, ","), prefix) })
		return "redis+cluster://" + nodes + "/?prefix=" + prefix // the CI Cluster keeps an AOF: no opt-out
	}
	t.Fatalf("unknown store kind %q", kind)
	return ""
}

func withParam(t testing.TB, raw, k, v string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("store URL: %v", err)
	}
	q := u.Query()
	q.Set(k, v)
	u.RawQuery = q.Encode()
	return u.String()
}

func deleteRedisPrefix(t testing.TB, raw, prefix string) {
	opt, err := redis.ParseURL(raw)
	if err != nil {
		t.Errorf("cleanup: %v", err)
		return
	}
	opt.DialerRetries, opt.ContextTimeoutEnabled = 1, true // fail fast, as storeurl's clients
	c := redis.NewClient(opt)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, prefix+":*", 1000).Result()
		if err != nil {
			t.Errorf("cleanup: scanning %s: %v", prefix, err)
			return
		}
		if len(keys) > 0 {
			if err := c.Del(ctx, keys...).Err(); err != nil {
				t.Errorf("cleanup: %v", err)
				return
			}
		}
		if cursor = next; cursor == 0 {
			return
		}
	}
}

// deleteClusterPrefix deletes the keys under prefix on every master of a
// Cluster, one key at a time (keys of several slots cannot share a DEL).
func deleteClusterPrefix(t testing.TB, nodes []string, prefix string) {
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: nodes, DialerRetries: 1, ContextTimeoutEnabled: true})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		iter := n.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			if err := n.Unlink(ctx, iter.Val()).Err(); err != nil {
				return err
			}
		}
		return iter.Err()
	})
	if err != nil {
		t.Errorf("cleanup: %s on the Cluster: %v", prefix, err)
	}
}

// openTestStore opens url for the test's own reads and checks.
func openTestStore(t *testing.T, ctx context.Context, raw string) keystore.Store {
	t.Helper()
	s, closeFn, err := storeurl.Open(ctx, raw)
	if err != nil {
		t.Fatalf("opening the store: %v", err)
	}
	t.Cleanup(func() { _ = closeFn() })
	return s
}

// ---- worker processes ----

// workerProc is one worker process run to its end by a test.
type workerProc struct {
	msgs   []workerMsg
	state  *os.ProcessState
	stderr string
}

func (w workerProc) killed() bool {
	ws, ok := w.state.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

func (w workerProc) outcomes() map[string]outcome {
	out := map[string]outcome{}
	for _, m := range w.msgs {
		if m.T == "outcome" && m.Outcome != nil {
			out[m.Outcome.OpID] = *m.Outcome
		}
	}
	return out
}

func (w workerProc) msg(kind string) (workerMsg, bool) {
	for _, m := range w.msgs {
		if m.T == kind {
			return m, true
		}
	}
	return workerMsg{}, false
}

// startWorker runs the test binary as `pagpolar worker` over orders and
// waits for it to end (normally or by SIGKILL).
func startWorker(t *testing.T, ctx context.Context, srv *pagpolartest.Server, storeURL string, window time.Duration, orders []int, crash workerCrash, extra ...string) workerProc {
	t.Helper()
	args := append([]string{"worker", "-base-url", srv.URL, "-credential", srv.CredentialID, "-store", storeURL,
		"-seed", "1", "-window", window.String(), "-concurrency", "1", "-calls", "0"}, extra...)
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), testMainEnv+"=1", envToken+"="+srv.AddToken(srv.CredentialID))
	if crash.point != "" {
		cmd.Env = append(cmd.Env, envCrashAt+"="+crash.point, envCrashProb+"="+strconv.FormatFloat(crash.prob, 'g', -1, 64), envCrashSkip+"="+strconv.Itoa(crash.skip))
	}
	var in, out, errb bytes.Buffer
	for _, i := range orders {
		fmt.Fprintln(&in, i)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = &in, &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("running the worker: %v", err)
	}
	w := workerProc{state: cmd.ProcessState, stderr: errb.String()}
	for line := range strings.SplitSeq(out.String(), "\n") {
		if line == "" {
			continue
		}
		var m workerMsg
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("worker wrote an unreadable line %q: %v", line, err)
		}
		w.msgs = append(w.msgs, m)
	}
	return w
}

// firstOrder returns the first order index of seed 1 with the method and no
// refund.
func firstOrder(t *testing.T, method string) order {
	t.Helper()
	for i := range 1000 {
		if o := orderAt(1, i); o.Method == method && o.Refund == 0 && !o.Decline {
			return o
		}
	}
	t.Fatalf("no %s order among the first 1000", method)
	return order{}
}

// posts counts the money requests the fake received with key.
func posts(l pagpolartest.Ledger, key string) int {
	n := 0
	for _, r := range l.Requests {
		if r.Method == http.MethodPost && r.Key == key {
			n++
		}
	}
	return n
}

// waitLeaseExpiry waits, on real time (the lease TTL is what is tested),
// until the record's lease has run out, so that a new process can settle
// it at once instead of waiting for it.
func waitLeaseExpiry(t *testing.T, ctx context.Context, s keystore.Store, id string) keystore.Record {
	t.Helper()
	for {
		rec, err := s.Get(ctx, id)
		if err != nil {
			t.Fatalf("reading %s: %v", id, err)
		}
		if time.Now().After(rec.LeaseExpiresAt.Add(50 * time.Millisecond)) {
			return rec
		}
		select {
		case <-ctx.Done():
			t.Fatalf("lease of %s never expired: %v", id, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitPastProveBy waits until real time (the fake's clock when it has no
// other) is a second past the prove_by rec's meta records (the Date a list
// must carry to settle it): a Date is whole seconds.
func waitPastProveBy(t *testing.T, ctx context.Context, rec keystore.Record) {
	t.Helper()
	var m struct {
		ProveBy time.Time `json:"prove_by"`
	}
	if err := json.Unmarshal(rec.Meta, &m); err != nil {
		t.Fatalf("record meta %s: %v", rec.Meta, err)
	}
	if m.ProveBy.IsZero() {
		t.Fatalf("the record of a send carries no prove_by: %s", rec.Meta)
	}
	select {
	case <-ctx.Done():
		t.Fatalf("waiting past prove_by %s: %v", m.ProveBy, ctx.Err())
	case <-time.After(time.Until(m.ProveBy.Add(time.Second))):
	}
}

// TestCrashPoints: a worker process SIGKILLs itself after the save and
// before the send, or after the send and before the answer is stored; a new
// process (ResumeAll, then the order again) settles the operation, with
// exactly one sale and no second request where the first one took effect.
func TestCrashPoints(t *testing.T) {
	for _, kind := range storeKinds {
		for _, point := range []string{crashAfterSave, crashAfterSend} {
			kind, point := kind, point
			t.Run(kind+"/"+point, func(t *testing.T) {
				t.Parallel()
				storeURL := testStoreURL(t, kind)
				ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
				defer cancel()
				srv := pagpolartest.NewServer(t, pagpolartest.WithProcessingWindow(crashWindow))
				store := openTestStore(t, ctx, storeURL)
				o := firstOrder(t, "pix")
				opID := chargeOpID(o)

				first := startWorker(t, ctx, srv, storeURL, crashWindow, []int{o.Index}, workerCrash{point: point, prob: 1})
				if !first.killed() {
					t.Fatalf("first process: %v, want killed by SIGKILL\nstderr: %s", first.state, first.stderr)
				}
				m, ok := first.msg("crash")
				if !ok || m.Point != point || m.Op != opID {
					t.Fatalf("first process reported %+v, want a crash at %s of %s", first.msgs, point, opID)
				}
				if oc := first.outcomes(); len(oc) != 0 {
					t.Fatalf("the crashed process reported outcomes %v", oc)
				}
				rec := waitLeaseExpiry(t, ctx, store, srv.CredentialID+"/"+opID)
				if rec.State != keystore.StatePending || rec.Attempts != 1 {
					t.Fatalf("after the crash the record is %s with %d attempts, want pending with 1 (saved before the send)", rec.State, rec.Attempts)
				}
				l := srv.Ledger()
				wantPosts := map[string]int{crashAfterSave: 0, crashAfterSend: 1}[point]
				if n := posts(l, rec.Key); n != wantPosts {
					t.Fatalf("the fake got %d requests with the key before the restart, want %d", n, wantPosts)
				}

				// ResumeAll looks once: only a list whose Date reaches the
				// record's prove_by (the sender's upper bound of the API's
				// clock at the trust moment, plus ServerClockTolerance) can
				// settle the operation, so the new process starts once the
				// fake's clock (real time here) has passed it.
				waitPastProveBy(t, ctx, rec)
				second := startWorker(t, ctx, srv, storeURL, crashWindow, []int{o.Index}, workerCrash{}, "-resume")
				if !second.state.Success() {
					t.Fatalf("second process: %v\nstderr: %s", second.state, second.stderr)
				}
				res, ok := second.msg("resume")
				if !ok || res.Resumed != 1 || res.Settled != 1 {
					after, _ := store.Get(ctx, srv.CredentialID+"/"+opID)
					t.Fatalf("ResumeAll in the new process: %+v, want the one operation settled; the record: %s %q %s", res, after.State, after.Error, after.Meta)
				}
				got := second.outcomes()[opID]
				if got.State != "succeeded" {
					t.Fatalf("the new process ended %s with %+v", opID, got)
				}
				l = srv.Ledger()
				switch point {
				case crashAfterSave:
					// ResumeAll found nothing (after the trust delay) and
					// settled not_executed; the order code then sent it.
					if got.Source != string(pagpolar.SourceResponse) || posts(l, rec.Key) != 1 {
						t.Fatalf("after-save: source %s, %d requests; want one request answered by the API", got.Source, posts(l, rec.Key))
					}
				case crashAfterSend:
					// ResumeAll found the sale; nothing was sent again.
					if got.Source != string(pagpolar.SourceLocalRecord) || posts(l, rec.Key) != 1 {
						t.Fatalf("after-send: source %s, %d requests; want the sale from the record and no second request", got.Source, posts(l, rec.Key))
					}
				}
				final, err := store.Get(ctx, srv.CredentialID+"/"+opID)
				if err != nil {
					t.Fatal(err)
				}
				chk := report.Verify(srv.CredentialID, l, []report.Expected{{OperationID: opID, Record: final, Found: true, Method: o.Method, ExternalReference: o.Ref}})
				if !chk.OK() || chk.Effects != 1 || final.ResultRef != got.Ref {
					t.Fatalf("ledger check %+v, record %s, reported %s", chk, final.ResultRef, got.Ref)
				}
			})
		}
	}
}
