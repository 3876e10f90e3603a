// A store that goes away mid-run fails closed: outages of each store kind (a
// store that refuses every call, a TCP proxy that cuts the connection), and
// the test that no operation is charged twice or left without an outcome
// through them.

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/internal/report"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// ---- the store going away ----

// outage is a store that can be taken away and given back.
type outage interface {
	down()
	up(t *testing.T)
}

// flakyStore wraps a store and fails every call while down, as a store
// whose disk or network went away would.
type flakyStore struct {
	keystore.Store
	isDown atomic.Bool
}

func (f *flakyStore) down()         { f.isDown.Store(true) }
func (f *flakyStore) up(*testing.T) { f.isDown.Store(false) }

func (f *flakyStore) failing() error {
	if f.isDown.Load() {
		return errTestOutage
	}
	return nil
}

func (f *flakyStore) Create(ctx context.Context, r keystore.Record, owner string, ttl time.Duration) (keystore.Record, error) {
	if err := f.failing(); err != nil {
		return keystore.Record{}, err
	}
	return f.Store.Create(ctx, r, owner, ttl)
}

func (f *flakyStore) Get(ctx context.Context, id string) (keystore.Record, error) {
	if err := f.failing(); err != nil {
		return keystore.Record{}, err
	}
	return f.Store.Get(ctx, id)
}

func (f *flakyStore) Acquire(ctx context.Context, id, owner string, ttl time.Duration) (keystore.Record, error) {
	if err := f.failing(); err != nil {
		return keystore.Record{}, err
	}
	return f.Store.Acquire(ctx, id, owner, ttl)
}

func (f *flakyStore) Renew(ctx context.Context, id string, token int64, ttl time.Duration) (keystore.Record, error) {
	if err := f.failing(); err != nil {
		return keystore.Record{}, err
	}
	return f.Store.Renew(ctx, id, token, ttl)
}

func (f *flakyStore) Release(ctx context.Context, id string, token int64) error {
	if err := f.failing(); err != nil {
		return err
	}
	return f.Store.Release(ctx, id, token)
}

func (f *flakyStore) Update(ctx context.Context, r keystore.Record) (keystore.Record, error) {
	if err := f.failing(); err != nil {
		return keystore.Record{}, err
	}
	return f.Store.Update(ctx, r)
}

func (f *flakyStore) List(ctx context.Context, fl keystore.Filter) ([]keystore.Record, error) {
	if err := f.failing(); err != nil {
		return nil, err
	}
	return f.Store.List(ctx, fl)
}

var errTestOutage = fmt.Errorf("%w: test outage", keystore.ErrUnavailable)

// tcpProxy forwards a local port to a server (Redis, PostgreSQL); down
// closes the port and cuts every connection, up opens the same port again:
// the store's address stops answering, then answers again.
type tcpProxy struct {
	target string
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
}

func (p *tcpProxy) up(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("proxy: listening again on %s: %v", p.addr, err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.pipe(c) })
		}
	})
}

func (p *tcpProxy) pipe(c net.Conn) {
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // went down meanwhile
		p.mu.Unlock()
		c.Close()
		s.Close()
		return
	}
	p.conns[c], p.conns[s] = true, true
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(s, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, s); done <- struct{}{} }()
	<-done
	c.Close()
	s.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, s)
	p.mu.Unlock()
}

func (p *tcpProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
}

func startProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	p := &tcpProxy{target: target, addr: "127.0.0.1:0", conns: map[net.Conn]bool{}}
	p.up(t)
	t.Cleanup(func() { p.down(); p.wg.Wait() })
	return p
}

// outageStore returns a store of kind that the test can take away: SQLite
// behind flakyStore, PostgreSQL and Redis behind a TCP proxy.
func outageStore(t *testing.T, ctx context.Context, kind string) (keystore.Store, outage) {
	t.Helper()
	raw := testStoreURL(t, kind)
	if kind == "sqlite" {
		f := &flakyStore{Store: openTestStore(t, ctx, raw)}
		return f, f
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		t.Fatalf("the %s test URL must be a URL with a host (host:port): %v", kind, err)
	}
	target := u.Host
	if u.Port() == "" {
		target = net.JoinHostPort(u.Hostname(), map[string]string{"postgres": "5432", "redis": "6379"}[kind])
	}
	p := startProxy(t, target)
	u.Host = p.addr
	return openTestStore(t, ctx, u.String()), p
}

