package pagpolar

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
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
	sent         sentTokens // the last tokens sent, removed from text made of answers (scrub.go)
	credentialID string
	store        keystore.Store
	userStore    keystore.Store // as passed to WithStore (store is it, observed when an Observer is set)
	policy       RetryPolicy
	budget       *RetryBudget
	log          *slog.Logger
	clock        Clock
	userAgent    string
	hook         Hook
	observer     Observer
	randomKeys   bool
	fpSecrets    []fpSecret // current first, then earlier ones that still verify
	maxOpAge     time.Duration
	owner        string // lease owner name of this client instance
	calls        atomic.Uint64

	srvClock   serverClock // the API's clock, from its Date headers (rule 12)
	shapes     shapes      // what the API's own answers taught about its shapes
	orphans    orphanLeases
	unrecorded unrecordedOutcomes
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

// WithStore sets the key store; NewClient requires one. Use a durable store
// (keystore/sqlstore, keystore/redisstore) in production; keystore.NewMemory
// forgets every key on restart, which is fine for tests only and must be
// passed explicitly. A wrapper around a store (metrics, tracing) must pass
// keystore.HistoryProver and keystore.AmnesiaGuard on: a store that does not
// implement HistoryProver is taken as proven, so its first sends are not
// looked up after it lost its records (SAFETY rule 13). A store that
// implements AmnesiaGuard but not HistoryProver is refused: it is a wrapper
// that passed one on and dropped the other.
func WithStore(s keystore.Store) Option {
	return func(c *Client) error {
		if s == nil {
			return errors.New("pagpolar: nil key store")
		}
		_, guards := s.(keystore.AmnesiaGuard)
		if _, proves := s.(keystore.HistoryProver); guards && !proves {
			return fmt.Errorf("pagpolar: the key store %T detects lost records (keystore.AmnesiaGuard) but does not say whether its history is proven (keystore.HistoryProver): a wrapper that drops HistoryProver has first sends go out unchecked after the store lost its records; pass both on", s)
		}
		c.store = s
		return nil
	}
}

