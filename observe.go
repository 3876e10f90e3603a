package pagpolar

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// Observing the steps of the client's work: an Observer (WithObserver)
// is told when each operation, each HTTP attempt, each settle lookup and
// each key-store call begins and ends, and the step runs under the context the Observer
// returns. That is what a tracer needs: a span per step, children under
// the operation's span, and the trace context sent with each request
// (RequestHeaders). Hook events (WithHook) carry the decisions in between.

// StepKind names a step an Observer sees.
type StepKind string

// The steps.
const (
	StepOperation StepKind = "operation" // one call of a money method (Pix, Refunds.Create, ...), from its record to its outcome
	StepAttempt   StepKind = "attempt"   // one HTTP request (a send or a lookup's read), to its answer or transport error
	StepLookup    StepKind = "lookup"    // one settle lookup (it may read several pages: attempts under it)
	StepStore     StepKind = "store"     // one call of the key store (keystore.Store's Create, Get, Acquire, ...)
)

// Step describes a step as it begins. Fields not meaningful for a kind
// are zero.
type Step struct {
	Kind          StepKind
	OperationKind string // operation, lookup: "pix", "boleto", "credit_card", "refund", "subscribe", "change_plan"
	OperationID   string // operation, lookup
	Method        string // attempt: the HTTP method
	URL           *url.URL
	// Key is the Idempotency-Key of an attempt that sends one. It is the
	// operation's identity at the API: an observer that records it must
	// hash it.
	Key string
	// Header lets an observer add headers to an attempt's request (trace
	// context: traceparent, tracestate, baggage). Nil for other steps.
	Header *RequestHeaders
	// StoreCall is the keystore.Store method a store step calls, in
	// lower case: "create", "get", "acquire", "renew", "release",
	// "update", "list", "delete_expired".
	StoreCall string
}

// StepEnd is how a step ended.
type StepEnd struct {
	Status   int    // attempt: the HTTP status (0: no answer)
	Err      error  // the step's error (an operation's is what the caller gets; a store call's, e.g. keystore.ErrLeaseHeld)
	State    string // operation: the state its record was left in ("succeeded", "unknown", ...)
	Source   Source // operation: how the result was obtained, when it succeeded
	Attempts int    // operation: requests sent for it so far, across calls
	Key      string // operation: its Idempotency-Key (hash it before recording it)
	Found    bool   // lookup: an effect was found
	// Operation: the error's branch (OutcomeOf; "" when it succeeded) and
	// the effect's decision when it succeeded.
	Outcome  Outcome
	Decision Decision
}

// Observer sees each step begin and end. Start runs on the caller's
// goroutine before the step; the step runs under the context it returns,
// and end is called exactly once when the step ends. Both must be fast and
// must not call the client.
type Observer interface {
	Start(ctx context.Context, s Step) (context.Context, func(StepEnd))
}

// WithObserver installs an Observer (one per client; the later one wins).
// Client.Store still returns the store as passed to WithStore.
func WithObserver(o Observer) Option { return func(c *Client) error { c.observer = o; return nil } }

// RequestHeaders is what an Observer may write to an attempt's request:
// headers it adds itself, never the request's own (Authorization,
// Idempotency-Key, Content-Type, Accept, User-Agent, Cache-Control,
// Pragma), and it reads back only what it added. It satisfies the
// text-map carrier of OpenTelemetry's propagators.
type RequestHeaders struct {
	h     http.Header
	added []string
}

var ownHeaders = map[string]bool{"Authorization": true, "Idempotency-Key": true, "Content-Type": true,
	"Accept": true, "User-Agent": true, "Cache-Control": true, "Pragma": true, "Content-Length": true}

// Set adds a header to the request, unless it is one of the request's own.
func (r *RequestHeaders) Set(key, value string) {
	k := http.CanonicalHeaderKey(key)
	if ownHeaders[k] {
		return
	}
	if r.h.Get(k) == "" {
		r.added = append(r.added, k)
	}
	r.h.Set(k, value)
}

// Get returns a header the observer added ("" for any other).
func (r *RequestHeaders) Get(key string) string {
	k := http.CanonicalHeaderKey(key)
	for _, a := range r.added {
		if a == k {
			return r.h.Get(k)
		}
	}
	return ""
}

// Keys lists the headers the observer added.
func (r *RequestHeaders) Keys() []string {
	out := make([]string, len(r.added))
	for i, k := range r.added {
		out[i] = strings.ToLower(k)
	}
	return out
}

