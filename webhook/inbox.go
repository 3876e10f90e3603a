package webhook

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/pagpolar/pagpolar-go"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"sync"
	"time"
)

// Settler settles client operations from an event's body:
// *pagpolar.Client implements it (SettleFromWebhook). An error matching
// pagpolar.ErrInProgress says an operation the event may settle is held by
// a worker: the inbox then offers the event again later, from memory
// (settle_later.go); other errors are logged and the event is done.
type Settler interface {
	SettleFromWebhook(ctx context.Context, body []byte) ([]pagpolar.ResumeResult, error)
}

// HandlerFunc processes one event. It runs after the delivery was answered,
// on a worker, never concurrently with another event of the same sale or
// subscription. nil marks the event processed; an error schedules another
// attempt after a backoff (or marks it dead after Config.MaxAttempts
// attempts, or at once if the error is Permanent). ctx ends when the Inbox is
// shut down without time to drain, when the lease on the event is lost, or
// after Config.HandlerTimeout.
//
// A handler can run more than once for one key in rare cases (the process
// dies after the handler returned but before its outcome was stored), so its
// effect should tolerate a repeat: compare statuses (Ranking) before applying
// them.
type HandlerFunc func(ctx context.Context, ev *Event) error

// Config configures an Inbox. Store, Tokens and a handler are required; every
// zero duration or count takes the default named beside it.
type Config struct {
	// Store keeps the events (required).
	Store Store
	// Tokens are the accepted webhook tokens (the "Bearer" value PagPolar
	// sends; not the API access token): one, or two while rotating.
	Tokens []string
	// Handlers maps an event name to its function.
	Handlers map[string]HandlerFunc
	// Default handles events with no entry in Handlers. When nil, such events
	// are marked processed with a note in LastError and never run.
	Default HandlerFunc
	// Settle, when set (normally to the SDK's *pagpolar.Client that shares
	// this deployment's key store), settles the client's unsettled
	// operations that an event carries the effect of — a charge or a
	// subscribe whose answer was lost — before the event's handler runs.
	// It never sends a money request, never touches an operation a worker
	// holds (that worker settles it by lookup), settles only successes,
	// ignores Playground test events, and never fails the event: its
	// errors are logged and the handler runs regardless. An event whose
	// operations were held is offered to Settle again from memory (never
	// to the handler), for about 10 minutes (settle_later.go), so that a
	// call that then ends "outcome unknown" is still settled by it.
	Settle Settler
	// Key builds dedupe keys (default DefaultKey; KeyEveryDelayed processes
	// every SUBSCRIPTION_DELAYED notice).
	Key KeyFunc
	// AcceptTestEvents stores and processes Playground test events ("test":
	// true or X-PagPolar-Test: true) under keys starting with "test:".
	// Otherwise they are answered 200 and dropped, as production must.
	AcceptTestEvents bool

	// PayloadKeys seal every stored body with AES-256-GCM (the first key
	// seals; every key opens, so keys rotate): a delivery can carry the
	// customer's name, e-mail and document, and sealed, the store keeps only
	// ciphertext. Handlers get the body opened. One of PayloadKeys and
	// PlaintextPayloads is required.
	PayloadKeys []PayloadKey
	// PlaintextPayloads opts out of sealing by name: bodies are stored as
	// received, readable by whoever reads the store, its backups and
	// `pagpolar ops inbox show -payload`.
	PlaintextPayloads bool

	// MaxBodyBytes bounds a delivery body (default 1 MiB); larger → 413.
	MaxBodyBytes int64
	// PersistTimeout bounds storing a delivery (default 5 s), so the answer
	// stays well inside PagPolar's 10 s.
	PersistTimeout time.Duration

	// Workers is how many events are processed at once (default 4).
	Workers int
	// MaxAttempts is how many runs fail before an event is dead (default 10).
	MaxAttempts int
	// Backoff is the wait after the n-th failed attempt (n >= 1). Default:
	// 10 s doubling per attempt up to 30 min, ±20% jitter.
	Backoff func(n int) time.Duration
	// LeaseTTL is how long a claimed event stays leased without renewal, by
	// the store's clock (default 1 min); the lease is renewed every
	// LeaseTTL/3 while the handler runs. After a crash, its events wait this
	// long to resume.
	LeaseTTL time.Duration
	// HandlerTimeout bounds one run of a handler (default 5 min; negative:
	// none).
	HandlerTimeout time.Duration
	// PollInterval is how often the store is scanned for due events: retries
	// after backoff, events left by a crash or stored by another process
	// (default 2 s).
	PollInterval time.Duration
	// Retention is how long processed and dead events are kept after their
	// last change (default DefaultRetention, 30 days; at least MinRetention);
	// the Inbox removes older ones every hour, in small batches (see Reap).
	// A duplicate arriving later is processed again, and a dead event can
	// no longer be retried. Negative: kept forever.
	Retention time.Duration
	// QueueLimit bounds the events queued in memory (default 10000); the rest
	// wait in the store.
	QueueLimit int

	// Clock times this process's waits and the retention cut-off (default
	// the system clock); leases and due times follow the store's clock.
	Clock Clock
	// Logger receives one line per rejected delivery and per failed attempt;
	// never a token (default slog.Default()).
	Logger *slog.Logger
	// Owner names this process in leases (default random).
	Owner string
	// OnOutcome, if set, is called after each recorded outcome, with the
	// stored record (for metrics and tests). It must not block.
	OnOutcome func(Record)
}

