package pagpolartest

import "time"

// Option configures a Server built by NewServer or NewUnstartedServer.
type Option func(*config)

type config struct {
	clock               *Clock
	processingWindow    time.Duration
	replayWindow        time.Duration
	rateLimit           int
	seed                int64
	deterministicFaults bool
	noSubLookup         bool
	latency             time.Duration
	shapes              []Shape
	async               Async
}

func newConfig(opts []Option) config {
	c := config{
		processingWindow: 60 * time.Second, // documented: the mark lasts up to 60 s
		replayWindow:     24 * time.Hour,   // documented: replay for 24 h
		seed:             1,
	}
	for _, o := range opts {
		o(&c)
	}
	if c.clock == nil {
		c.clock = NewClock()
	}
	return c
}

// WithClock makes the server read and wait on c (default NewClock()). Give
// the same Clock to the client and its key store so that one Advance moves
// every party across the 60 s mark or the 24 h window.
func WithClock(c *Clock) Option { return func(cfg *config) { cfg.clock = c } }

// WithProcessingWindow sets how long a key stays "in processing" (answering
// 409) after its processing started; default 60 s as documented. Once it has
// passed, a request with the same key is processed again even if the first
// one is still running: the documented exposure.
func WithProcessingWindow(d time.Duration) Option {
	return func(cfg *config) { cfg.processingWindow = d }
}

// WithReplayWindow sets how long a finished 2xx answer is replayed for a
// repeated key; default 24 h as documented. Afterwards the key is new.
func WithReplayWindow(d time.Duration) Option {
	return func(cfg *config) { cfg.replayWindow = d }
}

// WithRateLimit limits each credential to perMinute requests on the money
// routes per clock minute; over it the answer is 429 with Retry-After and the
// key is not registered. 0 (the default) means unlimited.
func WithRateLimit(perMinute int) Option {
	return func(cfg *config) { cfg.rateLimit = perMinute }
}

// WithSeed seeds the coin of every fault injected with a Probability, so a
// run with the same seed and the same request order applies the same faults
// (with WithDeterministicFaults: the same requests, in any order). Default 1.
func WithSeed(seed int64) Option { return func(cfg *config) { cfg.seed = seed } }

// WithDeterministicFaults decides each probabilistic fault (Fault.Probability)
// by a hash of the seed (WithSeed), the fault's position among the injected
// faults, the request's subject, and how many requests about that subject
// have reached the fault before it — not by a random sequence drawn in the
// order requests arrive. The subject is the route and the external reference
// of the order the request concerns: a charge's or a subscription's
// external_reference; for a refund, a plan change or a read by ID, the
// external reference of that sale or subscription; the Idempotency-Key when
// there is none. So the 2nd attempt of the PIX charge of "order-17" meets the
// same faults in every run with the same seed and faults, however the
// requests of other orders interleave with it and however long they take.
//
// What stays order-dependent: Fault.Times (spent by the requests that come
// first), and anything a client decides from timing (how many times it
// polls a lookup: use Fault.OnlyFirst on read faults to count only the first
// reads). Requests of different credentials about one external reference
// share a subject.
func WithDeterministicFaults() Option { return func(cfg *config) { cfg.deterministicFaults = true } }

// WithoutSubscriptionLookup makes the ASSUMED lookup
// GET /subscriptions?external_reference= answer 404, as it would if the real
// API has no such route: a client must then end an ambiguous subscribe in
// "outcome unknown" instead of resending.
func WithoutSubscriptionLookup() Option { return func(cfg *config) { cfg.noSubLookup = true } }

// WithLatency delays every request by d on the server's Clock before it is
// handled (default 0). A client that gives up during the delay has sent a
// request that was never processed.
func WithLatency(d time.Duration) Option { return func(cfg *config) { cfg.latency = d } }
