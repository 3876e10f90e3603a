package storeurl_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/redisstore"
	"github.com/pagpolar/pagpolar-go/keystore/sqlstore"
	"github.com/pagpolar/pagpolar-go/keystore/storeurl"
	"github.com/redis/go-redis/v9"
)

func suffix(t *testing.T) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// roundTrip checks the store works: create, read back, settle, list.
func roundTrip(t *testing.T, s keystore.Store) {
	t.Helper()
	ctx := context.Background()
	id := "storeurl/" + suffix(t)
	rec, err := s.Create(ctx, keystore.Record{OperationID: id, Key: "k", Kind: "pix", State: keystore.StatePending}, "w", time.Minute)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	rec.State = keystore.StateSucceeded
	if _, err := s.Update(ctx, rec); err != nil {
		t.Fatalf("Update: %v", err)
	}
	got, err := s.Get(ctx, id)
	if err != nil || got.State != keystore.StateSucceeded {
		t.Fatalf("Get = %+v, %v", got, err)
	}
}

func open(t *testing.T, raw string) keystore.Store {
	t.Helper()
	s, closeFn, err := storeurl.Open(context.Background(), raw)
	if err != nil {
		t.Fatalf("Open(%q): %v", raw, err)
	}
	t.Cleanup(func() {
		if err := closeFn(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

func TestMemory(t *testing.T) {
	for _, raw := range []string{"memory:", "memory://", "MEMORY:"} {
		s := open(t, raw)
		if _, ok := s.(*keystore.Memory); !ok {
			t.Fatalf("Open(%q) = %T, want *keystore.Memory", raw, s)
		}
		roundTrip(t, s)
	}
}

func TestSQLite(t *testing.T) {
	dir := t.TempDir()
	abs := filepath.Join(dir, "a.db")
	roundTrip(t, open(t, "sqlite:"+abs))
	roundTrip(t, open(t, "sqlite://"+filepath.Join(dir, "b.db")+"?table=shop_ops&busy_timeout=2s"))
	// Reopening the same file and table sees the same records.
	s1 := open(t, "sqlite:"+abs+"?table=t1")
	ctx := context.Background()
	if _, err := s1.Create(ctx, keystore.Record{OperationID: "x", Key: "k", Kind: "pix"}, "w", time.Minute); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, "sqlite:"+abs+"?table=t1")
	if _, err := s2.Get(ctx, "x"); err != nil {
		t.Fatalf("second Open does not see the first one's record: %v", err)
	}
	// A relative path, with an escaped character.
	wd, _ := os.Getwd()
	t.Cleanup(func() { _ = os.Chdir(wd) })
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, open(t, "sqlite:rel%20ops.db"))
	if _, err := os.Stat(filepath.Join(dir, "rel ops.db")); err != nil {
		t.Fatalf("relative path not created: %v", err)
	}
}

func TestBadURLs(t *testing.T) {
	dir := t.TempDir()
	for _, raw := range []string{
		"",
		"no-scheme",
		"ftp://example.com/x",
		"memory:x",
		"sqlite:",
		"sqlite://host/x.db",
		"sqlite:" + filepath.Join(dir, "x.db") + "?colour=blue",
		"sqlite:" + filepath.Join(dir, "x.db") + "?table=bad-name",
		"sqlite:" + filepath.Join(dir, "x.db") + "?busy_timeout=soon",
		"postgres://u:hunter2@127.0.0.1:5432/db?table=x;drop",
		"postgres://u:hunter2@127.0.0.1:5432/db?table=x-y",
		"redis://u:hunter2@127.0.0.1:6379/0?prefix=a{b}",
		"postgres://u:hunter2@[::1/db",
		"redis://u:hunter2@127.0.0.1:6379/notanumber",
		"redis://u:hunter2@127.0.0.1:6379/0?bogus=1",
		"redis://u:hunter2@127.0.0.1:6379/0?volatile=maybe",
		"redis://u:hunter2@127.0.0.1:6379/0?wait=0",
		"redis://u:hunter2@127.0.0.1:6379/0?wait_timeout=1s",
		"redis://u:hunter2@127.0.0.1:6379/0?wait=1&wait_timeout=soon",
		"postgres://u:hunter2@127.0.0.1:5432/db?async_commit=perhaps",
		"redis+cluster:127.0.0.1:7000",
		"redis+cluster://u:hunter2@127.0.0.1/",
		"redis+cluster://u:hunter2@127.0.0.1:7000,:7001/",
		"redis+cluster://u:hunter2@127.0.0.1:7000/3",
		"redis+cluster://u:hunter2@127.0.0.1:7000/?bogus=1",
		"redis+cluster://u:hunter2@127.0.0.1:7000/?prefix=a{b}",
		"redis+cluster://u:hunter2@127.0.0.1:7000/?volatile=x",
	} {
		_, _, err := storeurl.Open(context.Background(), raw)
		if !errors.Is(err, storeurl.ErrBadURL) {
			t.Errorf("Open(%q): %v, want ErrBadURL", raw, err)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open(%q): error shows the password: %v", raw, err)
		}
	}
}

func TestUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, raw := range []string{
		"postgres://u:hunter2@127.0.0.1:1/db?sslmode=disable&connect_timeout=2",
		"redis://u:hunter2@127.0.0.1:1/0?dial_timeout=2s",
		"redis+cluster://u:hunter2@127.0.0.1:1,127.0.0.1:2/?dial_timeout=1s",
	} {
		_, _, err := storeurl.Open(ctx, raw)
		if !errors.Is(err, keystore.ErrUnavailable) {
			t.Errorf("Open(%q): %v, want ErrUnavailable", raw, err)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open(%q): error shows the password: %v", raw, err)
		}
	}
	// A SQLite file that cannot be created.
	_, _, err := storeurl.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "missing-dir", "x.db"))
	if !errors.Is(err, keystore.ErrUnavailable) {
		t.Errorf("Open(sqlite in a missing directory): %v, want ErrUnavailable", err)
	}
}

