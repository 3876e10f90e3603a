package pagpolar_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/internal/longtest"
	"github.com/pagpolar/pagpolar-go/internal/privatepg"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/redisstore"
	"github.com/pagpolar/pagpolar-go/keystore/sqlstore"
	"github.com/pagpolar/pagpolar-go/keystore/storetest"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// pausable is a store whose backend a test can stop answering.
type pausable struct {
	store keystore.Store
	// pause makes the backend stop answering until the returned function
	// is called.
	pause func(t *testing.T) (resume func())
}

func hexID(t *testing.T) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// pausableRedis is a private redis-server, paused with SIGSTOP.
func pausableRedis(t *testing.T) pausable {
	bin, err := exec.LookPath("redis-server")
	if err != nil || os.Getenv("PAGPOLAR_TEST_REDIS_URL") == "" {
		t.Skip("needs redis-server and PAGPOLAR_TEST_REDIS_URL")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGCONT); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	deadline := time.Now().Add(15 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatal("private redis-server did not answer")
		}
		time.Sleep(20 * time.Millisecond)
	}
	s, err := redisstore.New(c, redisstore.AllowVolatile(), redisstore.DeclaredNew("test: a new private Redis"))
	if err != nil {
		t.Fatal(err)
	}
	return pausable{store: s, pause: func(t *testing.T) func() {
		if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		return func() { _ = cmd.Process.Signal(syscall.SIGCONT) }
	}}
}

// pausableSQLite is a SQLite file whose write lock another connection
// holds.
func pausableSQLite(t *testing.T) pausable {
	path := filepath.Join(t.TempDir(), "keys.db")
	s, err := sqlstore.OpenSQLite(path, sqlstore.DeclaredNew("test: a new file"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return pausable{store: s, pause: func(t *testing.T) func() {
		// The store's writer may be mid-commit: wait for the lock (up to
		// 10 s) instead of failing at once with SQLITE_BUSY.
		db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		conn, err := db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
			t.Fatal(err)
		}
		return func() {
			_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
			_ = conn.Close()
			_ = db.Close()
		}
	}}
}

// pausablePostgres is a table of its own on the test PostgreSQL, locked
// ACCESS EXCLUSIVE by another session (every statement on it waits).
func pausablePostgres(t *testing.T) pausable {
	dsn := os.Getenv("PAGPOLAR_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Skip("PAGPOLAR_TEST_POSTGRES_DSN not set")
	}
	table := "pause_" + hexID(t)
	s, err := sqlstore.OpenPostgres(dsn, sqlstore.WithTable(table), sqlstore.DeclaredNew("test: a new table"))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Close()
		_, _ = admin.Exec("DROP TABLE IF EXISTS " + table)
		_, _ = admin.Exec("DROP TABLE IF EXISTS " + table + "_meta")
		_ = admin.Close()
	})
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return pausable{store: s, pause: func(t *testing.T) func() {
		tx, err := admin.Begin()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec("LOCK TABLE " + table + " IN ACCESS EXCLUSIVE MODE"); err != nil {
			t.Fatal(err)
		}
		return func() { _ = tx.Rollback() }
	}}
}