// run is runOp observed as a StepOperation.
func (c *Client) run(ctx context.Context, s *opSpec) (*settled, error) {
	if c.observer == nil {
		return c.runOp(ctx, s)
	}
	ctx, end := c.observer.Start(ctx, Step{Kind: StepOperation, OperationKind: s.kind, OperationID: s.id})
	res, err := c.runOp(ctx, s)
	se := StepEnd{Err: err}
	if res != nil {
		se.State, se.Source, se.Attempts, se.Key = string(res.rec.State), res.op.Source, res.rec.Attempts, res.rec.Key
		se.Decision = recordDecision(res.rec)
	}
	se.Outcome = OutcomeOf(err)
	var oe *OperationError
	var ue *OutcomeUnknownError
	switch {
	case errors.As(err, &ue):
		se.State, se.Key = "unknown", ue.Key
	case errors.As(err, &oe):
		se.State, se.Key = string(oe.State), oe.Key
	}
	end(se)
	return res, err
}

// observedLookup is lookup observed as a StepLookup.
func (c *Client) observedLookup(ctx context.Context, kind, opID string, m opMeta) (lookupOutcome, error) {
	if c.observer == nil {
		return c.lookup(ctx, kind, opID, m)
	}
	ctx, end := c.observer.Start(ctx, Step{Kind: StepLookup, OperationKind: kind, OperationID: opID})
	lo, err := c.lookup(ctx, kind, opID, m)
	end(StepEnd{Err: err, Found: err == nil && lo.kind != lookupNotFound})
	return lo, err
}

// observeAttempt starts a StepAttempt for req: the request to send (under
// the observer's context, with its headers) and the function that ends it.
func (c *Client) observeAttempt(req *http.Request, key string) (*http.Request, func(*http.Response, error)) {
	if c.observer == nil {
		return req, func(*http.Response, error) {}
	}
	ctx, end := c.observer.Start(req.Context(), Step{Kind: StepAttempt, Method: req.Method, URL: req.URL, Key: key,
		Header: &RequestHeaders{h: req.Header}})
	return req.WithContext(ctx), func(resp *http.Response, err error) {
		se := StepEnd{Err: err}
		if resp != nil {
			se.Status = resp.StatusCode
		}
		end(se)
	}
}

// observedStore is a key store whose calls are observed as StepStore.
type observedStore struct {
	s keystore.Store
	o Observer
}

func (st observedStore) start(ctx context.Context, call string) (context.Context, func(error)) {
	ctx, end := st.o.Start(ctx, Step{Kind: StepStore, StoreCall: call})
	return ctx, func(err error) { end(StepEnd{Err: err}) }
}

func (st observedStore) Create(ctx context.Context, rec keystore.Record, owner string, ttl time.Duration) (keystore.Record, error) {
	ctx, end := st.start(ctx, "create")
	r, err := st.s.Create(ctx, rec, owner, ttl)
	end(err)
	return r, err
}

func (st observedStore) Get(ctx context.Context, operationID string) (keystore.Record, error) {
	ctx, end := st.start(ctx, "get")
	r, err := st.s.Get(ctx, operationID)
	end(err)
	return r, err
}

func (st observedStore) Acquire(ctx context.Context, operationID, owner string, ttl time.Duration) (keystore.Record, error) {
	ctx, end := st.start(ctx, "acquire")
	r, err := st.s.Acquire(ctx, operationID, owner, ttl)
	end(err)
	return r, err
}

func (st observedStore) Renew(ctx context.Context, operationID string, token int64, ttl time.Duration) (keystore.Record, error) {
	ctx, end := st.start(ctx, "renew")
	r, err := st.s.Renew(ctx, operationID, token, ttl)
	end(err)
	return r, err
}

func (st observedStore) Release(ctx context.Context, operationID string, token int64) error {
	ctx, end := st.start(ctx, "release")
	err := st.s.Release(ctx, operationID, token)
	end(err)
	return err
}

func (st observedStore) Update(ctx context.Context, rec keystore.Record) (keystore.Record, error) {
	ctx, end := st.start(ctx, "update")
	r, err := st.s.Update(ctx, rec)
	end(err)
	return r, err
}

func (st observedStore) List(ctx context.Context, f keystore.Filter) ([]keystore.Record, error) {
	ctx, end := st.start(ctx, "list")
	r, err := st.s.List(ctx, f)
	end(err)
	return r, err
}

func (st observedStore) DeleteExpired(ctx context.Context, before time.Time, limit int) (int, error) {
	ctx, end := st.start(ctx, "delete_expired")
	n, err := st.s.DeleteExpired(ctx, before, limit)
	end(err)
	return n, err
}
