package pagpolar

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// RetryPolicy says how long and how often the client waits, polls and
// resends. What may be resent at all is not configurable: it follows
// SAFETY.md (a write is never retried blindly). The zero value of a field
// means the DefaultRetryPolicy value.
type RetryPolicy struct {
	// MaxAttempts bounds the requests one call sends for answers that prove
	// nothing was processed (429, the API's own 503, a failed dial). Default 6.
	MaxAttempts int

	// NewBackOff returns a fresh interval sequence for one call. The default,
	// DefaultBackOff, is exponential with jitter and a cap; Exponential builds
	// one with other bounds.
	NewBackOff func() BackOff

	// MaxRetryAfter clamps the server's Retry-After hint, and the backoff's
	// pauses too: no wait between attempts is longer. Default 30 s.
	MaxRetryAfter time.Duration

	// AttemptTimeout bounds one HTTP attempt. A timeout after the request was
	// written is ambiguous (settled by lookup). Default 30 s.
	AttemptTimeout time.Duration

	// ProcessingWindow is the server's in-processing mark (documented: up to
	// 60 s). A "not found" lookup is trusted only once this much time (plus
	// WindowMargin) has passed since the last send whose answer we did not
	// get. Shorten it only against a fake server configured the same way.
	ProcessingWindow time.Duration

	// WindowMargin is added to ProcessingWindow for clock drift and queueing.
	// Default 5 s.
	WindowMargin time.Duration

	// SettleDelay: after the original request is known to have ended, a
	// "not found" is trusted only if it is still not found this long after
	// the end (lookups can lag behind writes). Default 2 s.
	SettleDelay time.Duration

	// LookupInterval is the pause between settle lookups. Default 1 s.
	LookupInterval time.Duration

	// MaxSettleWait bounds how long one call polls lookups before giving up
	// with ErrOutcomeUnknown (the record stays unknown; a later call or
	// Resume settles it). Default ProcessingWindow + WindowMargin + SettleDelay
	// + 10 s, so a call normally outlasts the window.
	MaxSettleWait time.Duration

	// LeaseTTL is how long a worker's claim on an operation lasts without
	// renewal. The worker renews it before every wait that could outlast
	// it, so it must exceed the longest stretch between two renewals: a wait
	// (MaxRetryAfter or LookupInterval, whichever is longer) plus a token
	// fetch and an attempt (AttemptTimeout each); WithRetryPolicy refuses a
	// shorter one. Default 2×AttemptTimeout + MaxRetryAfter + 30 s (120 s).
	// It is also how long a restarted process waits before it can settle
	// what a crashed one held.
	LeaseTTL time.Duration

	// LeaseWaitInterval is how often a worker that finds the operation
	// leased by another checks again. Default 50 ms.
	LeaseWaitInterval time.Duration

	// ServerClockTolerance is how far apart the API's own clocks may be:
	// the one that writes its answers' Date header and the one that stamps
	// an effect's creation time. An effect is excluded as "created before
	// this operation's first send" only when it was created more than this
	// before the first send as measured from Date headers (SAFETY rule 12).
	// The client's clock plays no part: it may be minutes off. A larger
	// value excludes less (more outcomes end unknown), never more. Default
	// 2 s.
	ServerClockTolerance time.Duration

	// ResumeConcurrency is how many operations ResumeAll settles at once
	// (each under its own lease). Default 32.
	ResumeConcurrency int

	// DeadlineGrace is how long a call may outlast its context (deadline
	// or cancellation) to write down what it learned: the answer the API
	// gave, the claim on an effect, the lease given back. The whole call
	// returns by the context's end plus DeadlineGrace, whatever the store
	// does (that work ends at nine tenths of it, the rest is for returning);
	// an outcome not written by then is left for the next call to settle by
	// lookup. Default 1 s (DefaultDeadlineGrace).
	DeadlineGrace time.Duration
}

// DefaultRetryPolicy is used for every zero field of a client's policy.
var DefaultRetryPolicy = RetryPolicy{
	MaxAttempts:          6,
	NewBackOff:           DefaultBackOff,
	MaxRetryAfter:        30 * time.Second,
	AttemptTimeout:       30 * time.Second,
	ProcessingWindow:     60 * time.Second,
	WindowMargin:         5 * time.Second,
	SettleDelay:          2 * time.Second,
	LookupInterval:       time.Second,
	LeaseWaitInterval:    50 * time.Millisecond,
	ServerClockTolerance: 2 * time.Second,
	ResumeConcurrency:    32,
}

// BackOff is a sequence of pauses between attempts of one call: the SDK's
// own interface, so that no backoff library's type is part of its API. Any
// value with these two methods fits, among them the exponential backoffs of
// github.com/cenkalti/backoff (v4 and v5).
//
// NextBackOff returns the pause before the next attempt; a negative value
// means "no more pauses" and the SDK then waits MaxRetryAfter (the policy,
// not the sequence, bounds how many attempts are made). Reset starts the
// sequence over. A BackOff is used by one call at a time.
type BackOff interface {
	NextBackOff() time.Duration
	Reset()
}

// DefaultBackOff is exponential from 200 ms, ×2, ±50 % jitter, capped at
// 10 s between attempts, never stopping by itself (the policy bounds the
// attempts and the time).
func DefaultBackOff() BackOff { return Exponential(200*time.Millisecond, 10*time.Second)() }

