package redisstore

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// storeCalls returns every Store method as a call to time; rec is a record
// the store holds.
func storeCalls(s *Store, rec keystore.Record) []struct {
	name string
	call func(context.Context) error
} {
	return []struct {
		name string
		call func(context.Context) error
	}{
		{"Create", func(ctx context.Context) error {
			_, err := s.Create(ctx, keystore.Record{OperationID: "during"}, "w", time.Minute)
			return err
		}},
		{"Get", func(ctx context.Context) error { _, err := s.Get(ctx, rec.OperationID); return err }},
		{"Acquire", func(ctx context.Context) error {
			_, err := s.Acquire(ctx, rec.OperationID, "w", time.Minute)
			return err
		}},
		{"Renew", func(ctx context.Context) error {
			_, err := s.Renew(ctx, rec.OperationID, rec.LeaseToken, time.Minute)
			return err
		}},
		{"Release", func(ctx context.Context) error { return s.Release(ctx, rec.OperationID, rec.LeaseToken) }},
		{"Update", func(ctx context.Context) error { _, err := s.Update(ctx, rec); return err }},
		{"List", func(ctx context.Context) error { _, err := s.List(ctx, keystore.Filter{}); return err }},
		{"DeleteExpired", func(ctx context.Context) error {
			_, err := s.DeleteExpired(ctx, time.Now(), 10)
			return err
		}},
	}
}

// timeToFail runs call with a context that has no deadline (only the
// store's call timeout bounds it) and returns how long it took to fail.
func timeToFail(t *testing.T, name string, call func(context.Context) error) time.Duration {
	t.Helper()
	start := time.Now()
	err := call(context.Background())
	took := time.Since(start)
	if !errors.Is(err, keystore.ErrUnavailable) {
		t.Fatalf("%s while Redis is away: %v, want an error wrapping ErrUnavailable", name, err)
	}
	return took
}

// waitDetached waits until no goroutine of an abandoned call is left: each
// ends within its client's own timeouts, none is leaked.
func waitDetached(t *testing.T, s *Store) {
	t.Helper()
	waitFor(t, "the store's abandoned calls to end", func() bool {
		return s.detached.Load() == 0 && s.batch.idle()
	})
}

// impatientRetries is a client a user could well build: many command
// retries, each dialling many times. Against a refused port a single call
// would take about MaxRetries × DialerRetries × DialerRetryTimeout ≈ 20 s
// without the store's own bound.
func impatientRetries(o *redis.Options) {
	o.MaxRetries, o.DialerRetries, o.DialerRetryTimeout = 10, 10, 200*time.Millisecond
}

// TestOutageCallsReturnWithinCallTimeout takes Redis away (connections
// refused) under clients whose own retries would take far longer than the
// store's call timeout: every call fails with ErrUnavailable well within 2×
// the call timeout, on the inline path (ContextTimeoutEnabled) and on the
// detached one (without it).
func TestOutageCallsReturnWithinCallTimeout(t *testing.T) {
	const bound = 500 * time.Millisecond
	for _, v := range []struct {
		name       string
		ctxTimeout bool
	}{{"ContextTimeoutEnabled", true}, {"go-redis default contexts", false}} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			s, p, admin := proxiedStore(t, func(o *redis.Options) {
				impatientRetries(o)
				o.ContextTimeoutEnabled = v.ctxTimeout
			}, WithCallTimeout(bound))
			if s.honoursCtx != v.ctxTimeout {
				t.Fatalf("store sees ContextTimeoutEnabled=%v, client has %v", s.honoursCtx, v.ctxTimeout)
			}
			rec, err := s.Create(context.Background(), keystore.Record{OperationID: "before"}, "w", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			p.stop()
			for _, c := range storeCalls(s, rec) {
				took := timeToFail(t, c.name, c.call)
				t.Logf("%s failed after %v (call timeout %v)", c.name, took.Round(time.Millisecond), bound)
				if took > 2*bound {
					t.Errorf("%s took %v to fail, want well within 2× the call timeout %v", c.name, took, bound)
				}
			}
			if n := admin.Exists(context.Background(), s.recordKey("during")).Val(); n != 0 {
				t.Fatal("a Create that failed during the outage wrote its record")
			}
			waitDetached(t, s)
		})
	}
}

// TestOutageDefaultCallTimeout checks the documented default bound
// (DefaultCallTimeout) with a client whose retries alone would take about
// 20 s per call.
func TestOutageDefaultCallTimeout(t *testing.T) {
	s, p, _ := proxiedStore(t, impatientRetries)
	if s.cfg.callTimeout != DefaultCallTimeout {
		t.Fatalf("call timeout %v, want the default %v", s.cfg.callTimeout, DefaultCallTimeout)
	}
	p.stop()
	took := timeToFail(t, "Get", func(ctx context.Context) error { _, err := s.Get(ctx, "x"); return err })
	t.Logf("Get failed after %v (DefaultCallTimeout %v)", took.Round(time.Millisecond), DefaultCallTimeout)
	if took > 2*DefaultCallTimeout {
		t.Fatalf("Get took %v to fail, want well within 2× DefaultCallTimeout", took)
	}
	waitDetached(t, s)
}

