package pagpolar

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/keystore"
)

// DefaultBaseURL is PagPolar's production API.
const DefaultBaseURL = "https://api.pagpolar.com/v1"

// Version is the SDK version sent in the User-Agent.
const Version = "0.1.0"

// Clock is the client's time source. Tests pass a clock they can move
// (pagpolartest.Clock); the default is the system clock.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// TokenSource yields the access token sent as "Authorization: Bearer".
// Implementations that refresh tokens must be safe for concurrent use.
type TokenSource interface {
	Token(ctx context.Context) (string, error)
}

// StaticToken is a TokenSource that always returns the same token.
type StaticToken string

// Token implements TokenSource.
func (t StaticToken) Token(context.Context) (string, error) { return string(t), nil }

// TokenFunc adapts a function (e.g. one that fetches and caches a token from
// the credential) to TokenSource.
type TokenFunc func(ctx context.Context) (string, error)

// Token implements TokenSource.
func (f TokenFunc) Token(ctx context.Context) (string, error) { return f(ctx) }

// Client talks to the PagPolar API. Create it with NewClient; it is safe for
// concurrent use. Money-moving methods hang off its services.
type Client struct {
	Payments      *PaymentsService
	Refunds       *RefundsService
	Subscriptions *SubscriptionsService

	base         *url.URL
	http         *http.Client
	tokens       TokenSource
	credentialID string
	store        keystore.Store
	policy       RetryPolicy
	budget       *RetryBudget
	log          *slog.Logger
	clock        Clock
	userAgent    string
	hook         Hook
	randomKeys   bool
	fpSecret     []byte
	maxOpAge     time.Duration
	owner        string // lease owner name of this client instance
	calls        atomic.Uint64
}

// callOwner names one call's lease: each call is its own worker, so two
// goroutines of one client never share (and silently re-take) a lease.
func (c *Client) callOwner() string {
	return c.owner + "#" + strconv.FormatUint(c.calls.Add(1), 10)
}

// Option configures a Client.
type Option func(*Client) error

// WithBaseURL points the client at another API (staging, or a fake).
func WithBaseURL(raw string) Option {
	return func(c *Client) error {
		u, err := url.Parse(strings.TrimRight(raw, "/"))
		if err != nil || u.Scheme == "" || u.Host == "" {
			return fmt.Errorf("pagpolar: invalid base URL %q: want scheme://host[/path]", raw)
		}
		c.base = u
		return nil
	}
}

// WithHTTPClient sets the HTTP client. Its Timeout should be zero or larger
// than the policy's AttemptTimeout (which bounds each attempt itself).
func WithHTTPClient(h *http.Client) Option {
	return func(c *Client) error {
		if h == nil {
			return errors.New("pagpolar: nil http.Client")
		}
		c.http = h
		return nil
	}
}

// WithStore sets the key store. Without it the client uses an in-memory
// store, which forgets every key on restart: fine for tests, never for
// production.
func WithStore(s keystore.Store) Option {
	return func(c *Client) error {
		if s == nil {
			return errors.New("pagpolar: nil key store")
		}
		c.store = s
		return nil
	}
}

// WithRetryPolicy sets the policy; zero fields take DefaultRetryPolicy
// values. A policy whose lease could expire during one attempt and its
// longest wait is refused.
func WithRetryPolicy(p RetryPolicy) Option {
	return func(c *Client) error {
		p = p.withDefaults()
		if p.LeaseTTL <= p.AttemptTimeout+p.MaxRetryAfter {
			return &ValidationError{Field: "RetryPolicy.LeaseTTL", Reason: "must exceed AttemptTimeout + MaxRetryAfter, or a worker could lose its lease mid-attempt"}
		}
		if p.LeaseTTL <= p.LookupInterval {
			return &ValidationError{Field: "RetryPolicy.LeaseTTL", Reason: "must exceed LookupInterval"}
		}
		c.policy = p
		return nil
	}
}

// WithRetryBudget shares a budget (e.g. between clients of one process).
func WithRetryBudget(b *RetryBudget) Option {
	return func(c *Client) error { c.budget = b; return nil }
}

// WithLogger sets the logger (default slog.Default(); the SDK logs at debug).
// Tokens are never logged.
func WithLogger(l *slog.Logger) Option {
	return func(c *Client) error { c.log = l; return nil }
}

// WithClock sets the clock.
func WithClock(clk Clock) Option { return func(c *Client) error { c.clock = clk; return nil } }

// WithUserAgent prefixes the User-Agent with the application's name.
func WithUserAgent(ua string) Option {
	return func(c *Client) error { c.userAgent = ua + " " + c.userAgent; return nil }
}

// WithHook installs an observer of the client's attempts, retries, waits,
// lookups and settlements (for metrics or tracing).
func WithHook(h Hook) Option { return func(c *Client) error { c.hook = h; return nil } }

