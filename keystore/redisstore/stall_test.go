package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// holeProxy relays TCP connections to Redis and can blackhole one of them:
// armed, the next connection that carries a byte from the client stops
// forwarding both ways and stays open, while the others, and new ones,
// keep working.
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
	copyTo := func(dst, src net.Conn, arm bool) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if arm && n > 0 && !frozen.Load() && p.armed.CompareAndSwap(true, false) {
				frozen.Store(true)
				p.holed.Add(1)
			}
			if n > 0 && !frozen.Load() {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		c.Close()
		s.Close()
	}
	done := make(chan struct{})
	go func() { copyTo(s, c, true); close(done) }()
	copyTo(c, s, false)
	<-done
}

type timedCall struct {
	took time.Duration
	err  error
}

func loadRedis(s keystore.Store, writers int, prefix string, stop <-chan struct{}) []timedCall {
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
				r, err := s.Create(context.Background(), keystore.Record{OperationID: fmt.Sprintf("%s/%d/%d", prefix, w, i)}, "w", time.Minute)
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

func summarize(calls []timedCall) (n, failed int, p99, maxd time.Duration) {
	var ds []time.Duration
	for _, c := range calls {
		if c.err != nil {
			failed++
		}
		ds = append(ds, c.took)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	if len(ds) > 0 {
		p99, maxd = ds[len(ds)*99/100], ds[len(ds)-1]
	}
	return len(ds), failed, p99, maxd
}

// TestRedisBlackholedConnectionStallsOnlyItsCallers: one connection to
// Redis stops answering (not closed). The calls on it end at the call
// timeout; callers arriving meanwhile go on other connections.
func TestRedisBlackholedConnectionStallsOnlyItsCallers(t *testing.T) {
	opt := redisOptions(t)
	p := startHoleProxy(t, opt.Addr)
	opt.Addr = p.ln.Addr().String()
	c := dial(t, opt)
	const callTimeout = time.Second
	s, err := New(c, WithPrefix(testPrefix(t, newClient(t))), WithLogger(quietLogger()), AllowVolatile(), WithCallTimeout(callTimeout))
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var calls []timedCall
	loaded := make(chan struct{})
	go func() { calls = loadRedis(s, 8, "w", stop); close(loaded) }()
	time.Sleep(300 * time.Millisecond) // the load is under way (real time: latencies are measured)
	p.armed.Store(true)
	for deadline := time.Now().Add(5 * time.Second); p.holed.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	stopProbes := make(chan struct{})
	var probes []timedCall
	probed := make(chan struct{})
	go func() { probes = loadRedis(s, 4, "probe", stopProbes); close(probed) }()
	time.Sleep(callTimeout / 2)
	close(stopProbes)
	<-probed
	time.Sleep(callTimeout)
	close(stop)
	<-loaded

	var stuck []timedCall
	for _, c := range calls {
		if c.err != nil {
			stuck = append(stuck, c)
		}
	}
	sn, _, _, smax := summarize(stuck)
	pn, pfailed, pp99, pmax := summarize(probes)
	n, _, p99, maxd := summarize(calls)
	t.Logf("%d connection blackholed; %d calls failed with it (slowest %v, call timeout %v)", p.holed.Load(), sn, smax.Round(time.Millisecond), callTimeout)
	t.Logf("8 writers overall: %d calls, p99 %v, max %v", n, p99.Round(time.Millisecond), maxd.Round(time.Millisecond))
	t.Logf("4 writers started while it was stuck, for %v: %d calls (%d failed), p99 %v, max %v", callTimeout/2, pn, pfailed, pp99.Round(time.Millisecond), pmax.Round(time.Millisecond))
	if p.holed.Load() != 1 {
		t.Fatalf("%d connections blackholed, want 1", p.holed.Load())
	}
	for _, c := range stuck {
		if !errors.Is(c.err, keystore.ErrUnavailable) || c.took > callTimeout+500*time.Millisecond {
			t.Fatalf("a call on the dead connection: %v after %v; want ErrUnavailable within the call timeout", c.err, c.took)
		}
	}
	if sn == 0 {
		t.Fatal("no call met the dead connection: the test proves nothing")
	}
	if pfailed > 0 || pn < 8 || pmax > callTimeout/2 {
		t.Fatalf("writers arriving while one connection was dead were held up: %d calls, %d failed, max %v", pn, pfailed, pmax)
	}
}
