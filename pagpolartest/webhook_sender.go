package pagpolartest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand"
	"net/http"
	"sync"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// Delivery defaults. The 10 s answer limit and the ~30 s resend are
// documented; how many times PagPolar tries an event is not (ASSUMED).
const (
	DefaultWebhookAnswerTimeout = 10 * time.Second
	DefaultWebhookRetryDelay    = 30 * time.Second
	DefaultWebhookAttempts      = 5
	DefaultWebhookConcurrency   = 8
)

// WebhookSender posts webhook envelopes to a receiver as PagPolar does:
//   - every attempt carries a new envelope id and creation_date;
//   - events are delivered concurrently, so they arrive out of order;
//   - an attempt that fails (no answer, a non-2xx status, or an answer slower
//     than 10 s) is sent again about 30 s later, on the sender's Clock;
//   - optionally, TRANSACTION_PAID is generated twice (WithDuplicatePaid);
//   - Playground test events carry "test": true and X-PagPolar-Test: true;
//   - ResendAll sends every event again, like the dashboard's bulk resend.
//
// It takes envelopes directly (Send, SendAll, SendTest) or follows a
// Server's business events (NewWebhookSenderFor). Every goroutine it starts
// ends on Close. It is safe for concurrent use.
type WebhookSender struct {
	url    string
	token  string
	cfg    senderConfig
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	sem    chan struct{} // bounds requests in flight

	mu         sync.Mutex
	rng        *mathrand.Rand
	closed     bool
	sent       []wire.WebhookEnvelope // every event given to Send/SendAll, for ResendAll
	deliveries []Delivery
	events     int               // events started (Delivery.Ref)
	queued     int               // attempts waiting for a slot in sem
	inFlight   int               // requests sent and not answered
	waiting    map[int]time.Time // Ref → when its resend is due
	changed    chan struct{}     // closed and replaced on every change
}

// Delivery is one attempt.
type Delivery struct {
	Ref        int    // the event: attempts of one event share it (1, 2, ...)
	Attempt    int    // 1 for the first attempt of the event
	Event      string // envelope event
	EnvelopeID string // new on every attempt
	Test       bool
	Status     int       // HTTP status; 0 when there was no answer
	Err        error     // no answer: transport error, lost, or too slow
	Slow       bool      // no answer within the answer timeout
	At         time.Time // on the sender's Clock, when sent
}

// OK reports whether the receiver accepted the attempt (2xx in time).
func (d Delivery) OK() bool { return d.Err == nil && d.Status >= 200 && d.Status < 300 }

type senderConfig struct {
	clock         *Clock
	client        *http.Client
	answerTimeout time.Duration
	retryDelay    time.Duration
	attempts      int
	concurrency   int
	duplicatePaid bool
	seed          int64
	lose          func(env wire.WebhookEnvelope, attempt int) bool
}

// SenderOption configures a WebhookSender.
type SenderOption func(*senderConfig)

// WithSenderClock makes the sender time answers and resends on c (default: a
// new Clock; NewWebhookSenderFor uses the server's).
func WithSenderClock(c *Clock) SenderOption { return func(s *senderConfig) { s.clock = c } }

// WithSenderHTTPClient sets the client that posts (default: a new
// http.Client without timeout; the sender times answers on its Clock).
func WithSenderHTTPClient(c *http.Client) SenderOption {
	return func(s *senderConfig) { s.client = c }
}

// WithAnswerTimeout sets how long an answer may take before the attempt
// counts as failed (default 10 s, as documented).
func WithAnswerTimeout(d time.Duration) SenderOption {
	return func(s *senderConfig) { s.answerTimeout = d }
}

// WithRetryDelay sets the wait before a failed attempt is sent again
// (default 30 s, as documented).
func WithRetryDelay(d time.Duration) SenderOption { return func(s *senderConfig) { s.retryDelay = d } }

// WithAttempts sets how many attempts an event gets (default 5, ASSUMED).
func WithAttempts(n int) SenderOption { return func(s *senderConfig) { s.attempts = n } }

// WithConcurrency bounds the requests in flight at once (default 8).
func WithConcurrency(n int) SenderOption { return func(s *senderConfig) { s.concurrency = n } }

// WithDuplicatePaid delivers every TRANSACTION_PAID as two independent
// events, as when the gateway announces a payment by two paths.
func WithDuplicatePaid() SenderOption { return func(s *senderConfig) { s.duplicatePaid = true } }

// WithSenderSeed seeds the order SendAll and ResendAll deliver in (default 1).
func WithSenderSeed(seed int64) SenderOption { return func(s *senderConfig) { s.seed = seed } }

// WithLoss makes the attempts for which lose returns true fail before
// reaching the receiver (a lost connection): they are sent again after the
// retry delay. lose must not block.
func WithLoss(lose func(env wire.WebhookEnvelope, attempt int) bool) SenderOption {
	return func(s *senderConfig) { s.lose = lose }
}

// errLost is the error of an attempt dropped by WithLoss.
var errLost = errors.New("pagpolartest: webhook attempt lost on the way")