// WithRandomKeys makes the client generate a random UUIDv4 per operation
// (saved before sending) instead of the default UUIDv5 derived from the
// credential ID and the operation ID. Derived keys let two hosts that do not
// share a store still send one key for one operation.
func WithRandomKeys() Option { return func(c *Client) error { c.randomKeys = true; return nil } }

// WithFingerprintSecret lets the parameter fingerprint cover the customer's
// personal data and the card token through an HMAC with this secret. Without
// it, the fingerprint covers only non-sensitive fields (offer, reference,
// amounts, method, identifiers), so nothing personal can be recovered from
// the store.
func WithFingerprintSecret(secret []byte) Option {
	return func(c *Client) error {
		if len(secret) < 16 {
			return errors.New("pagpolar: fingerprint secret must be at least 16 bytes")
		}
		c.fpSecret = append([]byte(nil), secret...)
		return nil
	}
}

// WithMaxOperationAge refuses to send again an operation first recorded
// more than d ago (it is settled by lookup, then ErrOperationTooOld). Zero
// (the default) means no limit.
func WithMaxOperationAge(d time.Duration) Option {
	return func(c *Client) error { c.maxOpAge = d; return nil }
}

// WithOwner names this client in operation leases (default: host name and a
// random suffix). Two clients must never share an owner name.
func WithOwner(name string) Option {
	return func(c *Client) error {
		if name == "" {
			return errors.New("pagpolar: empty owner name")
		}
		c.owner = name
		return nil
	}
}

// NewClient returns a client for the credential credentialID, authenticating
// with tokens. credentialID is a stable identifier of the API credential (not
// the token, which may rotate): idempotency keys are scoped by it, as the API
// scopes them by credential.
func NewClient(credentialID string, tokens TokenSource, opts ...Option) (*Client, error) {
	if strings.TrimSpace(credentialID) == "" {
		return nil, &ValidationError{Field: "credentialID", Reason: "required (a stable ID of the API credential, not the token)"}
	}
	if tokens == nil {
		return nil, &ValidationError{Field: "tokens", Reason: "required"}
	}
	base, _ := url.Parse(DefaultBaseURL)
	c := &Client{
		base:         base,
		http:         &http.Client{},
		tokens:       tokens,
		credentialID: credentialID,
		policy:       DefaultRetryPolicy.withDefaults(),
		log:          slog.Default(),
		clock:        systemClock{},
		userAgent:    "pagpolar-go/" + Version,
	}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	if c.store == nil {
		c.store = keystore.NewMemoryWithClock(c.clock)
	}
	// Never follow redirects: a 302/303 would turn a charge into a GET whose
	// answer would be read as the charge's. A 3xx is treated as ambiguous.
	hc := *c.http
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.http = &hc
	if c.budget == nil {
		c.budget = NewRetryBudget(0, 0)
	}
	if c.owner == "" {
		c.owner = defaultOwner()
	}
	c.Payments = &PaymentsService{c: c}
	c.Refunds = &RefundsService{c: c}
	c.Subscriptions = &SubscriptionsService{c: c}
	return c, nil
}

func defaultOwner() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	h, _ := os.Hostname()
	return h + "-" + hex.EncodeToString(b[:])
}

// Store returns the client's key store.
func (c *Client) Store() keystore.Store { return c.store }

// Budget returns the client's retry budget.
func (c *Client) Budget() *RetryBudget { return c.budget }

// response is one HTTP exchange's outcome.
type response struct {
	status    int
	header    http.Header
	body      []byte
	requestID string
	replayed  bool
}

// sendError is a transport failure; written tells whether any byte of the
// request may have reached the server.
type sendError struct {
	err     error
	written bool
}

func (e *sendError) Error() string { return e.err.Error() }
func (e *sendError) Unwrap() error { return e.err }

const maxResponseBody = 4 << 20

// send performs exactly one HTTP request. The request is built so that
// net/http cannot resend it on its own (SAFETY rule 2): GetBody is nil, so
// Request.isReplayable is false even with an Idempotency-Key header.
func (c *Client) send(ctx context.Context, method, path string, query url.Values, body []byte, key string) (*response, error) {
	token, err := c.tokens.Token(ctx)
	if err != nil {
		return nil, &sendError{err: fmt.Errorf("pagpolar: token source: %w", err)}
	}
	return c.sendWith(ctx, token, method, path, query, body, key)
}

