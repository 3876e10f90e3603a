package pagpolartest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	mathrand "math/rand"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// Server is a fake PagPolar API in the spirit of net/http/httptest: the six
// money routes and the read routes of CONTRACT.md, idempotency keys exactly
// as documented (per credential), plausible business behaviour, and injected
// faults that look to a client exactly as on a real network. It is safe for
// concurrent use.
type Server struct {
	URL          string // base URL including "/v1", e.g. http://127.0.0.1:PORT/v1; set by Start
	CredentialID string // the default credential
	Token        string // an access token of the default credential
	Clock        *Clock // every time the server reads or waits on

	cfg    config
	ctx    context.Context // ends on Close: ends every hold
	cancel context.CancelFunc

	mu          sync.Mutex
	tokens      map[string]string // access token → credential ID
	creds       map[string]*credential
	offers      map[string]Offer
	sales       []*sale
	saleByID    map[string]*sale
	refunds     []*refund
	subs        []*subscription
	subByID     map[string]*subscription
	planChanges []*planChange
	async       asyncState // WithAsync: the undecided effects
	requests    []RequestLog
	events      []Event
	delivered   int // events handed to the OnEvent functions so far
	delivering  bool
	eventFns    []func(Event)
	requestFns  []func(RequestLog)
	faults      []*activeFault
	rng         *mathrand.Rand
	keyGen      uint64
	waiting     int           // requests waiting on the Clock
	waitCh      chan struct{} // closed and replaced whenever waiting changes
	closed      bool
	started     bool
	srv         *http.Server
	serveDone   chan struct{}
	born        time.Time             // the Clock when the server was made (ShapeDateStepBack)
	stepMu      sync.Mutex            // guards steps
	steps       []clockStep           // StepClock: the API's own clock's steps, in order
	listCache   map[string]cachedList // ShapeCacheNoAge's micro-cache, by credential and URL

	handlers  sync.WaitGroup // running handlers; Add only while !closed (under mu)
	closeOnce sync.Once
}

// Offer is something a customer can buy. Amount is in centavos; a Plan can
// be subscribed to and be the target of a plan change.
type Offer struct {
	ID     string
	Amount int64
	Plan   bool
}

// The offers every server starts with.
var defaultOffers = [...]Offer{
	{ID: "offer-basic", Amount: 9990},
	{ID: "offer-premium", Amount: 19990},
	{ID: "plan-basic", Amount: 2990, Plan: true},
	{ID: "plan-pro", Amount: 5990, Plan: true},
}

// NewServer starts a Server on 127.0.0.1 with a random port and closes it
// when the test ends.
func NewServer(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s := NewUnstartedServer(opts...)
	if err := s.Start(); err != nil {
		t.Fatalf("pagpolartest: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// NewUnstartedServer returns a Server that is not listening yet, with its
// default credential, token and offers; call Start or StartAddr, then Close.
func NewUnstartedServer(opts ...Option) *Server {
	cfg := newConfig(opts)
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		Clock:    cfg.clock,
		cfg:      cfg,
		ctx:      ctx,
		cancel:   cancel,
		tokens:   make(map[string]string),
		creds:    make(map[string]*credential),
		offers:   make(map[string]Offer),
		saleByID: make(map[string]*sale),
		subByID:  make(map[string]*subscription),
		rng:      mathrand.New(mathrand.NewSource(cfg.seed)),
		waitCh:   make(chan struct{}),
	}
	s.born = s.Clock.Now()
	for _, o := range defaultOffers {
		s.offers[o.ID] = o
	}
	s.CredentialID = newID("cred_")
	s.Token = s.AddToken(s.CredentialID)
	return s
}

// Start listens on 127.0.0.1 with a random port and serves in the background.
func (s *Server) Start() error { return s.StartAddr("127.0.0.1:0") }

// StartAddr listens on addr (host:port; port 0 picks one) and serves in the
// background. It sets URL.
func (s *Server) StartAddr(addr string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.closed {
		return errors.New("pagpolartest: server already started or closed")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("pagpolartest: listen on %s: %w", addr, err)
	}
	s.started = true
	s.URL = "http://" + ln.Addr().String() + "/v1"
	s.srv = &http.Server{
		Handler:           http.HandlerFunc(s.serveHTTP),
		BaseContext:       func(net.Listener) context.Context { return s.ctx },
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0), // a fault's hijacked conns make it chatty
	}
	s.serveDone = make(chan struct{})
	go func() {
		defer close(s.serveDone)
		_ = s.srv.Serve(ln) // returns http.ErrServerClosed on Close/Shutdown
	}()
	return nil
}

// Close stops the server at once: it closes the listener and every
// connection, ends every hold and delay (those requests end without an
// answer, nothing more is committed), and returns when every handler has
// returned. It may be called more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		srv, done := s.srv, s.serveDone
		s.mu.Unlock()
		s.cancel()
		if srv != nil {
			_ = srv.Close()
			<-done
		}
		s.handlers.Wait()
	})
}

