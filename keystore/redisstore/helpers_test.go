package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const redisEnv = "PAGPOLAR_TEST_REDIS_URL"

// redisOptions returns the options of the test Redis, skipping the test when
// the environment does not name one.
func redisOptions(t testing.TB) *redis.Options {
	t.Helper()
	u := os.Getenv(redisEnv)
	if u == "" {
		t.Skipf("%s is not set: skipping tests against a real Redis (e.g. %s=redis://127.0.0.1:6379/0)", redisEnv, redisEnv)
	}
	opt, err := redis.ParseURL(u)
	if err != nil {
		t.Fatalf("%s: %v", redisEnv, err)
	}
	// As keystore/storeurl builds its clients: one dial per connection
	// attempt, and the context bounds socket waits.
	opt.ContextTimeoutEnabled = true
	opt.DialerRetries = 1
	return opt
}

// newClient connects to the test Redis and fails the test when it is set but
// unreachable.
func newClient(t testing.TB) *redis.Client {
	t.Helper()
	return dial(t, redisOptions(t))
}

func dial(t testing.TB, opt *redis.Options) *redis.Client {
	t.Helper()
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("%s is set but Redis at %s is unreachable: %v", redisEnv, opt.Addr, err)
	}
	return c
}

func randomHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// testPrefix returns a key prefix nobody else uses and deletes every key
// under it when the test ends. Other engineers share this Redis: never
// FLUSHDB.
func testPrefix(t testing.TB, c redis.UniversalClient) string {
	t.Helper()
	prefix := "pagpolartest-" + randomHex(t, 6)
	t.Cleanup(func() { deletePrefix(t, c, prefix) })
	return prefix
}

func deletePrefix(t testing.TB, c redis.UniversalClient, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, prefix+":*", 1000).Result()
		if err != nil {
			t.Errorf("clean-up of %s:*: %v", prefix, err)
			return
		}
		if len(keys) > 0 {
			if err := c.Unlink(ctx, keys...).Err(); err != nil {
				t.Errorf("clean-up of %s:*: %v", prefix, err)
				return
			}
		}
		if cursor = next; cursor == 0 {
			return
		}
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newTestStore returns a Store on the test Redis under a fresh prefix, with
// start-up logging discarded unless opts set a logger.
func newTestStore(t testing.TB, opts ...Option) (*Store, *redis.Client) {
	t.Helper()
	c := newClient(t)
	prefix := testPrefix(t, c)
	// The shared Redis keeps nothing on disk: opt out by name.
	all := append([]Option{WithPrefix(prefix), WithLogger(quietLogger()), AllowVolatile()}, opts...)
	s, err := New(c, all...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s, c
}

func redisZ(score float64, member string) redis.Z { return redis.Z{Score: score, Member: member} }

// startRedis runs a private redis-server (the same binary as the shared
// one) on a free loopback port, with an append-only file in a temporary
// directory (args can override it), and stops it when the test ends. Tests
// that reconfigure, freeze, flush or kill a server use one: the shared
// Redis is never reconfigured.
func startRedis(t *testing.T, args ...string) (*redis.Client, *exec.Cmd) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not on PATH: skipping a test that needs a private Redis")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	cmd := exec.Command(bin, append([]string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes", "--dir", t.TempDir()}, args...)...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	waitFor(t, "redis-server on port "+port+" to answer", func() bool {
		return c.Ping(context.Background()).Err() == nil
	})
	return c, cmd
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
