package redisstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/storetest"
)

// logBuffer collects what a Store logs.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func configValue(t *testing.T, c *redis.Client, name string) string {
	t.Helper()
	m, err := c.ConfigGet(context.Background(), name).Result()
	if err != nil {
		t.Fatalf("CONFIG GET %s: %v", name, err)
	}
	return m[name]
}

// TestStartupRefusesVolatileRedis: this machine's shared Redis runs with
// --save "" --appendonly no; New refuses it unless AllowVolatile is given,
// and then warns.
func TestStartupRefusesVolatileRedis(t *testing.T) {
	c := newClient(t)
	if aof := configValue(t, c, "appendonly"); aof == "yes" {
		t.Skipf("the test Redis keeps an append-only file (appendonly %s): nothing to refuse", aof)
	}
	_, err := New(c, WithPrefix(testPrefix(t, c)), WithLogger(quietLogger()))
	if !errors.Is(err, ErrVolatile) || errors.Is(err, keystore.ErrUnavailable) {
		t.Fatalf("New on a Redis without AOF: %v; want ErrVolatile (and not ErrUnavailable: retrying will not help)", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "appendonly no") || !strings.Contains(msg, "AllowVolatile") {
		t.Fatalf("New's error %q does not say what is wrong and how to opt out", msg)
	}
	var logs logBuffer
	if _, err := New(c, WithPrefix(testPrefix(t, c)), WithLogger(logs.logger()), AllowVolatile()); err != nil {
		t.Fatalf("New with AllowVolatile: %v", err)
	}
	if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "AllowVolatile") {
		t.Fatalf("New with AllowVolatile logged no warning:\n%s", out)
	}
	// A private Redis with an AOF needs no opt-out.
	private, _ := startRedis(t)
	if _, err := New(private, WithLogger(quietLogger())); err != nil {
		t.Fatalf("New on a Redis with an AOF: %v", err)
	}
}

// restrictedUser creates an ACL user that may not run CONFIG (as on managed
// Redis) and may only touch keys under keyPattern, and returns options that
// log in as it. admin is a private server (startRedis): ACL SETUSER changes
// the server's configuration, which tests never do on the shared one.
func restrictedUser(t *testing.T, admin *redis.Client, keyPattern string) *redis.Options {
	t.Helper()
	return restrictedUserWithout(t, admin, keyPattern, "-config")
}

// restrictedUserWithout is restrictedUser denying the given ACL command
// rules ("-config", "-info") instead of CONFIG alone.
func restrictedUserWithout(t *testing.T, admin *redis.Client, keyPattern string, deny ...string) *redis.Options {
	t.Helper()
	ctx := context.Background()
	name := "pagpolartest-" + randomHex(t, 6)
	pass := randomHex(t, 16)
	rules := append([]any{"ACL", "SETUSER", name, "reset", "on", ">" + pass, "~" + keyPattern, "+@all"}, anys(deny)...)
	if err := admin.Do(ctx, rules...).Err(); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
	t.Cleanup(func() {
		if err := admin.Do(context.Background(), "ACL", "DELUSER", name).Err(); err != nil {
			t.Errorf("ACL DELUSER %s: %v", name, err)
		}
	})
	opt := redisOptions(t)
	opt.Addr, opt.DB = admin.Options().Addr, 0
	opt.Username, opt.Password = name, pass
	return opt
}

