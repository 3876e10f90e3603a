package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/pagpolartest"
	"github.com/pagpolar/pagpolar-go/webhook"
)

const (
	token    = "whk_test_token"
	newToken = "whk_rotated_token"
	waitFor  = 30 * time.Second // only to fail instead of hanging; never a speed claim
)

// testClock is a webhook.Clock a test can move.
type testClock interface {
	webhook.Clock
	Advance(d time.Duration)
}

// harness is an Inbox on a store, a test clock, and a feed of outcomes.
type harness struct {
	t        *testing.T
	clock    testClock
	store    webhook.Store
	in       *webhook.Inbox
	outcomes chan webhook.Record
	pending  []webhook.Record // outcomes read but not yet returned by waitOutcome
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// testKey seals the harness's stored payloads.
var testKey = webhook.PayloadKey{ID: "test-1", Secret: bytes.Repeat([]byte{0x5a}, 32)}

// newHarness builds an Inbox with fixed backoff (30 s), 3 attempts, a fast
// poll, payloads sealed with testKey, and handlers from cfg; it does not
// start it. A nil store is a MemoryStore on the harness's clock, so that
// moving the clock moves leases and backoffs too.
func newHarness(t *testing.T, store webhook.Store, clock testClock, edit func(*webhook.Config)) *harness {
	t.Helper()
	if clock == nil {
		clock = pagpolartest.NewClock()
	}
	if store == nil {
		store = webhook.NewMemoryStoreWithClock(clock)
	}
	h := &harness{t: t, clock: clock, store: store, outcomes: make(chan webhook.Record, 1024)}
	cfg := webhook.Config{
		Store:        store,
		Tokens:       []string{token},
		PayloadKeys:  []webhook.PayloadKey{testKey},
		Default:      func(context.Context, *webhook.Event) error { return nil },
		Backoff:      func(int) time.Duration { return 30 * time.Second },
		MaxAttempts:  3,
		PollInterval: 50 * time.Millisecond,
		Clock:        clock,
		Logger:       quietLogger(),
		OnOutcome:    func(r webhook.Record) { h.outcomes <- r },
	}
	if edit != nil {
		edit(&cfg)
	}
	in, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.in = in
	return h
}

func (h *harness) start() *harness {
	h.t.Helper()
	if err := h.in.Start(); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { h.shutdown() })
	return h
}

func (h *harness) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := h.in.Shutdown(ctx); err != nil {
		h.t.Errorf("Shutdown: %v", err)
	}
}

// post delivers body with the right token.
func (h *harness) post(body []byte, hdr ...string) *httptest.ResponseRecorder {
	h.t.Helper()
	return deliver(h.in, body, append([]string{"Authorization", "Bearer " + token}, hdr...)...)
}

func deliver(hd http.Handler, body []byte, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/webhooks/pagpolar", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	hd.ServeHTTP(w, r)
	return w
}

// waitOutcome waits for the next outcome of key in state that no earlier
// call returned (outcomes of other keys read meanwhile are kept for later
// calls).
func (h *harness) waitOutcome(key string, state webhook.State) webhook.Record {
	h.t.Helper()
	timeout := time.After(waitFor)
	for {
		for i, r := range h.pending {
			if r.Key == key && r.State == state {
				h.pending = append(h.pending[:i], h.pending[i+1:]...)
				return r
			}
		}
		select {
		case r := <-h.outcomes:
			h.pending = append(h.pending, r)
		case <-timeout:
			cur, err := h.store.Get(context.Background(), key)
			h.t.Fatalf("%s never reached %s (now %s, attempts %d, error %q; %v)", key, state, cur.State, cur.Attempts, cur.LastError, err)
		}
	}
}

func (h *harness) get(key string) webhook.Record {
	h.t.Helper()
	r, err := h.store.Get(context.Background(), key)
	if err != nil {
		h.t.Fatalf("Get(%s): %v", key, err)
	}
	return r
}

func (h *harness) count() int {
	h.t.Helper()
	rs, err := h.store.List(context.Background(), webhook.Filter{Limit: 10000})
	if err != nil {
		h.t.Fatal(err)
	}
	return len(rs)
}

var envSeq atomic.Int64

// txEnv is a transaction event as PagPolar sends it: a fresh id each time.
func txEnv(event, saleID, status string) []byte {
	env := webhook.Envelope{
		ID:           fmt.Sprintf("evt_%d", envSeq.Add(1)),
		CreationDate: time.Now().UTC().Format(time.RFC3339),
		Event:        event,
		Data: webhook.Data{Transaction: &webhook.Transaction{ID: saleID, Sale: webhook.Sale{
			Identifier: saleID, Status: status, PaymentMethod: "pix", Amount: 9990,
		}}},
	}
	b, err := json.Marshal(env)
	if err != nil {
		panic(err)
	}
	return b
}

func subEnv(event, subID, status, next string) []byte {
	env := webhook.Envelope{
		ID:    fmt.Sprintf("evt_%d", envSeq.Add(1)),
		Event: event,
		Data:  webhook.Data{Subscription: &webhook.Subscription{ID: subID, Status: status, NextBillingAt: next}},
	}
	b, err := json.Marshal(env)
	if err != nil {
		panic(err)
	}
	return b
}

// effects counts successful handler runs per key: what the application did.
type effects struct {
	mu sync.Mutex
	n  map[string]int
}

func (e *effects) add(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n == nil {
		e.n = make(map[string]int)
	}
	e.n[key]++
}

func (e *effects) get(key string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n[key]
}

func (e *effects) total() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	t := 0
	for _, n := range e.n {
		t += n
	}
	return t
}

// flakyStore refuses writes while refuse is set, as a full disk or a
// database failover would.
type flakyStore struct {
	webhook.Store
	refuse atomic.Bool
}

var errRefused = errors.New("store refuses writes")

func (f *flakyStore) Insert(ctx context.Context, rec webhook.Record) (webhook.Record, bool, error) {
	if f.refuse.Load() {
		return webhook.Record{}, false, fmt.Errorf("%w: %w", webhook.ErrUnavailable, errRefused)
	}
	return f.Store.Insert(ctx, rec)
}

func newRequest(method string, body []byte) *http.Request {
	return httptest.NewRequest(method, "/webhooks/pagpolar", bytes.NewReader(body))
}

func serve(hd http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	hd.ServeHTTP(w, r)
	return w
}

// watchedClock reports each wait of one duration once it is registered, so
// a test advances the clock only when the waiter can see it.
type watchedClock struct {
	*pagpolartest.Clock
	watch time.Duration
	waits chan struct{}
}

func newWatchedClock(watch time.Duration) *watchedClock {
	return &watchedClock{Clock: pagpolartest.NewClock(), watch: watch, waits: make(chan struct{}, 64)}
}

func (w *watchedClock) After(d time.Duration) <-chan time.Time {
	ch := w.Clock.After(d)
	if d == w.watch {
		w.waits <- struct{}{}
	}
	return ch
}

func (w *watchedClock) waiting(t *testing.T) {
	t.Helper()
	select {
	case <-w.waits:
	case <-time.After(waitFor):
		t.Fatalf("nothing waits %v on the clock", w.watch)
	}
}