// NewWebhookSender returns a sender posting to url with "Authorization:
// Bearer token". Close it when done.
func NewWebhookSender(url, token string, opts ...SenderOption) *WebhookSender {
	cfg := senderConfig{
		answerTimeout: DefaultWebhookAnswerTimeout,
		retryDelay:    DefaultWebhookRetryDelay,
		attempts:      DefaultWebhookAttempts,
		concurrency:   DefaultWebhookConcurrency,
		seed:          1,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.clock == nil {
		cfg.clock = NewClock()
	}
	if cfg.client == nil {
		cfg.client = &http.Client{}
	}
	cfg.attempts = max(cfg.attempts, 1)
	cfg.concurrency = max(cfg.concurrency, 1)
	ctx, cancel := context.WithCancel(context.Background())
	return &WebhookSender{
		url: url, token: token, cfg: cfg, ctx: ctx, cancel: cancel,
		sem:     make(chan struct{}, cfg.concurrency),
		rng:     mathrand.New(mathrand.NewSource(cfg.seed)),
		waiting: make(map[int]time.Time),
		changed: make(chan struct{}),
	}
}

// NewWebhookSenderFor returns a sender on srv's Clock that delivers each of
// srv's business events (OnEvent) as PagPolar would, as it happens.
func NewWebhookSenderFor(srv *Server, url, token string, opts ...SenderOption) *WebhookSender {
	s := NewWebhookSender(url, token, append([]SenderOption{WithSenderClock(srv.Clock)}, opts...)...)
	srv.OnEvent(func(ev Event) { s.Send(EnvelopeFor(ev)) })
	return s
}

// EnvelopeFor is the envelope PagPolar sends for a business event of the
// fake (without id and creation_date, which each attempt sets).
func EnvelopeFor(ev Event) wire.WebhookEnvelope {
	env := wire.WebhookEnvelope{Event: ev.Name}
	if ev.Transaction != nil {
		env.Data.Transaction = &wire.WebhookTransaction{ID: ev.Transaction.Identifier, Sale: *ev.Transaction}
	}
	if ev.Subscription != nil {
		sub := *ev.Subscription
		env.Data.Subscription = &sub
	}
	return env
}

// Send delivers env as one event (two for TRANSACTION_PAID with
// WithDuplicatePaid), in the background. After Close it does nothing.
func (s *WebhookSender) Send(env wire.WebhookEnvelope) {
	s.send([]wire.WebhookEnvelope{env}, true, false)
}

// SendAll delivers envs concurrently, started in a shuffled order.
func (s *WebhookSender) SendAll(envs []wire.WebhookEnvelope) {
	s.send(envs, true, true)
}

// SendTest delivers env as a Playground test event: "test": true and the
// X-PagPolar-Test header. Test events are not resent by ResendAll.
func (s *WebhookSender) SendTest(env wire.WebhookEnvelope) {
	env.Test = true
	s.send([]wire.WebhookEnvelope{env}, false, false)
}

// ResendAll delivers every event given to Send and SendAll again, each as
// a new event with new attempts, in a shuffled order: the dashboard's "resend
// everything".
func (s *WebhookSender) ResendAll() {
	s.mu.Lock()
	envs := append([]wire.WebhookEnvelope(nil), s.sent...)
	s.mu.Unlock()
	s.send(envs, false, true)
}

func (s *WebhookSender) send(envs []wire.WebhookEnvelope, remember, shuffle bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if remember {
		s.sent = append(s.sent, envs...)
	}
	var jobs []wire.WebhookEnvelope
	for _, env := range envs {
		jobs = append(jobs, env)
		if s.cfg.duplicatePaid && remember && env.Event == wire.EventTransactionPaid {
			jobs = append(jobs, env)
		}
	}
	if shuffle {
		s.rng.Shuffle(len(jobs), func(i, j int) { jobs[i], jobs[j] = jobs[j], jobs[i] })
	}
	for _, env := range jobs {
		s.events++
		s.queued++
		s.wg.Add(1)
		go s.deliver(s.events, env)
	}
	s.notify()
}

// notify wakes Flush and WaitInFlight; called with s.mu held.
func (s *WebhookSender) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// deliver runs the attempts of one event. It starts counted in s.queued.
func (s *WebhookSender) deliver(ref int, env wire.WebhookEnvelope) {
	defer s.wg.Done()
	for attempt := 1; ; attempt++ {
		select {
		case s.sem <- struct{}{}:
		case <-s.ctx.Done():
			s.update(func() { s.queued-- })
			return
		}
		d := s.attempt(ref, attempt, env)
		<-s.sem
		if d.OK() || attempt >= s.cfg.attempts || s.ctx.Err() != nil {
			s.update(func() { s.inFlight-- })
			return
		}
		// Registered before it is counted, and counted in the same step
		// that ends the attempt, so that Flush never sees the event idle in
		// between and an Advance made after Flush returned reaches it.
		due := s.cfg.clock.Now().Add(s.cfg.retryDelay)
		ch, stop := s.cfg.clock.NewTimer(s.cfg.retryDelay)
		s.update(func() { s.inFlight--; s.waiting[ref] = due })
		select {
		case <-ch:
			s.update(func() { delete(s.waiting, ref); s.queued++ })
		case <-s.ctx.Done():
			stop()
			s.update(func() { delete(s.waiting, ref) })
			return
		}
	}
}

func (s *WebhookSender) update(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
	s.notify()
}

// attempt posts env once with a fresh id and creation date and records the
// outcome. It moves the event from queued to in flight.
func (s *WebhookSender) attempt(ref, attempt int, env wire.WebhookEnvelope) Delivery {
	now := s.cfg.clock.Now()
	env.ID = newID("evt_")
	env.CreationDate = now.UTC().Format(time.RFC3339)
	d := Delivery{Ref: ref, Attempt: attempt, Event: env.Event, EnvelopeID: env.ID, Test: env.Test, At: now}

	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	timer, stopTimer := s.cfg.clock.NewTimer(s.cfg.answerTimeout)
	defer stopTimer()
	slow := false // written before watchDone closes, read after
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		select {
		case <-timer:
			slow = true
			cancel()
		case <-ctx.Done():
		}
	}()
	s.update(func() { s.queued--; s.inFlight++ })

	if s.cfg.lose != nil && s.cfg.lose(env, attempt) {
		d.Err = errLost
	} else {
		d.Status, d.Err = s.post(ctx, env)
	}
	cancel()
	<-watchDone
	if slow {
		d.Slow, d.Status = true, 0
		d.Err = fmt.Errorf("pagpolartest: no answer within %v: %w", s.cfg.answerTimeout, context.DeadlineExceeded)
	}
	// Still in flight: deliver moves it on.
	s.update(func() { s.deliveries = append(s.deliveries, d) })
	return d
}