// TestStartupWithConfigBlocked: where CONFIG is denied (as on managed
// Redis), New reads INFO persistence instead: an AOF there is enough, and a
// Redis that hides both is refused unless AllowVolatile is given.
func TestStartupWithConfigBlocked(t *testing.T) {
	redisOptions(t) // the same switch as every other test against Redis
	admin, _ := startRedis(t)
	prefix := testPrefix(t, admin)
	c := dial(t, restrictedUser(t, admin, prefix+":*"))
	if err := c.ConfigGet(context.Background(), "appendonly").Err(); err == nil {
		t.Fatal("CONFIG GET works for the restricted user; the test would prove nothing")
	}
	var logs logBuffer
	s, err := New(c, WithPrefix(prefix), WithLogger(logs.logger()))
	if err != nil {
		t.Fatalf("New with CONFIG blocked on a Redis with an AOF: %v", err)
	}
	if out := logs.String(); strings.Contains(out, "level=WARN") {
		t.Fatalf("New warned although INFO shows an AOF:\n%s", out)
	}
	if _, err := s.Create(context.Background(), keystore.Record{OperationID: "x"}, "w", time.Minute); err != nil {
		t.Fatalf("Create: %v", err)
	}

	hidden := dial(t, restrictedUserWithout(t, admin, prefix+":*", "-config", "-info"))
	_, err = New(hidden, WithPrefix(prefix), WithLogger(quietLogger()))
	if !errors.Is(err, ErrVolatile) || !strings.Contains(err.Error(), "cannot tell") {
		t.Fatalf("New with CONFIG and INFO blocked: %v; want ErrVolatile saying it cannot tell", err)
	}
	if _, err := New(hidden, WithPrefix(prefix), WithLogger(quietLogger()), AllowVolatile()); err != nil {
		t.Fatalf("New with CONFIG and INFO blocked and AllowVolatile: %v", err)
	}
}

// TestConformanceRestrictedUser runs the suite as a user that may touch only
// keys under the run's prefixes: every key any operation reads or writes,
// including the ones scripts derive, is under the store's prefix.
func TestConformanceRestrictedUser(t *testing.T) {
	redisOptions(t) // the same switch as every other test against Redis
	admin, _ := startRedis(t)
	run := "pagpolartest-" + randomHex(t, 6)
	c := dial(t, restrictedUser(t, admin, run+"-*"))
	storetest.Run(t, func(t *testing.T) keystore.Store {
		prefix := run + "-" + randomHex(t, 4)
		t.Cleanup(func() { deletePrefix(t, admin, prefix) })
		s, err := New(c, WithPrefix(prefix), WithLogger(quietLogger()))
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return s
	})
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func serverVersion(t *testing.T, c *redis.Client) (major, minor int) {
	t.Helper()
	info, err := c.Info(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			fmt.Sscanf(v, "%d.%d", &major, &minor)
		}
	}
	return major, minor
}

func connectedReplicas(t *testing.T, c *redis.Client) int {
	t.Helper()
	info, err := c.Info(context.Background(), "replication").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "connected_slaves:"); ok {
			fmt.Sscanf(v, "%d", &n)
		}
	}
	return n
}

// TestWaitAOFNeedsServerSupport: WAITAOF needs Redis ≥ 7.2 and, with a
// local fsync, appendonly yes. New checks up front rather than failing every
// write later.
func TestWaitAOFNeedsServerSupport(t *testing.T) {
	c := newClient(t)
	major, minor := serverVersion(t, c)
	supported := (major > 7 || major == 7 && minor >= 2) && configValue(t, c, "appendonly") == "yes"
	s, err := New(c, WithPrefix(testPrefix(t, c)), WithWaitAOF(1, 0, time.Second), WithLogger(quietLogger()), AllowVolatile())
	if !supported {
		if err == nil {
			t.Fatalf("New with WAITAOF 1 0 succeeded on Redis %d.%d with appendonly %q", major, minor, configValue(t, c, "appendonly"))
		}
		t.Logf("refused as expected: %v", err)
		return
	}
	if err != nil {
		t.Fatalf("New with WAITAOF on a server that supports it: %v", err)
	}
	if _, err := s.Create(context.Background(), keystore.Record{OperationID: "aof"}, "w", time.Minute); err != nil {
		t.Fatalf("Create with WAITAOF 1 0: %v", err)
	}
}