// TestStoreOutageFailsClosed: while the store is away every call fails with
// ErrStoreUnavailable and sends nothing (no request without a saved key); an
// answer that arrives as the store goes away is settled later by lookup;
// when the store is back, work continues with one sale per order.
func TestStoreOutageFailsClosed(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			store, out := outageStore(t, ctx, kind)
			srv := pagpolartest.NewServer(t, pagpolartest.WithProcessingWindow(crashWindow))

			const orders, cut = 12, 5 // the store goes away as order 5's answer arrives
			ref := func(i int) string { return fmt.Sprintf("outage-%02d", i) }
			var cutOnce sync.Once
			hook := func(_ context.Context, e pagpolar.Event) {
				if e.Kind == pagpolar.EventSent && e.OperationID == "pix:"+ref(cut) {
					cutOnce.Do(out.down)
				}
			}
			c, err := newScenarioClient(srv.URL, srv.CredentialID, srv.Token, store, crashWindow, 4, hook, "outage-"+randomName(t))
			if err != nil {
				t.Fatal(err)
			}
			pix := func(i int) (*pagpolar.Charge, error) {
				return c.Payments.Pix(ctx, pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: ref(i), Customer: demoCustomer})
			}
			sales := map[int]string{}
			for i := range orders {
				before := len(srv.Ledger().Requests)
				ch, err := pix(i)
				switch {
				case i < cut:
					if err != nil {
						t.Fatalf("order %d before the outage: %v", i, err)
					}
					sales[i] = ch.Sale.ID
				case i == cut:
					// The sale was made and its answer came back; only
					// recording it failed. The caller still gets the sale.
					if err != nil {
						t.Fatalf("order %d (answer arrived as the store went away): %v", i, err)
					}
					sales[i] = ch.Sale.ID
				default:
					if !errors.Is(err, pagpolar.ErrStoreUnavailable) || !strings.Contains(err.Error(), "nothing was sent") {
						t.Fatalf("order %d during the outage: %v; want ErrStoreUnavailable saying nothing was sent", i, err)
					}
					if after := len(srv.Ledger().Requests); after != before {
						t.Fatalf("order %d during the outage reached the API (%d requests)", i, after-before)
					}
				}
			}

			out.up(t)
			run := &orderRunner{c: c, pause: crashWindow / 10}
			for i := range orders {
				oc := run.until(ctx, i, "pix:"+ref(i), func(ctx context.Context) (string, pagpolar.Source, error) {
					ch, err := pix(i)
					if err != nil {
						return "", "", err
					}
					return ch.Sale.ID, ch.Operation.Source, nil
				})
				if oc.State != "succeeded" {
					t.Fatalf("order %d after the outage: %+v", i, oc)
				}
				if want, ok := sales[i]; ok && oc.Ref != want {
					t.Fatalf("order %d: sale %s after the outage, %s before", i, oc.Ref, want)
				}
				if i == cut && oc.Source != string(pagpolar.SourceLookup) && oc.Source != string(pagpolar.SourceLocalRecord) {
					// Settled by lookup, or answered from what this client
					// knew and could not write during the outage.
					t.Errorf("order %d: source %s, want lookup or the client's remembered outcome (its record was left pending)", i, oc.Source)
				}
			}

			// Every request the API got carries a key saved before it.
			recs, err := store.List(ctx, keystore.Filter{Prefix: srv.CredentialID + "/", Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			saved := map[string]bool{}
			var exp []report.Expected
			for _, r := range recs {
				saved[r.Key] = true
				id := strings.TrimPrefix(r.OperationID, srv.CredentialID+"/")
				exp = append(exp, report.Expected{OperationID: id, Record: r, Found: true, Method: "pix", ExternalReference: strings.TrimPrefix(id, "pix:")})
			}
			l := srv.Ledger()
			for _, r := range l.Requests {
				if r.Method == http.MethodPost && !saved[r.Key] {
					t.Errorf("a request with key %s reached the API without a saved record", r.Key)
				}
			}
			if chk := report.Verify(srv.CredentialID, l, exp); !chk.OK() || len(exp) != orders || chk.Effects != orders {
				t.Fatalf("%d records, ledger check %+v", len(exp), chk)
			}
		})
	}
}
