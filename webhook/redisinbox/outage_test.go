package redisinbox_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pagpolar/pagpolar-go/webhook"
	"github.com/pagpolar/pagpolar-go/webhook/redisinbox"
)

// relay is a TCP relay to the real Redis that a test can cut, so that the
// store sees Redis go away (connections refused) after New.
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

func testRedisURL(t *testing.T) *url.URL {
	t.Helper()
	raw := os.Getenv("PAGPOLAR_TEST_REDIS_URL")
	if raw == "" {
		t.Skip("PAGPOLAR_TEST_REDIS_URL is not set: skipping the Redis store")
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func insertTime(t *testing.T, s *redisinbox.Store, ctx context.Context) time.Duration {
	t.Helper()
	start := time.Now()
	_, _, err := s.Insert(ctx, webhook.Record{Key: "k", Event: "TRANSACTION_PAID", Entity: "sale:1", Payload: []byte("{}")})
	took := time.Since(start)
	if !errors.Is(err, webhook.ErrUnavailable) {
		t.Fatalf("Insert with Redis gone: %v, want ErrUnavailable", err)
	}
	return took
}

// TestOutageBoundedByContext: with Redis gone, a user-built client whose
// own retries would take about 20 s per call (MaxRetries 10 × DialerRetries
// 10, 200 ms apart; no ContextTimeoutEnabled) still fails an Insert within
// 2× its context's deadline, the bound the Inbox relies on.
func TestOutageBoundedByContext(t *testing.T) {
	u := testRedisURL(t)
	r := startRelay(t, u.Host)
	c := redis.NewClient(&redis.Options{Addr: r.ln.Addr().String(), MaxRetries: 10, DialerRetries: 10, DialerRetryTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { c.Close() })
	s, err := redisinbox.New(c, redisinbox.WithPrefix("pagpolar-test:webhook:outage"), redisinbox.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), redisinbox.AllowVolatile())
	if err != nil {
		t.Fatal(err)
	}
	r.cut()
	const bound = 500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	took := insertTime(t, s, ctx)
	t.Logf("Insert failed after %v (context deadline %v)", took.Round(time.Millisecond), bound)
	if took > 2*bound {
		t.Fatalf("Insert took %v, want well within 2× its context's deadline %v", took, bound)
	}
}

// TestNewFromURLFailsFast: NewFromURL's client fails a call against a
// refused port in a small fraction of a second, without a deadline (go-redis's
// defaults take about 1.7 s).
func TestNewFromURLFailsFast(t *testing.T) {
	u := testRedisURL(t)
	r := startRelay(t, u.Host)
	u.Host = r.ln.Addr().String()
	s, err := redisinbox.NewFromURL(u.String(), redisinbox.WithPrefix("pagpolar-test:webhook:outage"), redisinbox.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), redisinbox.AllowVolatile())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	r.cut()
	took := insertTime(t, s, context.Background())
	t.Logf("Insert failed after %v", took.Round(time.Millisecond))
	if limit := time.Second; took > limit {
		t.Fatalf("Insert took %v against a refused port, want under %v", took, limit)
	}
}