func TestPostgres(t *testing.T) {
	dsn := os.Getenv("PAGPOLAR_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Skip("PAGPOLAR_TEST_POSTGRES_DSN is not set (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable): skipping")
	}
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Skipf("PAGPOLAR_TEST_POSTGRES_DSN is not a postgres:// URL: skipping")
	}
	table := "storeurl_test_" + suffix(t)
	q := u.Query()
	q.Set("table", table)
	u.RawQuery = q.Encode()
	t.Cleanup(func() {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Error(err)
			return
		}
		defer db.Close()
		for _, tb := range []string{table, table + "_meta"} {
			if _, err := db.Exec("DROP TABLE IF EXISTS " + tb); err != nil {
				t.Errorf("drop %s: %v", tb, err)
			}
		}
	})
	roundTrip(t, open(t, u.String()))
	u.Scheme = "postgresql"
	roundTrip(t, open(t, u.String()))
}

func TestRedis(t *testing.T) {
	raw := os.Getenv("PAGPOLAR_TEST_REDIS_URL")
	if raw == "" {
		t.Skip("PAGPOLAR_TEST_REDIS_URL is not set (e.g. redis://127.0.0.1:6379/0): skipping")
	}
	prefix := "storeurl_test_" + suffix(t)
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("prefix", prefix)
	u.RawQuery = q.Encode()
	cleanRedis(t, raw, prefix)
	// The shared test Redis keeps nothing on disk: refused without the
	// opt-out, which the error names.
	_, _, err = storeurl.Open(context.Background(), u.String())
	if !errors.Is(err, redisstore.ErrVolatile) || errors.Is(err, storeurl.ErrBadURL) || !strings.Contains(err.Error(), "volatile=1") {
		t.Fatalf("Open of a Redis without AOF: %v; want ErrVolatile naming volatile=1", err)
	}
	q.Set("volatile", "1")
	u.RawQuery = q.Encode()
	roundTrip(t, open(t, u.String()))
	// wait=N: with fewer replicas attached, writes fail at once, not sent.
	q.Set("wait", "5")
	q.Set("wait_timeout", "2s")
	u.RawQuery = q.Encode()
	s := open(t, u.String())
	start := time.Now()
	_, err = s.Create(context.Background(), keystore.Record{OperationID: "w"}, "w", time.Minute)
	if !errors.Is(err, redisstore.ErrNotDurable) || time.Since(start) > time.Second {
		t.Fatalf("Create with wait=5 on a Redis without 5 replicas: %v after %v; want ErrNotDurable at once", err, time.Since(start))
	}
}

// TestPostgresAsyncCommit: a session with synchronous_commit off (set
// through the connection's options) is refused unless async_commit=1.
func TestPostgresAsyncCommit(t *testing.T) {
	dsn := os.Getenv("PAGPOLAR_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Skip("PAGPOLAR_TEST_POSTGRES_DSN is not set (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable): skipping")
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	table := "storeurl_test_" + suffix(t)
	q := u.Query()
	q.Set("table", table)
	q.Set("options", "-c synchronous_commit=off")
	u.RawQuery = q.Encode()
	t.Cleanup(func() {
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Error(err)
			return
		}
		defer db.Close()
		for _, tb := range []string{table, table + "_meta"} {
			if _, err := db.Exec("DROP TABLE IF EXISTS " + tb); err != nil {
				t.Errorf("drop %s: %v", tb, err)
			}
		}
	})
	_, _, err = storeurl.Open(context.Background(), u.String())
	if !errors.Is(err, sqlstore.ErrAsyncCommit) || !strings.Contains(err.Error(), "async_commit=1") {
		t.Fatalf("Open with synchronous_commit off: %v; want ErrAsyncCommit naming async_commit=1", err)
	}
	q.Set("async_commit", "1")
	u.RawQuery = q.Encode()
	roundTrip(t, open(t, u.String()))
}

