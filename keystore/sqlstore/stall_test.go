package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/sqlstore"
)

// holeProxy relays TCP connections to a server and can blackhole one of
// them: armed, the next connection that carries a byte from the client
// stops forwarding in both directions and stays open (a peer that vanished
// without a reset), while every other connection, and every new one, keeps
// working.
type holeProxy struct {
	target string
	ln     net.Listener
	armed  atomic.Bool
	holed  atomic.Int64
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

func startHoleProxy(t *testing.T, target string) *holeProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &holeProxy{target: target, ln: ln}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.relay(c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *holeProxy) relay(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, c, s)
	p.mu.Unlock()
	var frozen atomic.Bool
	done := make(chan struct{}, 2)
	go func() { // client → server
		buf := make([]byte, 32<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 && !frozen.Load() && p.armed.CompareAndSwap(true, false) {
				frozen.Store(true)
				p.holed.Add(1)
			}
			if n > 0 && !frozen.Load() {
				if _, werr := s.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		done <- struct{}{}
	}()
	go func() { // server → client
		buf := make([]byte, 32<<10)
		for {
			n, err := s.Read(buf)
			if n > 0 && !frozen.Load() {
				if _, werr := c.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		done <- struct{}{}
	}()
	<-done
	c.Close()
	s.Close()
	<-done
}

// proxiedDSN points dsn at the proxy.
func proxiedDSN(t *testing.T, dsn string) (string, *holeProxy) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "5432")
	}
	p := startHoleProxy(t, host)
	u.Host = p.ln.Addr().String()
	return u.String(), p
}

// call is one timed store call of a load run.
type timedCall struct {
	took time.Duration
	err  error
}

// load runs writers creating (and updating) records of their own with
// context.Background() until stop is closed, and returns every call.
func load(s keystore.Store, writers int, prefix string, stop <-chan struct{}) []timedCall {
	var mu sync.Mutex
	var out []timedCall
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				r, err := s.Create(context.Background(), keystore.Record{OperationID: fmt.Sprintf("%s/%d/%d", prefix, w, i), Key: "k", Kind: "pix"}, "w", time.Minute)
				if err == nil {
					r.Attempts = 1
					_, err = s.Update(context.Background(), r)
				}
				mu.Lock()
				out = append(out, timedCall{took: time.Since(start), err: err})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out
}

type latencies struct {
	n, failed     int
	p50, p99, max time.Duration
}

func summarize(calls []timedCall) latencies {
	var l latencies
	var ds []time.Duration
	for _, c := range calls {
		if c.err != nil {
			l.failed++
		}
		ds = append(ds, c.took)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	l.n = len(ds)
	if l.n > 0 {
		l.p50, l.p99, l.max = ds[l.n/2], ds[l.n*99/100], ds[l.n-1]
	}
	return l
}

func (l latencies) String() string {
	return fmt.Sprintf("%d calls (%d failed), p50 %v, p99 %v, max %v", l.n, l.failed, l.p50.Round(time.Millisecond), l.p99.Round(time.Millisecond), l.max.Round(time.Millisecond))
}

// TestPostgresRowLockStallsOnlyItsCaller: another session holds a row lock
// on one record. A write to it waits (here up to its call timeout); the
// writes of everyone else, through the same batch writer, go on. Before
// the fix one locked row stopped every write of the process for the 30 s
// batch timeout.
func TestPostgresRowLockStallsOnlyItsCaller(t *testing.T) {
	var pg sharedPG
	t.Cleanup(pg.close)
	db := pg.get(t)
	const callTimeout = 2 * time.Second
	s := newPostgres(t, db, sqlstore.WithCallTimeout(callTimeout))
	ctx := context.Background()
	held, err := s.Create(ctx, rec("locked"), "w", time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, "SELECT 1 FROM "+s.Table()+" WHERE operation_id = 'locked' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var calls []timedCall
	loaded := make(chan struct{})
	go func() { calls = load(s, 8, "free", stop); close(loaded) }()
	time.Sleep(300 * time.Millisecond) // the load is under way (real time: latencies are measured)

	start := time.Now()
	held.Attempts = 1
	_, lockedErr := s.Update(context.Background(), held) // no deadline of its own
	lockedTook := time.Since(start)
	time.Sleep(300 * time.Millisecond)
	close(stop)
	<-loaded
	_ = tx.Rollback()

	l := summarize(calls)
	t.Logf("write to the locked row: %v after %v (call timeout %v)", lockedErr, lockedTook.Round(time.Millisecond), callTimeout)
	t.Logf("everyone else meanwhile (8 writers, Create+Update each): %s", l)
	if !errors.Is(lockedErr, keystore.ErrUnavailable) || lockedTook < callTimeout/2 || lockedTook > callTimeout+time.Second {
		t.Fatalf("write to the locked row: %v after %v; want ErrUnavailable at about the call timeout %v", lockedErr, lockedTook, callTimeout)
	}
	if l.failed > 0 || l.n < 20 || l.max > callTimeout/2 {
		t.Fatalf("the other writers were held up by the locked row: %s", l)
	}
	// Once the lock is gone, the record is written as usual.
	if _, err := s.Update(ctx, held); err != nil && !errors.Is(err, keystore.ErrConflict) {
		t.Fatalf("Update after the lock: %v", err)
	}
}

// TestPostgresBlackholedConnectionStallsOnlyItsCallers: one connection of
// the pool stops answering (a proxy stops forwarding it, without closing
// it). The batch on it ends at its callers' deadline; the other writers
// continue on other connections.
func TestPostgresBlackholedConnectionStallsOnlyItsCallers(t *testing.T) {
	dsn, p := proxiedDSN(t, postgresDSN(t))
	const callTimeout = 2 * time.Second
	table := "pagpolar_test_" + randomSuffix(t)
	var admin sharedPG
	t.Cleanup(admin.close)
	adb := admin.get(t)
	t.Cleanup(func() {
		exec(t, adb, "DROP TABLE IF EXISTS "+table)
		exec(t, adb, "DROP TABLE IF EXISTS "+table+"_meta")
	})
	s, err := sqlstore.OpenPostgres(dsn, sqlstore.WithTable(table), sqlstore.WithCallTimeout(callTimeout))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var calls []timedCall
	loaded := make(chan struct{})
	go func() { calls = load(s, 8, "w", stop); close(loaded) }()
	time.Sleep(300 * time.Millisecond)
	p.armed.Store(true) // the next connection to carry a write goes dead
	deadline := time.Now().Add(5 * time.Second)
	for p.holed.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	holedAt := time.Now()
	// Callers that arrive while the dead connection's batch is stuck.
	stopProbes := make(chan struct{})
	var probes []timedCall
	probed := make(chan struct{})
	go func() { probes = load(s, 4, "probe", stopProbes); close(probed) }()
	time.Sleep(callTimeout / 2)
	close(stopProbes)
	<-probed
	time.Sleep(time.Until(holedAt.Add(callTimeout + 500*time.Millisecond)))
	close(stop)
	<-loaded

	var stuck, others []timedCall
	for _, c := range calls {
		if c.err != nil {
			stuck = append(stuck, c)
		} else {
			others = append(others, c)
		}
	}
	ls, lo, lp := summarize(stuck), summarize(others), summarize(probes)
	t.Logf("%d connection blackholed; calls that failed with it: %s", p.holed.Load(), ls)
	t.Logf("the other calls of the 8 writers: %s", lo)
	t.Logf("4 writers started while the dead connection's batch was stuck, for %v: %s", callTimeout/2, lp)
	if p.holed.Load() != 1 {
		t.Fatalf("%d connections blackholed, want 1", p.holed.Load())
	}
	for _, c := range stuck {
		if !errors.Is(c.err, keystore.ErrUnavailable) || c.took > callTimeout+time.Second {
			t.Fatalf("a call on the dead connection: %v after %v; want ErrUnavailable within the call timeout %v", c.err, c.took, callTimeout)
		}
	}
	if ls.n == 0 || ls.n > 8 {
		t.Fatalf("%d calls failed; want those of the one batch on the dead connection (at most one per writer)", ls.n)
	}
	if lp.failed > 0 || lp.n < 8 || lp.max > callTimeout/4 {
		t.Fatalf("writers arriving during the stall were held up by the dead connection: %s", lp)
	}
}

// TestPostgresReadsAreBounded: Get and List on a connection that stopped
// answering return within the store's call timeout although their context
// has no deadline (before: still blocked after 75 s).
func TestPostgresReadsAreBounded(t *testing.T) {
	dsn, p := proxiedDSN(t, postgresDSN(t))
	table := "pagpolar_test_" + randomSuffix(t)
	var admin sharedPG
	t.Cleanup(admin.close)
	adb := admin.get(t)
	t.Cleanup(func() {
		exec(t, adb, "DROP TABLE IF EXISTS "+table)
		exec(t, adb, "DROP TABLE IF EXISTS "+table+"_meta")
	})
	s, err := sqlstore.OpenPostgres(dsn, sqlstore.WithTable(table)) // the default call timeout
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, rec("x"), "w", time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, read := range []struct {
		name string
		fn   func() error
	}{
		{"Get", func() error { _, err := s.Get(context.Background(), "x"); return err }},
		{"List", func() error { _, err := s.List(context.Background(), keystore.Filter{}); return err }},
	} {
		p.armed.Store(true)
		start := time.Now()
		err := read.fn()
		took := time.Since(start)
		t.Logf("%s on a blackholed connection: %v after %v", read.name, err, took.Round(time.Millisecond))
		if !errors.Is(err, keystore.ErrUnavailable) || took < sqlstore.DefaultCallTimeout-time.Second || took > sqlstore.DefaultCallTimeout+2*time.Second {
			t.Fatalf("%s: %v after %v; want ErrUnavailable at about DefaultCallTimeout (%v)", read.name, err, took, sqlstore.DefaultCallTimeout)
		}
		if err := read.fn(); err != nil {
			t.Fatalf("%s on a new connection afterwards: %v", read.name, err)
		}
	}
}

// TestSQLiteWriteLockHoldsEveryWriter measures what SQLite's one writer
// at a time means: while another process holds the file's write lock,
// every write of the Store waits (up to the busy timeout), and each caller
// still stops at its own deadline. Reads go on beside it (WAL).
func TestSQLiteWriteLockHoldsEveryWriter(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ops.db")
	s, err := sqlstore.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, rec("read-me"), "w", time.Minute); err != nil {
		t.Fatal(err)
	}
	other, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	lock, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	const held = 1500 * time.Millisecond
	if _, err := lock.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(held) // real time: the lock is held this long
		_, _ = lock.ExecContext(ctx, "ROLLBACK")
	}()
	start := time.Now()
	stop := make(chan struct{})
	var calls []timedCall
	loaded := make(chan struct{})
	go func() { calls = load(s, 4, "w", stop); close(loaded) }()
	readStart := time.Now()
	if _, err := s.Get(ctx, "read-me"); err != nil {
		t.Fatal(err)
	}
	read := time.Since(readStart)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, shortErr := s.Create(short, rec("short"), "w", time.Minute)
	cancel()
	time.Sleep(time.Until(start.Add(held + 300*time.Millisecond)))
	close(stop)
	<-loaded
	l := summarize(calls)
	t.Logf("write lock held by another connection for %v: 4 writers %s; a read meanwhile took %v; a Create with a 200ms deadline: %v", held, l, read.Round(time.Millisecond), shortErr)
	if l.failed > 0 || l.max < held/2 || l.max > held+time.Second {
		t.Fatalf("writers under another connection's write lock: %s; want each to wait for the lock and succeed", l)
	}
	if !errors.Is(shortErr, keystore.ErrUnavailable) || read > held/2 {
		t.Fatalf("a Create with a short deadline: %v; a read: %v", shortErr, read)
	}
}