// Defaults.
const (
	DefaultMaxBodyBytes   = 1 << 20
	DefaultPersistTimeout = 5 * time.Second
	DefaultWorkers        = 4
	DefaultMaxAttempts    = 10
	DefaultLeaseTTL       = time.Minute
	DefaultHandlerTimeout = 5 * time.Minute
	DefaultPollInterval   = 2 * time.Second
	DefaultRetention      = 30 * 24 * time.Hour
	DefaultQueueLimit     = 10000

	storeTimeout  = 10 * time.Second
	scanBatch     = 100
	purgeInterval = time.Hour
	purgePause    = 10 * time.Millisecond
)

// DefaultBackoff waits 10 s after the first failure, doubling up to 30 min,
// with ±20% jitter so that events failing together do not retry together.
func DefaultBackoff(n int) time.Duration {
	if n < 1 {
		n = 1
	}
	d := 10 * time.Second * time.Duration(math.Pow(2, float64(min(n-1, 20))))
	d = min(d, 30*time.Minute)
	return time.Duration(float64(d) * (0.8 + 0.4*mrand.Float64()))
}

// Inbox receives PagPolar's webhooks (it is an http.Handler) and processes
// them (after Start). Create it with New.
type Inbox struct {
	cfg     Config
	tokens  [][sha256.Size]byte
	sealer  *sealer // nil: PlaintextPayloads
	log     *slog.Logger
	disp    *dispatcher
	stop    chan struct{} // closed by Shutdown: take no new work
	hctx    context.Context
	hcancel context.CancelFunc // ends handlers when Shutdown runs out of time
	wg      sync.WaitGroup
	later   *settleLater // events to offer Settle again (settle_later.go)

	mu       sync.Mutex
	started  bool
	stopping bool
}