// TestRedisCluster opens the CI's Redis Cluster by its nodes
// (PAGPOLAR_TEST_REDIS_CLUSTER=host:port,host:port,...).
func TestRedisCluster(t *testing.T) {
	nodes := os.Getenv("PAGPOLAR_TEST_REDIS_CLUSTER")
	if nodes == "" {
		t.Skip("PAGPOLAR_TEST_REDIS_CLUSTER is not set (e.g. 127.0.0.1:7000,127.0.0.1:7001,...; .ci/run starts one): skipping")
	}
	prefix := "storeurl_test_" + suffix(t)
	t.Cleanup(func() {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(nodes, ",")})
		defer c.Close()
		ctx := context.Background()
		err := c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			iter := n.Scan(ctx, 0, prefix+":*", 100).Iterator()
			for iter.Next(ctx) {
				n.Del(ctx, iter.Val())
			}
			return iter.Err()
		})
		if err != nil {
			t.Errorf("clean up %s: %v", prefix, err)
		}
	})
	for _, raw := range []string{
		"redis+cluster://" + nodes + "/?prefix=" + prefix,
		"redis+cluster://" + strings.Split(nodes, ",")[0] + "?prefix=" + prefix + "&max_redirects=5",
	} {
		roundTrip(t, open(t, raw))
	}
}

// cleanRedis deletes the keys under prefix when the test ends.
func cleanRedis(t *testing.T, raw, prefix string) {
	t.Cleanup(func() {
		opts, err := redis.ParseURL(raw)
		if err != nil {
			t.Error(err)
			return
		}
		c := redis.NewClient(opts)
		defer c.Close()
		ctx := context.Background()
		iter := c.Scan(ctx, 0, prefix+"*", 100).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Errorf("clean up %s*: %v", prefix, err)
		}
	})
}

// relay is a TCP relay to the real Redis that a test can cut, so that the
// store sees Redis go away (connections refused) after Open.
type relay struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func startRelay(t *testing.T, target string) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			r.mu.Lock()
			r.conns = append(r.conns, c, s)
			r.mu.Unlock()
			r.wg.Add(2)
			go func() { defer r.wg.Done(); io.Copy(s, c); s.Close(); c.Close() }()
			go func() { defer r.wg.Done(); io.Copy(c, s); s.Close(); c.Close() }()
		}
	}()
	t.Cleanup(r.cut)
	return r
}

// cut closes the listener and every relayed connection: from then on,
// connecting is refused.
func (r *relay) cut() {
	r.ln.Close()
	r.mu.Lock()
	for _, c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// TestRedisOutageFailsFast: Open builds its Redis client to fail fast, so
// with Redis gone (refused) Open, and a call on a store it opened, fail in a
// small fraction of redisstore.DefaultCallTimeout (go-redis's defaults
// take about 1.7 s per call: 5 dials, 100 ms apart, in each of 4 attempts).
func TestRedisOutageFailsFast(t *testing.T) {
	raw := os.Getenv("PAGPOLAR_TEST_REDIS_URL")
	if raw == "" {
		t.Skip("PAGPOLAR_TEST_REDIS_URL is not set (e.g. redis://127.0.0.1:6379/0): skipping")
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	limit := redisstore.DefaultCallTimeout / 3
	r := startRelay(t, u.Host)
	prefix := "storeurl_test_" + suffix(t)
	cleanRedis(t, raw, prefix)
	u.Host = r.ln.Addr().String()
	q := u.Query()
	q.Set("prefix", prefix)
	q.Set("volatile", "1") // the shared test Redis keeps nothing on disk
	u.RawQuery = q.Encode()
	s := open(t, u.String())
	if _, err := s.Get(context.Background(), "absent"); !errors.Is(err, keystore.ErrNotFound) {
		t.Fatalf("Get through the relay: %v, want ErrNotFound", err)
	}
	r.cut()
	start := time.Now()
	_, err = s.Get(context.Background(), "absent")
	took := time.Since(start)
	if !errors.Is(err, keystore.ErrUnavailable) {
		t.Fatalf("Get with Redis gone: %v, want ErrUnavailable", err)
	}
	t.Logf("Get failed after %v", took.Round(time.Millisecond))
	if took > limit {
		t.Errorf("Get took %v to fail against a refused port, want under %v", took, limit)
	}

	// Open itself, on the now refused address.
	start = time.Now()
	_, _, err = storeurl.Open(context.Background(), u.String())
	took = time.Since(start)
	if !errors.Is(err, keystore.ErrUnavailable) {
		t.Fatalf("Open with Redis gone: %v, want ErrUnavailable", err)
	}
	t.Logf("Open failed after %v", took.Round(time.Millisecond))
	if took > limit {
		t.Errorf("Open took %v to fail against a refused port, want under %v", took, limit)
	}
}