// WithRetryPolicy sets the policy; zero fields take DefaultRetryPolicy
// values. A policy under which a worker could lose its own lease between
// two renewals is refused (a *ValidationError naming the field): LeaseTTL
// must exceed the longest wait (MaxRetryAfter, LookupInterval) plus a token
// fetch and an attempt (2×AttemptTimeout).
func WithRetryPolicy(p RetryPolicy) Option {
	return func(c *Client) error {
		p = p.withDefaults()
		if err := p.validate(); err != nil {
			return err
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
// share a store still send one key for one operation. A random key's second
// half is a tag of the credential and the operation, so a record is still
// checked as this credential's (ErrForeignRecord) with random keys.
func WithRandomKeys() Option { return func(c *Client) error { c.randomKeys = true; return nil } }

// WithFingerprintSecret lets the parameter fingerprint cover the customer's
// personal data and the card token through an HMAC with current (at least
// 16 bytes). Without it, the fingerprint covers only non-sensitive fields
// (offer, reference, amounts, method, identifiers), so nothing personal can
// be recovered from the store.
//
// Rotating the secret: pass the new secret first and the old ones after it,
// WithFingerprintSecret(newSecret, oldSecret). New records are
// fingerprinted with the new one; a record made under an old one is still
// verified with it (each fingerprint names the secret that made it) and is
// re-fingerprinted with the new one when it is next written. Drop an old
// secret once the records made under it are reaped (keystore.Reap; 30 days
// by default). A record whose secret was dropped is compared on its public
// fields only (a warning is logged), never refused.
func WithFingerprintSecret(current []byte, earlier ...[]byte) Option {
	return func(c *Client) error {
		c.fpSecrets = nil
		for i, s := range append([][]byte{current}, earlier...) {
			if len(s) < 16 {
				field := "current"
				if i > 0 {
					field = fmt.Sprintf("earlier[%d]", i-1)
				}
				return &ValidationError{Field: "WithFingerprintSecret(" + field + ")", Reason: "a fingerprint secret must be at least 16 bytes"}
			}
			c.fpSecrets = append(c.fpSecrets, newFPSecret(s))
		}
		return nil
	}
}

// WithMaxOperationAge refuses to send again an operation first recorded
// more than d ago (it is settled by lookup, then ErrOperationTooOld). Zero
// (the default) means no limit.
func WithMaxOperationAge(d time.Duration) Option {
	return func(c *Client) error { c.maxOpAge = d; return nil }
}

// WithOwner names this client in operation leases (default: the host
// name), for operators reading the store; a random suffix is always added,
// so instances that share a name never share a lease.
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
	if st, ok := tokens.(StaticToken); ok && strings.TrimSpace(string(st)) == "" {
		return nil, &ValidationError{Field: "tokens", Reason: "StaticToken is empty (is the token's environment variable set?)"}
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
		return nil, &ValidationError{Field: "WithStore", Reason: "required: the key store is what lets the SDK charge at most once across restarts. " +
			"Pass a durable one (keystore/sqlstore, keystore/redisstore), or keystore.NewMemory() explicitly in tests (it forgets every key on restart)"}
	}
	c.userStore = c.store
	if c.observer != nil {
		c.store = observedStore{s: c.store, o: c.observer}
	}
	// Never follow redirects: a 302/303 would turn a charge into a GET whose
	// answer would be read as the charge's. A 3xx is treated as ambiguous.
	hc := *c.http
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.http = &hc
	if c.budget == nil {
		c.budget = NewRetryBudget(0, 0)
	}
	// Every client instance gets a random suffix, so that a name reused
	// across restarts or replicas never lets two instances share a lease.
	c.owner = ownerName(c.owner)
	c.Payments = &PaymentsService{c: c}
	c.Refunds = &RefundsService{c: c}
	c.Subscriptions = &SubscriptionsService{c: c}
	if st, ok := tokens.(StaticToken); ok {
		c.sent.add(string(st))
	}
	return c, nil
}

// ownerName is name (default: the host name) and a random suffix.
func ownerName(name string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	if name == "" {
		name, _ = os.Hostname()
	}
	return name + "-" + hex.EncodeToString(b[:])
}

// Store returns the client's key store.
func (c *Client) Store() keystore.Store { return c.userStore }

// Budget returns the client's retry budget.
func (c *Client) Budget() *RetryBudget { return c.budget }

// response is one HTTP exchange's outcome.
type response struct {
	status    int
	header    http.Header
	body      []byte
	requestID string
	replayed  bool

	// Non-2xx: the error body as wire.APIError reads it.
	code, message string
	apiOwn        bool
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

// url is the API URL of path (relative to the base URL) with query.
func (c *Client) url(path string, query url.Values) *url.URL {
	u := *c.base
	u.Path = strings.TrimRight(c.base.Path, "/") + path
	u.RawPath = ""
	if query != nil {
		u.RawQuery = query.Encode()
	}
	return &u
}

// send performs exactly one HTTP request. The request is built so that
// net/http cannot resend it on its own (SAFETY rule 2): GetBody is nil, so
// Request.isReplayable is false even with an Idempotency-Key header.
func (c *Client) send(ctx context.Context, method string, u *url.URL, body []byte, key string) (*response, error) {
	token, err := c.token(ctx)
	if err != nil {
		return nil, &sendError{err: err}
	}
	return c.sendWith(ctx, token, method, u, body, key)
}

// token fetches a token within one attempt's time: a token source that
// hangs must not hold a lease past its renewal.
func (c *Client) token(ctx context.Context) (string, error) {
	if st, ok := c.tokens.(StaticToken); ok {
		return string(st), nil // cannot hang; remembered by NewClient
	}
	tctx, cancel := context.WithTimeout(ctx, c.policy.AttemptTimeout)
	defer cancel()
	tok, err := c.tokens.Token(tctx)
	if err != nil {
		return "", &tokenError{err: err}
	}
	c.sent.add(tok)
	return tok, nil
}

// sendWith is send with a token fetched beforehand (money requests fetch it
// before their lease check, so a slow token source cannot outlive a lease).
func (c *Client) sendWith(ctx context.Context, token, method string, u *url.URL, body []byte, key string) (*response, error) {
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
	}
	req.Header = c.requestHeader(method, token, key, body != nil)
	sentAt := c.clock.Now()
	req, endAttempt := c.observeAttempt(req, key)
	resp, err := c.http.Do(req)
	endAttempt(resp, err)
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
		// some way we cannot read. Ambiguous. A 2xx's headers are still the
		// API's own: its Date is a reading of the API's clock, and one that
		// shows the clock stepped back must be seen (a floor it breaks
		// would exclude this very request's effect).
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			c.observeDate(resp.Header, method, sentAt, strings.EqualFold(resp.Header.Get(wire.HeaderReplayed), "true"))
		}
		return nil, &sendError{err: fmt.Errorf("pagpolar: reading response (status %d): %w", resp.StatusCode, redact(err, token)), written: true}
	}
	r := &response{
		status:    resp.StatusCode,
		header:    resp.Header,
		body:      b,
		requestID: requestID(resp.Header.Get(wire.HeaderRequestID), token),
		replayed:  strings.EqualFold(resp.Header.Get(wire.HeaderReplayed), "true"),
	}
	if r.status >= 300 {
		r.code, r.message, r.apiOwn = wire.APIError(resp.Header.Get("Content-Type"), b)
	}
	if r.status >= 200 && r.status < 300 || r.apiOwn {
		// Only the API's own answers measure its clock: a gateway's page may
		// carry the gateway's.
		c.observeDate(resp.Header, method, sentAt, r.replayed)
	}
	return r, nil
}

// observeDate gives the API's clock estimator the Date of one of the API's
// own answers to a request sent at sentAt.
func (c *Client) observeDate(h http.Header, method string, sentAt time.Time, replayed bool) {
	c.srvClock.observeAnswer(h, sentAt, c.clock.Now, c.policy.ServerClockTolerance, method != http.MethodGet && !replayed)
}

// apiError builds the typed error of a non-2xx response. token is the one
// the request was sent with (not one fetched again: a refreshing source
// may return another by now, and a ctx that ended none at all); it and
// private (the operation's personal values) are removed from Message and
// Raw before anything else can see them (scrub.go).
func (c *Client) apiError(r *response, key, token string, private []string) *APIError {
	const maxRaw = 4096
	e := &APIError{StatusCode: r.status, RequestID: r.requestID, Key: key, Code: r.code, FromAPI: r.apiOwn}
	e.Message = scrubAnswer(r.message, token, private)
	e.Code = scrubAnswer(r.code, token, private)
	// Scrubbed before the final cut (a cut must not leave half a token
	// behind), after a first cut with room for the longest echo: a huge
	// body is not worth scrubbing whole.
	body := r.body
	if max := maxRaw + 8*len(token) + 256; len(body) > max {
		body = body[:max]
	}
	e.Raw = truncate(scrubAnswer(string(body), token, private), maxRaw)
	return e
}

// retryAfter parses a Retry-After header in seconds or as an HTTP date; a
// date is read against the answer's own Date header, so the client's clock
// plays no part (it may be minutes off).
func (c *Client) retryAfter(h http.Header) time.Duration {
	v := h.Get(wire.HeaderRetryAfter)
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	if d, err := http.ParseTime(h.Get("Date")); err == nil {
		return t.Sub(d)
	}
	return t.Sub(c.clock.Now())
}