// sendWith is send with a token fetched beforehand (money requests fetch it
// before their lease check, so a slow token source cannot outlive a lease).
func (c *Client) sendWith(ctx context.Context, token, method, path string, query url.Values, body []byte, key string) (*response, error) {
	u := *c.base
	u.Path = strings.TrimRight(c.base.Path, "/") + path
	if query != nil {
		u.RawQuery = query.Encode()
	}
	var rd io.Reader
	if body != nil {
		// A plain io.Reader wrapper: http.NewRequest does not recognise it, so
		// it sets no GetBody.
		rd = io.NopCloser(bytes.NewReader(body))
	}
	actx, cancel := context.WithTimeout(ctx, c.policy.AttemptTimeout)
	defer cancel()
	written := false
	trace := &httptrace.ClientTrace{
		WroteHeaders: func() { written = true },
		WroteRequest: func(httptrace.WroteRequestInfo) { written = true },
	}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(actx, trace), method, u.String(), rd)
	if err != nil {
		return nil, &sendError{err: fmt.Errorf("pagpolar: build request: %w", err)}
	}
	req.GetBody = nil
	if body != nil {
		req.ContentLength = int64(len(body))
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	req.Header.Set(wire.HeaderAuthorization, "Bearer "+token)
	if key != "" {
		req.Header.Set(wire.HeaderIdempotencyKey, key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// A dial failure means nothing was written whatever the trace says.
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			written = false
		}
		return nil, &sendError{err: redact(err, token), written: written}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))
	if err != nil {
		// Headers arrived but the body was cut: the request was processed in
		// some way we cannot read. Ambiguous.
		return nil, &sendError{err: fmt.Errorf("pagpolar: reading response (status %d): %w", resp.StatusCode, redact(err, token)), written: true}
	}
	return &response{
		status:    resp.StatusCode,
		header:    resp.Header,
		body:      b,
		requestID: resp.Header.Get(wire.HeaderRequestID),
		replayed:  strings.EqualFold(resp.Header.Get(wire.HeaderReplayed), "true"),
	}, nil
}

// apiError builds the typed error of a non-2xx response.
func (c *Client) apiError(ctx context.Context, r *response, key string) *APIError {
	e := &APIError{StatusCode: r.status, RequestID: r.requestID, Key: key}
	raw := string(r.body)
	if tok, err := c.tokens.Token(ctx); err == nil && tok != "" {
		raw = strings.ReplaceAll(raw, tok, "[redacted]")
	}
	if len(raw) > 4096 {
		raw = raw[:4096]
	}
	e.Raw = raw
	var we wire.Error
	if json.Unmarshal(r.body, &we) == nil {
		e.Code, e.Message = we.Code, we.Message
		// Only a body with the API's error code counts as the API's own:
		// gateways (AWS API Gateway, Kong, ...) also answer JSON with a
		// "message", and their 503 must not be read as "not processed".
		e.FromAPI = we.Code != ""
	}
	return e
}

func redact(err error, token string) error {
	if token == "" || !strings.Contains(err.Error(), token) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), token, "[redacted]"))
}

// retryAfter parses a Retry-After header in seconds or HTTP date.
func (c *Client) retryAfter(h http.Header) time.Duration {
	v := h.Get(wire.HeaderRetryAfter)
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return t.Sub(c.clock.Now())
	}
	return 0
}

// get performs a read with retries: reads have no effect, so they are
// retried on transport errors, 429 and 5xx within the policy's attempts.
func (c *Client) get(ctx context.Context, path string, query url.Values, out any) (*response, error) {
	return c.getN(ctx, path, query, out, c.policy.MaxAttempts)
}

// getN is get with at most maxAttempts attempts.
func (c *Client) getN(ctx context.Context, path string, query url.Values, out any, maxAttempts int) (*response, error) {
	bo := c.policy.NewBackOff()
	var last error
	for attempt := 1; ; attempt++ {
		r, err := c.send(ctx, http.MethodGet, path, query, nil, "")
		var retryAfter time.Duration
		switch {
		case err != nil:
			last = err
		case r.status >= 200 && r.status < 300:
			c.budget.onAnswer()
			if out != nil {
				if err := json.Unmarshal(r.body, out); err != nil {
					return r, fmt.Errorf("pagpolar: decoding %s response: %w", path, err)
				}
			}
			return r, nil
		case r.status == 429 || r.status >= 500:
			last = c.apiError(ctx, r, "")
			retryAfter = c.retryAfter(r.header)
		default:
			c.budget.onAnswer()
			return r, c.apiError(ctx, r, "")
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("pagpolar: GET %s: %w (last error: %v)", path, ctx.Err(), last)
		}
		if attempt >= maxAttempts {
			return nil, fmt.Errorf("pagpolar: GET %s failed after %d attempt(s): %w", path, attempt, last)
		}
		if !c.budget.takeRetry() {
			return nil, fmt.Errorf("pagpolar: GET %s: %w (last error: %w)", path, ErrBudgetExhausted, last)
		}
		w := c.policy.nextWait(bo, retryAfter)
		c.emit(ctx, Event{Kind: EventWait, Path: path, Attempt: attempt, Wait: w, Err: last})
		if err := sleep(ctx, c.clock, w); err != nil {
			return nil, fmt.Errorf("pagpolar: GET %s: %w (last error: %v)", path, err, last)
		}
	}
}