// Shutdown stops accepting connections and waits for the requests in flight
// to finish until ctx ends, then closes the server as Close does. It returns
// ctx's error if requests had to be cut short.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	var err error
	if srv != nil {
		err = srv.Shutdown(ctx)
	}
	s.Close()
	return err
}

// AddToken returns a new access token of credentialID, creating the
// credential if it is new. Tokens of one credential share its idempotency
// keys and its sales; another credential sees neither.
func (s *Server) AddToken(credentialID string) string {
	tok := newID("ppt_test_")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.credential(credentialID)
	s.tokens[tok] = credentialID
	return tok
}

// RevokeToken makes token unknown: requests carrying it get 401.
func (s *Server) RevokeToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tokens, token)
}

// AddOffer adds or replaces an offer (for every credential).
func (s *Server) AddOffer(o Offer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offers[o.ID] = o
}

// Inject adds a fault after those already injected (the first match
// applies). It panics on an invalid Fault (unknown Action or Route, a
// Probability outside [0, 1]), which is always a bug in the test.
func (s *Server) Inject(f Fault) {
	if err := validateFault(f); err != nil {
		panic(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &activeFault{Fault: f})
}

// ClearFaults removes every injected fault. Requests already holding one
// carry on with it.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// OnEvent registers fn to be called for every business event after it was
// committed, one event at a time, in order. fn runs on a goroutine of the
// server (the one that committed or one committing concurrently) and may
// call the Server's methods, Pay and Renew included: their events are
// delivered after fn returns.
func (s *Server) OnEvent(fn func(Event)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.eventFns = append(s.eventFns, fn)
}

// OnRequest registers fn to be called with each request's log entry when it
// is logged (before the client sees the answer). fn must not block.
func (s *Server) OnRequest(fn func(RequestLog)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requestFns = append(s.requestFns, fn)
}

// Events returns the business events so far, in order.
func (s *Server) Events() []Event {
	s.decideDue()
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Event(nil), s.events...)
}

// WaitHolds blocks until at least n requests are waiting on the server's
// Clock (a FaultHold, a FaultCommitThen500After answer, a FaultLatency or
// WithLatency delay) or ctx ends. A test calls it before Clock.Advance so
// that the Advance does end those waits.
func (s *Server) WaitHolds(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		w, ch := s.waiting, s.waitCh
		s.mu.Unlock()
		if w >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("pagpolartest: %d of %d holds waiting: %w", w, n, ctx.Err())
		}
	}
}

// sleep waits d on the Clock; false if ctx ended first. The timer is
// registered before the wait is counted, so that an Advance made after
// WaitHolds returned always reaches it.
func (s *Server) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	ch, stop := s.Clock.NewTimer(d)
	defer stop()
	s.addWaiting(1)
	defer s.addWaiting(-1)
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *Server) addWaiting(d int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiting += d
	close(s.waitCh)
	s.waitCh = make(chan struct{})
}

// credential returns the credential, creating it. Called with s.mu held.
func (s *Server) credential(id string) *credential {
	c, ok := s.creds[id]
	if !ok {
		c = &credential{id: id, keys: make(map[string]*keyEntry)}
		s.creds[id] = c
	}
	return c
}

// newID returns prefix followed by 20 random hex digits.
func newID(prefix string) string {
	var b [10]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Errorf("pagpolartest: crypto/rand: %w", err)) // never fails on supported platforms
	}
	return prefix + hex.EncodeToString(b[:])
}
