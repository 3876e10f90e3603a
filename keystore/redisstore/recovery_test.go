package redisstore

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// proxy is a TCP relay between the client and the real Redis, so a test can
// take Redis away (stop), bring it back (start) and lose one reply after
// Redis executed the command (dropNextReply). Redis itself is never faked.
type proxy struct {
	t      *testing.T
	target string
	addr   string

	mu      sync.Mutex
	ln      net.Listener
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
	drop    atomic.Bool
	dropped atomic.Int64
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	p := &proxy{t: t, target: target, addr: "127.0.0.1:0", conns: map[net.Conn]struct{}{}}
	p.start()
	t.Cleanup(p.stop)
	return p
}

// start listens on the proxy's address (the same one after a stop).
func (p *proxy) start() {
	p.t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("proxy listen %s: %v", p.addr, err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	p.wg.Add(1)
	go p.accept(ln)
}

// stop closes the listener and every relayed connection, and waits for the
// relay goroutines to end.
func (p *proxy) stop() {
	p.mu.Lock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		client, err := ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		if !p.track(client) || !p.track(server) {
			client.Close()
			server.Close()
			continue
		}
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			io.Copy(server, client)
			server.Close()
			client.Close()
		}()
		go func() {
			defer p.wg.Done()
			p.relayReplies(client, server)
			server.Close()
			client.Close()
		}()
	}
}