func (s *WebhookSender) post(ctx context.Context, env wire.WebhookEnvelope) (int, error) {
	body, err := json.Marshal(env)
	if err != nil {
		return 0, fmt.Errorf("pagpolartest: encoding the envelope: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(wire.HeaderAuthorization, "Bearer "+s.token)
	if env.Test {
		req.Header.Set(wire.HeaderTestEvent, "true")
	}
	resp, err := s.cfg.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	// Read the answer as a client that waits for it does.
	if _, err := io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)); err != nil {
		return 0, err
	}
	return resp.StatusCode, nil
}

// Deliveries returns every attempt so far, in the order they ended.
func (s *WebhookSender) Deliveries() []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Delivery(nil), s.deliveries...)
}

// Waiting reports how many events wait for a resend.
func (s *WebhookSender) Waiting() int { return s.Stats().Waiting }

// Flush waits until no attempt is queued or in flight and no resend is due
// on the Clock: every event has been accepted, given up on, or waits for a
// resend that is not due yet. A test calls it before Clock.Advance (every
// pending resend is then registered on the Clock) and after it (the resends
// the Advance made due have ended).
func (s *WebhookSender) Flush(ctx context.Context) error {
	for {
		s.mu.Lock()
		busy := s.queued + s.inFlight
		now := s.cfg.clock.Now()
		for _, due := range s.waiting {
			if !now.Before(due) {
				busy++
			}
		}
		ch := s.changed
		s.mu.Unlock()
		if busy == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("pagpolartest: webhook sender: %d attempts still busy: %w", busy, ctx.Err())
		}
	}
}

// SenderStats is a snapshot of a WebhookSender.
type SenderStats struct {
	Queued   int // attempts waiting for a free slot (WithConcurrency)
	InFlight int // requests sent, answer not read yet
	Waiting  int // events waiting for a resend
	Attempts int // attempts ended so far
}

// Stats returns a snapshot of the sender.
func (s *WebhookSender) Stats() SenderStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statsLocked()
}

func (s *WebhookSender) statsLocked() SenderStats {
	return SenderStats{Queued: s.queued, InFlight: s.inFlight, Waiting: len(s.waiting), Attempts: len(s.deliveries)}
}

// WaitUntil waits until cond holds for the sender's stats or ctx ends. A
// request counts as in flight once its answer timer is registered on the
// Clock, and an event as waiting once its resend timer is: an Advance made
// after WaitUntil returned reaches them.
func (s *WebhookSender) WaitUntil(ctx context.Context, cond func(SenderStats) bool) error {
	for {
		s.mu.Lock()
		st, ch := s.statsLocked(), s.changed
		s.mu.Unlock()
		if cond(st) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("pagpolartest: webhook sender at %+v: %w", st, ctx.Err())
		}
	}
}

// WaitInFlight waits until at least n requests are in flight.
func (s *WebhookSender) WaitInFlight(ctx context.Context, n int) error {
	return s.WaitUntil(ctx, func(st SenderStats) bool { return st.InFlight >= n })
}

// Close stops every delivery (requests in flight are cancelled, resends
// dropped) and waits for the sender's goroutines to end.
func (s *WebhookSender) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}