// Exponential returns a RetryPolicy.NewBackOff: pauses from initial, ×2,
// ±50 % jitter, capped at max. It panics if initial is not positive or max
// is below initial (a programming error in the policy).
func Exponential(initial, max time.Duration) func() BackOff {
	if initial <= 0 || max < initial {
		panic("pagpolar: Exponential: want 0 < initial <= max")
	}
	return func() BackOff {
		b := backoff.NewExponentialBackOff()
		b.InitialInterval = initial
		b.Multiplier = 2
		b.RandomizationFactor = 0.5
		b.MaxInterval = max
		b.Reset()
		return b
	}
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	d := DefaultRetryPolicy
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = d.MaxAttempts
	}
	if p.NewBackOff == nil {
		p.NewBackOff = d.NewBackOff
	}
	if p.MaxRetryAfter <= 0 {
		p.MaxRetryAfter = d.MaxRetryAfter
	}
	if p.AttemptTimeout <= 0 {
		p.AttemptTimeout = d.AttemptTimeout
	}
	if p.ProcessingWindow <= 0 {
		p.ProcessingWindow = d.ProcessingWindow
	}
	if p.WindowMargin <= 0 {
		p.WindowMargin = d.WindowMargin
	}
	if p.SettleDelay <= 0 {
		p.SettleDelay = d.SettleDelay
	}
	if p.LookupInterval <= 0 {
		p.LookupInterval = d.LookupInterval
	}
	if p.MaxSettleWait <= 0 {
		p.MaxSettleWait = p.ProcessingWindow + p.WindowMargin + p.SettleDelay + 10*time.Second
	}
	if p.LeaseTTL <= 0 {
		// Longer than one attempt plus the longest wait before the next
		// lease check, with room to spare (rule 9).
		p.LeaseTTL = 2*p.AttemptTimeout + p.MaxRetryAfter + 30*time.Second
	}
	if p.LeaseWaitInterval <= 0 {
		p.LeaseWaitInterval = d.LeaseWaitInterval
	}
	if p.ServerClockTolerance <= 0 {
		p.ServerClockTolerance = d.ServerClockTolerance
	}
	if p.ResumeConcurrency <= 0 {
		p.ResumeConcurrency = d.ResumeConcurrency
	}
	if p.DeadlineGrace <= 0 {
		p.DeadlineGrace = DefaultDeadlineGrace
	}
	return p
}

// validate checks that the lease outlasts every stretch between renewals.
func (p RetryPolicy) validate() error {
	longest := max(p.MaxRetryAfter, p.LookupInterval)
	if need := longest + 2*p.AttemptTimeout; p.LeaseTTL <= need {
		return &ValidationError{Field: "RetryPolicy.LeaseTTL", Reason: fmt.Sprintf("%s must exceed %s (the longest wait, %s, plus a token fetch and an attempt of AttemptTimeout %s each), or a worker could lose its own lease between renewals",
			p.LeaseTTL, need, longest, p.AttemptTimeout)}
	}
	if p.ProcessingWindow < 0 || p.MaxAttempts < 1 {
		return &ValidationError{Field: "RetryPolicy", Reason: "negative window or no attempts"}
	}
	return nil
}

// trustDelay is how long after a send whose answer we do not have a "not
// found" stays inconclusive: the API's in-processing window, a margin, and
// the lookup's lag.
func (p RetryPolicy) trustDelay() time.Duration {
	return p.ProcessingWindow + p.WindowMargin + p.SettleDelay
}

// nextWait returns the pause before the next attempt: the backoff interval,
// or the server's Retry-After hint clamped to MaxRetryAfter if longer.
func (p RetryPolicy) nextWait(b BackOff, retryAfter time.Duration) time.Duration {
	w := b.NextBackOff()
	if w < 0 || w > p.MaxRetryAfter { // backoff.Stop, a sequence that ended, or one past the bound
		w = p.MaxRetryAfter
	}
	if retryAfter > p.MaxRetryAfter {
		retryAfter = p.MaxRetryAfter
	}
	if retryAfter > w {
		w = retryAfter
	}
	return w
}

// RetryBudget limits retries client-wide, so that an API that is failing
// is not hit by every caller's retries at once (in the spirit of gRPC retry
// throttling and the AWS SDK retry quota). Every retry — a resend, or a
// repeated read — spends one token; every definite answer from the API to a
// money request earns Ratio tokens, up to MaxTokens (reads answered while
// money requests are shed must not keep the retries going). First attempts are never blocked. In the
// long run retries stay below Ratio × answered requests, plus a burst of
// MaxTokens: during a full outage (no answers) at most MaxTokens retries are
// sent in all, then none until the API answers again. Safe for concurrent
// use.
type RetryBudget struct {
	mu     sync.Mutex
	tokens float64
	max    float64
	ratio  float64
}

// Defaults of NewRetryBudget: a burst of 100 retries, then one retry per
// two answered requests. 0.5 keeps retries flowing at the 10–30 % shedding
// an overloaded API does, and stops them when nearly nothing is answered.
const (
	DefaultBudgetTokens = 100
	DefaultBudgetRatio  = 0.5
)

// NewRetryBudget returns a full budget. maxTokens <= 0 means
// DefaultBudgetTokens; ratio <= 0 means DefaultBudgetRatio.
func NewRetryBudget(maxTokens, ratio float64) *RetryBudget {
	if maxTokens <= 0 {
		maxTokens = DefaultBudgetTokens
	}
	if ratio <= 0 {
		ratio = DefaultBudgetRatio
	}
	return &RetryBudget{tokens: maxTokens, max: maxTokens, ratio: ratio}
}

// onAnswer records a definite answer from the API.
func (b *RetryBudget) onAnswer() {
	b.mu.Lock()
	b.tokens = math.Min(b.max, b.tokens+b.ratio)
	b.mu.Unlock()
}

// takeRetry spends a token for one retry, or reports that none is left.
func (b *RetryBudget) takeRetry() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// Tokens returns the tokens left (for metrics and tests).
func (b *RetryBudget) Tokens() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tokens
}

// sleep waits d on the client's clock or until ctx ends.
func sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c.After(d):
		return nil
	}
}
