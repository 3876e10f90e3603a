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

// TestStartupWarnsWhenRedisKeepsNothing: this machine's Redis runs with
// --save "" --appendonly no, and New must say so.
func TestStartupWarnsWhenRedisKeepsNothing(t *testing.T) {
	c := newClient(t)
	var logs logBuffer
	if _, err := New(c, WithPrefix(testPrefix(t, c)), WithLogger(logs.logger())); err != nil {
		t.Fatalf("New: %v", err)
	}
	aof, save := configValue(t, c, "appendonly"), configValue(t, c, "save")
	out := logs.String()
	switch {
	case aof != "yes" && strings.TrimSpace(save) == "":
		if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "keeps nothing on disk") {
			t.Fatalf("Redis has appendonly %q save %q, but New logged no warning:\n%s", aof, save, out)
		}
	case aof != "yes":
		if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "only RDB snapshots") {
			t.Fatalf("Redis has appendonly %q save %q, but New logged no warning:\n%s", aof, save, out)
		}
	default:
		if strings.Contains(out, "keeps nothing") || strings.Contains(out, "only RDB") {
			t.Fatalf("Redis has AOF on, but New warned:\n%s", out)
		}
	}
}

// restrictedUser creates an ACL user that may not run CONFIG (as on managed
// Redis) and may only touch keys under keyPattern, and returns options that
// log in as it. admin is a private server (startRedis): ACL SETUSER changes
// the server's configuration, which tests never do on the shared one.
func restrictedUser(t *testing.T, admin *redis.Client, keyPattern string) *redis.Options {
	t.Helper()
	ctx := context.Background()
	name := "pagpolartest-" + randomHex(t, 6)
	pass := randomHex(t, 16)
	if err := admin.Do(ctx, "ACL", "SETUSER", name, "reset", "on", ">"+pass, "~"+keyPattern, "+@all", "-config").Err(); err != nil {
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

// TestStartupWithConfigBlocked: where CONFIG is denied, New starts anyway and
// says at debug level that persistence is unknown.
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
		t.Fatalf("New with CONFIG blocked: %v", err)
	}
	out := logs.String()
	if !strings.Contains(out, "level=DEBUG") || !strings.Contains(out, "durability unknown") {
		t.Fatalf("New logged no debug line about unknown persistence:\n%s", out)
	}
	if strings.Contains(out, "level=WARN") {
		t.Fatalf("New warned although it could not see the settings:\n%s", out)
	}
	if _, err := s.Create(context.Background(), keystore.Record{OperationID: "x"}, "w", time.Minute); err != nil {
		t.Fatalf("Create: %v", err)
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
	s, err := New(c, WithPrefix(testPrefix(t, c)), WithWaitAOF(1, 0, time.Second), WithLogger(quietLogger()))
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

// TestWaitNotConfirmed asks for more replicas than the Redis has: every
// durable write comes back as unavailable and not durable, although the
// master applied it, and refused writes (ErrExists...) report as usual.
func TestWaitNotConfirmed(t *testing.T) {
	c := newClient(t)
	want := connectedReplicas(t, c) + 1
	s, err := New(c, WithPrefix(testPrefix(t, c)), WithWait(want, 30*time.Millisecond), WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	notDurable := func(op string, err error) {
		t.Helper()
		if !errors.Is(err, keystore.ErrUnavailable) || !errors.Is(err, ErrNotDurable) {
			t.Fatalf("%s: %v, want an error wrapping ErrUnavailable and ErrNotDurable", op, err)
		}
	}
	rec, err := s.Create(ctx, keystore.Record{OperationID: "w"}, "owner", time.Minute)
	notDurable("Create", err)
	got, gerr := s.Get(ctx, "w")
	if gerr != nil || got.Version != 1 || rec.Version != 1 {
		t.Fatalf("after an unconfirmed Create: Get = %+v, %v; want the record the master applied", got, gerr)
	}
	_, err = s.Create(ctx, keystore.Record{OperationID: "w"}, "owner", time.Minute)
	if !errors.Is(err, keystore.ErrExists) || errors.Is(err, ErrNotDurable) {
		t.Fatalf("second Create: %v, want ErrExists only", err)
	}
	rec.Attempts = 1
	up, err := s.Update(ctx, rec)
	notDurable("Update", err)
	if up.Version != 2 {
		t.Fatalf("unconfirmed Update returned version %d, want 2 (applied)", up.Version)
	}
	acq, err := s.Acquire(ctx, "w", "owner", time.Minute)
	notDurable("Acquire", err)
	if acq.LeaseToken != 2 {
		t.Fatalf("unconfirmed Acquire returned token %d, want 2", acq.LeaseToken)
	}
	// Lease changes that need no durability do not wait.
	if _, err := s.Renew(ctx, "w", acq.LeaseToken, time.Minute); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if err := s.Release(ctx, "w", acq.LeaseToken); err != nil {
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
		if _, err := New(shared, WithPrefix(testPrefix(t, shared)), WithLogger(quiet.logger())); err != nil {
			t.Fatalf("New on the shared Redis: %v", err)
		}
		if out := quiet.String(); strings.Contains(out, "can evict") {
			t.Fatalf("maxmemory-policy %s drew an eviction warning:\n%s", policy, out)
		}
	}
}