// TestWaitFailsFastWithoutReplicas asks for more replicas than the Redis
// has attached: every durable write fails at once, not sent (no WAIT
// timeout spent), while the lease changes that need no durability work.
func TestWaitFailsFastWithoutReplicas(t *testing.T) {
	c := newClient(t)
	want := connectedReplicas(t, c) + 1
	const waitTimeout = 2 * time.Second
	s, err := New(c, WithPrefix(testPrefix(t, c)), WithWait(want, waitTimeout), WithLogger(quietLogger()), AllowVolatile())
	if err != nil {
		t.Fatal(err)
	}
	plain, err := New(c, WithPrefix(s.cfg.prefix), WithLogger(quietLogger()), AllowVolatile())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fast := func(op string, fn func() error) {
		t.Helper()
		start := time.Now()
		err := fn()
		if !errors.Is(err, keystore.ErrUnavailable) || !errors.Is(err, ErrNotDurable) || !strings.Contains(err.Error(), "not sent") {
			t.Fatalf("%s: %v, want an error wrapping ErrUnavailable and ErrNotDurable saying it was not sent", op, err)
		}
		if d := time.Since(start); d >= waitTimeout/2 {
			t.Fatalf("%s took %v: it waited for replicas that are not there (WAIT timeout %v)", op, d, waitTimeout)
		}
	}
	for i := range 3 {
		fast(fmt.Sprintf("Create %d", i), func() error {
			_, err := s.Create(ctx, keystore.Record{OperationID: fmt.Sprintf("w%d", i)}, "owner", time.Minute)
			return err
		})
		if _, err := s.Get(ctx, fmt.Sprintf("w%d", i)); !errors.Is(err, keystore.ErrNotFound) {
			t.Fatalf("after a Create that was not sent, Get = %v; want ErrNotFound", err)
		}
	}
	rec, err := plain.Create(ctx, keystore.Record{OperationID: "p"}, "owner", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	fast("Update", func() error {
		r := rec
		r.Attempts = 1
		_, err := s.Update(ctx, r)
		return err
	})
	fast("Acquire", func() error { _, err := s.Acquire(ctx, "p", "other", time.Minute); return err })
	// Lease changes that need no durability do not wait.
	if _, err := s.Renew(ctx, "p", rec.LeaseToken, time.Minute); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if err := s.Release(ctx, "p", rec.LeaseToken); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// TestStartupWarnsOnAllKeysEviction: an allkeys-* eviction policy can drop
// unfinished records, and New must say so. The policy is set on a private
// server started with it (the shared one is never reconfigured); maxmemory
// stays 0, so it never actually evicts while the test runs.
func TestStartupWarnsOnAllKeysEviction(t *testing.T) {
	redisOptions(t) // the same switch as every other test against Redis
	c, _ := startRedis(t, "--maxmemory-policy", "allkeys-lru")
	if got := configValue(t, c, "maxmemory-policy"); got != "allkeys-lru" {
		t.Fatalf("private Redis runs with maxmemory-policy %q, want allkeys-lru", got)
	}
	var logs logBuffer
	if _, err := New(c, WithLogger(logs.logger())); err != nil {
		t.Fatalf("New: %v", err)
	}
	if out := logs.String(); !strings.Contains(out, "maxmemory-policy allkeys-lru can evict") {
		t.Fatalf("no eviction warning:\n%s", out)
	}
	// The shared server's default policy draws no such warning.
	shared := newClient(t)
	if policy := configValue(t, shared, "maxmemory-policy"); !strings.HasPrefix(policy, "allkeys-") {
		var quiet logBuffer
		if _, err := New(shared, WithPrefix(testPrefix(t, shared)), WithLogger(quiet.logger()), AllowVolatile()); err != nil {
			t.Fatalf("New on the shared Redis: %v", err)
		}
		if out := quiet.String(); strings.Contains(out, "can evict") {
			t.Fatalf("maxmemory-policy %s drew an eviction warning:\n%s", policy, out)
		}
	}
}