// relayReplies copies server→client, except that when a drop is armed, the
// next reply Redis sends is discarded and the connection cut: the command
// ran, the client never hears about it.
func (p *proxy) relayReplies(client, server net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 {
			if p.drop.CompareAndSwap(true, false) {
				p.dropped.Add(1)
				return
			}
			if _, werr := client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func proxiedStore(t *testing.T, tune func(*redis.Options), opts ...Option) (*Store, *proxy, *redis.Client) {
	t.Helper()
	admin := newClient(t)
	opt := redisOptions(t)
	p := startProxy(t, opt.Addr)
	opt.Addr = p.addr
	if tune != nil {
		tune(opt)
	}
	c := dial(t, opt)
	s, err := New(c, append([]Option{WithPrefix(testPrefix(t, admin)), WithLogger(quietLogger()), AllowVolatile()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s, p, admin
}

// TestLostReplyIsRetriedSafely loses the reply of a Create, an Update and an
// Acquire after Redis ran them. go-redis resends; the nonce makes the resend
// report the first run's result, where a plain resend would have answered
// ErrExists, ErrConflict, or issued a second fencing token.
func TestLostReplyIsRetriedSafely(t *testing.T) {
	s, p, _ := proxiedStore(t, func(o *redis.Options) {
		o.MaxRetries, o.MinRetryBackoff, o.MaxRetryBackoff = 3, time.Millisecond, 5*time.Millisecond
	})
	ctx := context.Background()
	// Load the scripts and open a connection first, so the dropped reply is
	// the script's, not a NOSCRIPT or a handshake.
	warm, err := s.Create(ctx, keystore.Record{OperationID: "warm"}, "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, warm); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, "warm", "w", time.Minute); err != nil {
		t.Fatal(err)
	}

	p.drop.Store(true)
	rec, err := s.Create(ctx, keystore.Record{OperationID: "op"}, "w", time.Minute)
	if err != nil || rec.Version != 1 || rec.LeaseToken != 1 {
		t.Fatalf("Create whose reply was lost: %+v, %v; want version 1 token 1", rec, err)
	}
	p.drop.Store(true)
	rec.Attempts = 1
	up, err := s.Update(ctx, rec)
	if err != nil || up.Version != 2 || up.Attempts != 1 {
		t.Fatalf("Update whose reply was lost: version %d attempts %d, %v; want version 2", up.Version, up.Attempts, err)
	}
	p.drop.Store(true)
	acq, err := s.Acquire(ctx, "op", "w", time.Minute)
	if err != nil || acq.LeaseToken != 2 {
		t.Fatalf("Acquire whose reply was lost: token %d, %v; want token 2", acq.LeaseToken, err)
	}
	if n := p.dropped.Load(); n != 3 {
		t.Fatalf("the proxy dropped %d replies, want 3: the test did not exercise the resend", n)
	}
	if got, err := s.Get(ctx, "op"); err != nil || got.Version != 2 || got.LeaseToken != 2 {
		t.Fatalf("stored record: %+v, %v", got, err)
	}
}

// TestOutageFailsClosedThenRecovers takes Redis away: every call fails with
// an error wrapping ErrUnavailable and writes nothing; when Redis is back the
// same Store works again.
func TestOutageFailsClosedThenRecovers(t *testing.T) {
	s, p, admin := proxiedStore(t, func(o *redis.Options) {
		o.MaxRetries, o.MinRetryBackoff, o.MaxRetryBackoff = 1, time.Millisecond, 5*time.Millisecond
		o.DialTimeout = time.Second
	})
	ctx := context.Background()
	rec, err := s.Create(ctx, keystore.Record{OperationID: "before"}, "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}

	p.stop()
	calls := map[string]func(context.Context) error{
		"Create": func(ctx context.Context) error {
			_, err := s.Create(ctx, keystore.Record{OperationID: "during"}, "w", time.Minute)
			return err
		},
		"Get":     func(ctx context.Context) error { _, err := s.Get(ctx, "before"); return err },
		"Acquire": func(ctx context.Context) error { _, err := s.Acquire(ctx, "before", "w", time.Minute); return err },
		"Renew": func(ctx context.Context) error {
			_, err := s.Renew(ctx, "before", rec.LeaseToken, time.Minute)
			return err
		},
		"Release": func(ctx context.Context) error { return s.Release(ctx, "before", rec.LeaseToken) },
		"Update":  func(ctx context.Context) error { _, err := s.Update(ctx, rec); return err },
		"List":    func(ctx context.Context) error { _, err := s.List(ctx, keystore.Filter{}); return err },
		"DeleteExpired": func(ctx context.Context) error {
			_, err := s.DeleteExpired(ctx, time.Now(), 10)
			return err
		},
	}
	for name, call := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := call(ctx)
		cancel()
		if !errors.Is(err, keystore.ErrUnavailable) {
			t.Fatalf("%s while Redis is away: %v, want an error wrapping ErrUnavailable", name, err)
		}
	}
	if n := admin.Exists(ctx, s.recordKey("during")).Val(); n != 0 {
		t.Fatal("a Create that failed during the outage wrote its record")
	}

	p.start()
	if _, err := s.Create(ctx, keystore.Record{OperationID: "after"}, "w", time.Minute); err != nil {
		t.Fatalf("Create once Redis is back: %v", err)
	}
	if _, err := s.Update(ctx, rec); err != nil {
		t.Fatalf("Update once Redis is back: %v", err)
	}
}

// TestKilledConnectionsRecover kills the store's connections on the server
// side (CLIENT KILL by ID, only ours): the next calls reconnect by themselves.
func TestKilledConnectionsRecover(t *testing.T) {
	admin := newClient(t)
	opt := redisOptions(t)
	name := "pagpolartest-" + randomHex(t, 6)
	opt.ClientName = name
	c := dial(t, opt)
	s, err := New(c, WithPrefix(testPrefix(t, admin)), WithLogger(quietLogger()), AllowVolatile())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rec, err := s.Create(ctx, keystore.Record{OperationID: "k"}, "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	list, err := admin.ClientList(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	killed := 0
	for line := range strings.SplitSeq(list, "\n") {
		if !strings.Contains(" "+line+" ", " name="+name+" ") {
			continue
		}
		for f := range strings.FieldsSeq(line) {
			if id, ok := strings.CutPrefix(f, "id="); ok {
				if err := admin.Do(ctx, "CLIENT", "KILL", "ID", id).Err(); err != nil {
					t.Fatalf("CLIENT KILL ID %s: %v", id, err)
				}
				killed++
			}
		}
	}
	if killed == 0 {
		t.Fatalf("no connection named %s in CLIENT LIST", name)
	}
	rec.Attempts = 1
	if _, err := s.Update(ctx, rec); err != nil {
		t.Fatalf("Update after %d connections were killed: %v", killed, err)
	}
	if got, err := s.Get(ctx, "k"); err != nil || got.Attempts != 1 {
		t.Fatalf("Get after the kill: %+v, %v", got, err)
	}
}

// TestNewFailsClosedWhenRedisIsAway: New reports an unreachable Redis as
// unavailable instead of returning a Store that has checked nothing.
func TestNewFailsClosedWhenRedisIsAway(t *testing.T) {
	opt := redisOptions(t)
	p := startProxy(t, opt.Addr)
	p.stop()
	opt.Addr = p.addr
	opt.MaxRetries, opt.DialTimeout = -1, time.Second
	c := redis.NewClient(opt)
	defer c.Close()
	_, err := New(c, WithPrefix("pagpolartest-away"), WithLogger(quietLogger()))
	if !errors.Is(err, keystore.ErrUnavailable) {
		t.Fatalf("New with Redis away: %v, want an error wrapping ErrUnavailable", err)
	}
}