// pausablePrivatePostgres is a private PostgreSQL server, paused with
// SIGSTOP (the postmaster and every backend).
func pausablePrivatePostgres(t *testing.T) pausable {
	pg := privatepg.Start(t)
	s, err := sqlstore.OpenPostgres(pg.DSN, sqlstore.DeclaredNew("test: a new private PostgreSQL"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return pausable{store: s, pause: func(*testing.T) func() { return pg.Pause() }}
}

// pausedCall is one call's measured return.
type pausedCall struct {
	path    string
	elapsed time.Duration
	err     error
}

// callsUnderPause runs every path (charge, refund, subscribe, plan change,
// Resume) with a 2 s deadline, some started just before the store stops
// answering (their answers arrive while it is stopped: the save must
// give up), some while it is stopped; the store stays stopped for pause.
func callsUnderPause(t *testing.T, p pausable, pause time.Duration) []pausedCall {
	t.Helper()
	srv := pagpolartest.NewServer(t, pagpolartest.WithProcessingWindow(time.Second))
	c, err := pagpolar.NewClient(srv.CredentialID, pagpolar.StaticToken(srv.Token),
		pagpolar.WithBaseURL(srv.URL), pagpolar.WithStore(p.store),
		pagpolar.WithRetryPolicy(pagpolar.RetryPolicy{ProcessingWindow: time.Second, WindowMargin: 200 * time.Millisecond,
			SettleDelay: 200 * time.Millisecond, LookupInterval: 50 * time.Millisecond, AttemptTimeout: 2 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id := hexID(t)
	cust := pagpolar.Customer{Name: "Ana Souza", Email: "ana@example.com", Document: "529.982.247-25"}
	sale, err := c.Payments.Pix(ctx, pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: "setup-" + id, Customer: cust})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := c.Subscriptions.Subscribe(ctx, pagpolar.SubscribeParams{OfferID: "plan-basic", ExternalReference: "setup-sub-" + id, Customer: cust, PaymentMethod: "pix"})
	if err != nil {
		t.Fatal(err)
	}
	paths := map[string]func(ctx context.Context, n string) error{
		"charge": func(ctx context.Context, n string) error {
			_, err := c.Payments.Pix(ctx, pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: "pause-" + id + n, Customer: cust})
			return err
		},
		"refund": func(ctx context.Context, n string) error {
			_, err := c.Refunds.Create(ctx, pagpolar.RefundParams{OperationID: "refund-" + id + n, SaleID: sale.Sale.ID, Amount: 10})
			return err
		},
		"subscribe": func(ctx context.Context, n string) error {
			_, err := c.Subscriptions.Subscribe(ctx, pagpolar.SubscribeParams{OfferID: "plan-basic", ExternalReference: "pause-sub-" + id + n, Customer: cust, PaymentMethod: "pix"})
			return err
		},
		"plan change": func(ctx context.Context, n string) error {
			_, err := c.Subscriptions.ChangePlan(ctx, pagpolar.ChangePlanParams{OperationID: "change-" + id + n, SubscriptionID: sub.Subscription.ID, NewOfferID: "plan-pro"})
			return err
		},
		"resume": func(ctx context.Context, n string) error {
			_, err := c.Resume(ctx, "pix:setup-"+id)
			return err
		},
	}
	// Answers take 700 ms: a call started now is answered while the
	// store is stopped.
	srv.Inject(pagpolartest.Fault{Action: pagpolartest.FaultLatency, Delay: 700 * time.Millisecond})
	const deadline = 2 * time.Second
	var (
		mu  sync.Mutex
		out []pausedCall
		wg  sync.WaitGroup
	)
	run := func(name, n string, f func(context.Context, string) error) {
		defer wg.Done()
		cctx, cancel := context.WithTimeout(ctx, deadline)
		defer cancel()
		start := time.Now()
		err := f(cctx, n)
		el := time.Since(start)
		mu.Lock()
		out = append(out, pausedCall{path: name, elapsed: el, err: err})
		mu.Unlock()
	}
	for name, f := range paths {
		wg.Add(1)
		go run(name, "-before", f)
	}
	time.Sleep(300 * time.Millisecond) // the Creates are in; the answers are not
	resume := p.pause(t)
	paused := time.Now()
	for name, f := range paths {
		wg.Add(1)
		go run(name, "-during", f)
	}
	wg.Wait()
	// Keep the store stopped for the whole pause, then let it answer again.
	if rest := pause - time.Since(paused); rest > 0 {
		<-time.After(rest)
	}
	resume()
	return out
}

// No call returns later than its deadline plus DeadlineGrace (1 s by
// default), whatever the store does: each store stops answering for 5 s
// and for 30 s (PAGPOLAR_LONG=1) while every path runs with a 2 s
// deadline. PostgreSQL stalls twice: a table locked by another session,
// and a private server stopped with SIGSTOP.
func TestDeadline_NoCallOutlivesItsContextWhenTheStoreStalls(t *testing.T) {
	if testing.Short() {
		t.Skip("pauses stores for up to 30 s")
	}
	stores := map[string]func(*testing.T) pausable{"redis": pausableRedis, "sqlite": pausableSQLite, "postgres": pausablePostgres, "postgres-sigstop": pausablePrivatePostgres}
	pauses := []time.Duration{5 * time.Second}
	if longtest.Enabled() {
		pauses = append(pauses, 30*time.Second)
	}
	// The bound is the deadline plus the grace, plus what the scheduler
	// adds: 100 ms of timer slack, and three times the largest lateness
	// the probe saw while the calls ran (the return after the grace ends
	// crosses about three wake-ups: the grace's timer, the store call's
	// return, the call's own). Idle, that adds a few milliseconds; on a
	// CI run at load 15 with -race, the probe measured hundreds.
	const bound = 2*time.Second + pagpolar.DefaultDeadlineGrace + 100*time.Millisecond
	for _, pause := range pauses {
		for name, open := range stores {
			t.Run(fmt.Sprintf("%s/%s", name, pause), func(t *testing.T) {
				t.Parallel()
				p := open(t)
				storetest.DeclareNew(t, p.store)
				probe := startLagProbe()
				calls := callsUnderPause(t, p, pause)
				lag := probe.Stop()
				limit := bound + 3*lag
				var worst pausedCall
				late := 0
				for _, c := range calls {
					if c.elapsed > worst.elapsed {
						worst = c
					}
					if c.elapsed > limit {
						late++
						t.Errorf("%s returned after %v (deadline 2 s + grace %v + slack, the scheduler's lag %v included: %v): %v", c.path, c.elapsed.Round(time.Millisecond), pagpolar.DefaultDeadlineGrace, lag.Round(time.Millisecond), limit.Round(time.Millisecond), c.err)
					}
				}
				t.Logf("%s, paused %v: %d calls, %d later than deadline + grace + slack; worst overrun past the 2 s deadline: %v (%s: %v); scheduler lag at most %v", name, pause, len(calls), late, (worst.elapsed - 2*time.Second).Round(time.Millisecond), worst.path, worst.err, lag.Round(time.Millisecond))
			})
		}
	}
}