// TestOutageFailsFastWithStoreClientOptions: with the options the package
// documentation recommends (and keystore/storeurl sets), a refused
// connection fails a call in a small fraction of the call timeout.
func TestOutageFailsFastWithStoreClientOptions(t *testing.T) {
	s, p, _ := proxiedStore(t, nil) // redisOptions: DialerRetries 1, ContextTimeoutEnabled
	rec, err := s.Create(context.Background(), keystore.Record{OperationID: "before"}, "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	p.stop()
	var worst time.Duration
	for _, c := range storeCalls(s, rec) {
		took := timeToFail(t, c.name, c.call)
		t.Logf("%s failed after %v", c.name, took.Round(time.Microsecond))
		worst = max(worst, took)
	}
	if worst > DefaultCallTimeout/3 {
		t.Fatalf("slowest call took %v to fail against a refused port, want a small fraction of %v", worst, DefaultCallTimeout)
	}
}

// TestNewBoundedWhenRedisIsAway: New fails within one call timeout when its
// first check cannot reach Redis, rather than trying each check in turn.
func TestNewBoundedWhenRedisIsAway(t *testing.T) {
	opt := redisOptions(t)
	opt.Addr = closedAddr(t)
	impatientRetries(opt)
	c := redis.NewClient(opt)
	defer c.Close()
	const bound = 500 * time.Millisecond
	start := time.Now()
	_, err := New(c, WithPrefix("pagpolartest-away"), WithLogger(quietLogger()), WithCallTimeout(bound))
	took := time.Since(start)
	if !errors.Is(err, keystore.ErrUnavailable) {
		t.Fatalf("New with Redis away: %v, want an error wrapping ErrUnavailable", err)
	}
	t.Logf("New failed after %v: %v", took.Round(time.Millisecond), err)
	if took > 2*bound {
		t.Fatalf("New took %v to fail, want well within 2× the call timeout %v", took, bound)
	}
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// BenchmarkOutageCall measures how long a store call takes to fail when
// Redis refuses connections, with a fresh client per call (a pool that has
// not yet given up dialling): with go-redis's default options, and with the
// ones keystore/storeurl sets. Run with -benchtime=3x: the defaults take
// about a second per call.
func BenchmarkOutageCall(b *testing.B) {
	if testing.Short() {
		b.Skip("slow with go-redis's defaults")
	}
	addr := closedAddr(b)
	for _, v := range []struct {
		name string
		opt  func() *redis.Options
	}{
		{"go-redis-defaults", func() *redis.Options { return &redis.Options{Addr: addr} }},
		{"storeurl-options", func() *redis.Options {
			return &redis.Options{Addr: addr, DialerRetries: 1, ContextTimeoutEnabled: true}
		}},
	} {
		b.Run(v.name, func(b *testing.B) {
			var total time.Duration
			for b.Loop() {
				c := redis.NewClient(v.opt())
				s, err := build(c, WithLogger(quietLogger()))
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				_, err = s.Get(context.Background(), "x")
				total += time.Since(start)
				c.Close()
				if !errors.Is(err, keystore.ErrUnavailable) {
					b.Fatalf("Get: %v, want ErrUnavailable", err)
				}
			}
			b.ReportMetric(float64(total)/float64(time.Millisecond)/float64(b.N), "ms/call")
		})
	}
}

// TestGoRedisLogRoutedToSlog: go-redis's own lines (here, a failed dial) go
// to slog.Default() at debug level, tagged logger=go-redis, and nowhere
// when debug is off.
func TestGoRedisLogRoutedToSlog(t *testing.T) {
	old := slog.Default()
	t.Cleanup(func() { slog.SetDefault(old) })
	fail := func() {
		c := redis.NewClient(&redis.Options{Addr: closedAddr(t), DialerRetries: 1, MaxRetries: -1})
		defer c.Close()
		if err := c.Ping(context.Background()).Err(); err == nil {
			t.Fatal("Ping to a closed port succeeded")
		}
	}
	var debug logBuffer
	slog.SetDefault(debug.logger())
	fail()
	out := debug.String()
	if !strings.Contains(out, "level=DEBUG") || !strings.Contains(out, "logger=go-redis") || !strings.Contains(out, "failed to dial") {
		t.Fatalf("go-redis's failed dial did not reach slog at debug level:\n%s", out)
	}
	var info logBuffer
	slog.SetDefault(slog.New(slog.NewTextHandler(&info, &slog.HandlerOptions{Level: slog.LevelInfo})))
	fail()
	if out := info.String(); out != "" {
		t.Fatalf("go-redis logged with debug off:\n%s", out)
	}
}