// New checks cfg, fills in defaults and returns an Inbox that stores
// deliveries at once and processes them once Start is called.
func New(cfg Config) (*Inbox, error) {
	if cfg.Store == nil {
		return nil, errors.New("webhook: Config.Store: nil")
	}
	if len(cfg.Tokens) == 0 || len(cfg.Tokens) > 2 {
		return nil, fmt.Errorf("webhook: Config.Tokens: have %d, want 1 or 2 (2 while rotating)", len(cfg.Tokens))
	}
	in := &Inbox{later: newSettleLater()}
	for i, t := range cfg.Tokens {
		if t == "" {
			return nil, fmt.Errorf("webhook: Config.Tokens[%d]: empty", i)
		}
		in.tokens = append(in.tokens, sha256.Sum256([]byte(t)))
	}
	if len(cfg.Handlers) == 0 && cfg.Default == nil {
		return nil, errors.New("webhook: Config.Handlers and Config.Default: no handler")
	}
	for name, h := range cfg.Handlers {
		if h == nil {
			return nil, fmt.Errorf("webhook: Config.Handlers[%q]: nil", name)
		}
	}
	if cfg.Key == nil {
		cfg.Key = DefaultKey
	}
	switch {
	case len(cfg.PayloadKeys) > 0 && cfg.PlaintextPayloads:
		return nil, errors.New("webhook: Config.PayloadKeys and Config.PlaintextPayloads: both set; choose one")
	case len(cfg.PayloadKeys) > 0:
		s, err := newSealer(cfg.PayloadKeys)
		if err != nil {
			return nil, fmt.Errorf("webhook: Config.%w", err)
		}
		in.sealer = s
	case !cfg.PlaintextPayloads:
		return nil, errors.New("webhook: Config.PayloadKeys: none, and PlaintextPayloads not set: stored bodies can hold customer data; " +
			"give a key to seal them (see ParsePayloadKeys) or set PlaintextPayloads to store them as received")
	}
	if cfg.Retention > 0 && cfg.Retention < MinRetention {
		return nil, fmt.Errorf("webhook: Config.Retention %v: shorter than MinRetention %v", cfg.Retention, MinRetention)
	}
	for name, v := range map[string]int64{
		"MaxBodyBytes": cfg.MaxBodyBytes, "PersistTimeout": int64(cfg.PersistTimeout),
		"Workers": int64(cfg.Workers), "MaxAttempts": int64(cfg.MaxAttempts),
		"LeaseTTL": int64(cfg.LeaseTTL), "PollInterval": int64(cfg.PollInterval),
		"QueueLimit": int64(cfg.QueueLimit),
	} {
		if v < 0 {
			return nil, fmt.Errorf("webhook: Config.%s: negative", name)
		}
	}
	setDefault(&cfg.MaxBodyBytes, DefaultMaxBodyBytes)
	setDefault(&cfg.PersistTimeout, DefaultPersistTimeout)
	setDefault(&cfg.Workers, DefaultWorkers)
	setDefault(&cfg.MaxAttempts, DefaultMaxAttempts)
	setDefault(&cfg.LeaseTTL, DefaultLeaseTTL)
	setDefault(&cfg.HandlerTimeout, DefaultHandlerTimeout)
	setDefault(&cfg.PollInterval, DefaultPollInterval)
	setDefault(&cfg.Retention, DefaultRetention)
	setDefault(&cfg.QueueLimit, DefaultQueueLimit)
	if cfg.Backoff == nil {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.Clock == nil {
		cfg.Clock = systemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Owner == "" {
		cfg.Owner = "inbox-" + randomHex(8)
	}
	in.cfg = cfg
	in.log = cfg.Logger
	in.disp = newDispatcher(cfg.Workers, cfg.QueueLimit)
	in.stop = make(chan struct{})
	in.hctx, in.hcancel = context.WithCancel(context.Background())
	return in, nil
}

func setDefault[T int | int64 | time.Duration](p *T, def T) {
	if *p == 0 {
		*p = def
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("webhook: crypto/rand: " + err.Error()) // never fails on supported platforms
	}
	return hex.EncodeToString(b)
}

// Start starts the workers and the scanner. The first scan resumes the events
// a previous process left: received, due for a retry, or processing under an
// expired lease (events under a live lease resume once it expires).
func (in *Inbox) Start() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	switch {
	case in.stopping:
		return errors.New("webhook: Start: inbox was shut down")
	case in.started:
		return errors.New("webhook: Start: already started")
	}
	in.started = true
	for i := 0; i < in.cfg.Workers; i++ {
		in.wg.Add(1)
		go in.worker()
	}
	in.wg.Add(1)
	go in.scanner()
	if in.cfg.Settle != nil {
		in.wg.Add(1)
		go in.settler()
	}
	if in.cfg.Retention > 0 {
		in.wg.Add(1)
		go in.purger()
	}
	return nil
}

// Shutdown stops taking new work and waits for the running handlers to
// return; queued events stay in the store for the next start. If ctx ends
// first, it cancels the handlers' contexts and returns ctx's error without
// waiting further: an event whose handler then returns (or had not started)
// is handed back (received, due at once) for the next start without
// counting the attempt, so interrupted deploys never push an event towards
// dead; one whose handler does not return is resumed once its lease
// expires, and that attempt counts. Deliveries keep being stored after
// Shutdown.
func (in *Inbox) Shutdown(ctx context.Context) error {
	in.mu.Lock()
	if !in.stopping {
		in.stopping = true
		close(in.stop)
	}
	in.mu.Unlock()
	done := make(chan struct{})
	go func() {
		in.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		in.hcancel()
		return nil
	case <-ctx.Done():
		in.hcancel()
		return fmt.Errorf("webhook: Shutdown: %w", ctx.Err())
	}
}

// accepting reports whether new work may be queued.
func (in *Inbox) accepting() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.started && !in.stopping
}

// enqueue queues rec for processing if this process may run it now.
func (in *Inbox) enqueue(rec Record) {
	if in.accepting() {
		in.disp.push(rec.Key, rec.Entity)
	}
}

// Get returns the stored event under key (its Payload as stored: open it
// with Payload).
func (in *Inbox) Get(ctx context.Context, key string) (Record, error) {
	return in.cfg.Store.Get(ctx, key)
}

// List returns stored events, e.g. the dead ones for an operator.
func (in *Inbox) List(ctx context.Context, f Filter) ([]Record, error) {
	return in.cfg.Store.List(ctx, f)
}

// Retry makes a dead (or error) event due now, with its attempts reset, and
// queues it if the Inbox is running.
func (in *Inbox) Retry(ctx context.Context, key string) (Record, error) {
	rec, err := in.cfg.Store.Retry(ctx, key)
	if err != nil {
		return rec, err
	}
	in.enqueue(rec)
	return rec, nil
}

// Payload returns rec's body as received, opening it with the Inbox's
// PayloadKeys if it is sealed (see OpenPayload for the errors).
func (in *Inbox) Payload(rec Record) ([]byte, error) {
	return in.sealer.open(rec.Key, rec.Payload)
}

// Reap removes the processed and dead events last changed more than
// Config.Retention ago, in batches of DefaultReapBatch, and reports how many
// it removed. The Inbox already does this every hour once started; Reap is
// for a job that runs it at a time of its choosing. With a negative
// Retention it removes nothing.
func (in *Inbox) Reap(ctx context.Context) (int, error) {
	if in.cfg.Retention < 0 {
		return 0, nil
	}
	return Reap(ctx, in.cfg.Store, ReapOptions{Retention: in.cfg.Retention, Now: in.cfg.Clock.Now(), Pause: purgePause, Clock: in.cfg.Clock})
}
