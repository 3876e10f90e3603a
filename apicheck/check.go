package apicheck

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/keystore"
)

// Config says where and with what to run the check.
type Config struct {
	BaseURL      string               // the API's base URL, ending in /v1 (PAGPOLAR_BASE_URL)
	CredentialID string               // PAGPOLAR_CREDENTIAL_ID
	Token        pagpolar.TokenSource // PAGPOLAR_TOKEN

	OfferID     string // an offer for the charges: the cheapest one the account has (PAGPOLAR_OFFER_ID)
	PlanID      string // a plan's offer to subscribe to (PAGPOLAR_PLAN_ID)
	OtherPlanID string // another plan's offer, for the plan change (PAGPOLAR_OTHER_PLAN_ID)
	// CardToken is a test card token of that API. Without it the card
	// charge and the refunds (which need a paid sale) are not made, and
	// their shapes are reported not exercised.
	CardToken string

	// RunID names the run in every reference and operation ID (default: 8
	// random hex digits).
	RunID string
	// AllowProduction lets the check run against a base URL that looks like
	// production (IsProductionURL). It charges real money there.
	AllowProduction bool

	// HTTPClient's transport carries every request (default: a clone of
	// http.DefaultTransport, whose connections are closed when Run returns).
	HTTPClient *http.Client
	// Policy, if set, is the SDK clients' retry policy (nil: the SDK's
	// defaults, right for a real API). Shorten its windows only against a
	// fake configured the same way.
	Policy *pagpolar.RetryPolicy
	// Logger receives the SDK clients' logs (default: none).
	Logger *slog.Logger
	// Progress, if set, is called with one line per step.
	Progress func(line string)
	// Phase, if set, is called as each phase of the run starts (a phase can
	// take minutes: the SDK's lookups wait out the API's processing window).
	Phase func(line string)
}

// ErrProduction is returned by Run for a base URL that looks like
// production without Config.AllowProduction.
var ErrProduction = errors.New("apicheck: the base URL looks like production")

// ProductionHost is the documented production API host (docs/CONTRACT.md).
const ProductionHost = "api.pagpolar.com"

// IsProductionURL reports whether a base URL may be production, and why,
// for the refusal. Only these count as test hosts:
//
//   - a DNS name one of whose labels has a hyphen-separated word starting
//     with "staging" or "sandbox" (api-staging.example.com,
//     sandbox.example.com), unless it is the documented production host
//     or under it;
//   - localhost and names under .localhost;
//   - a loopback IP literal (127.0.0.0/8, ::1).
//
// Everything else may be production: the documented production host (also
// with a trailing dot, in any case), any other name, any other IP literal,
// a host with a zone or any '%' in it, and text that is not a URL with a
// host. The reason never repeats the URL's user information or query.
func IsProductionURL(raw string) (bool, string) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return true, "the base URL is not a URL with a host"
	}
	host := strings.ToLower(u.Hostname())
	if strings.Contains(host, "%") {
		return true, "the host " + strconv.Quote(host) + " has a zone or a '%' in it"
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		if addr.Unmap().IsLoopback() {
			return false, ""
		}
		return true, host + " is an IP address that is not loopback"
	}
	name := strings.TrimSuffix(host, ".")
	switch {
	case name == ProductionHost || strings.HasSuffix(name, "."+ProductionHost):
		return true, name + " is the documented production host"
	case name == "localhost" || strings.HasSuffix(name, ".localhost"):
		return false, ""
	case testLabel(name):
		return false, ""
	}
	return true, name + " does not say it is a test host (no DNS label with \"staging\" or \"sandbox\", not localhost or loopback)"
}

// testLabel: some label of the DNS name has a hyphen-separated word that
// starts with "staging" or "sandbox".
func testLabel(name string) bool {
	for _, label := range strings.Split(name, ".") {
		for _, w := range strings.Split(label, "-") {
			if strings.HasPrefix(w, "staging") || strings.HasPrefix(w, "sandbox") {
				return true
			}
		}
	}
	return false
}

// displayURL is a base URL fit to print: no user information, no query,
// no fragment.
func displayURL(u *url.URL) string {
	v := *u
	v.User, v.RawQuery, v.ForceQuery, v.Fragment, v.RawFragment = nil, "", false, "", ""
	return v.String()
}

// Run runs the check. It returns an error only when the check could not
// run (a refused base URL, a bad Config, the API unreachable or refusing
// the credential); everything the API answered is in the Report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if prod, why := IsProductionURL(cfg.BaseURL); prod && !cfg.AllowProduction {
		return nil, fmt.Errorf("%w: %s; the check charges real money there: run it against staging, or allow production explicitly", ErrProduction, why)
	}
	if cfg.RunID == "" {
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("apicheck: run ID: %w", err)
		}
		cfg.RunID = hex.EncodeToString(b[:])
	}
	base, _ := url.Parse(strings.TrimRight(cfg.BaseURL, "/"))
	var rt http.RoundTripper
	if cfg.HTTPClient != nil && cfg.HTTPClient.Transport != nil {
		rt = cfg.HTTPClient.Transport
	} else {
		own := http.DefaultTransport.(*http.Transport).Clone()
		defer own.CloseIdleConnections() // the run's connections end with it
		rt = own
	}
	r := &runner{
		cfg:    cfg,
		base:   base,
		rec:    &recorder{base: rt, basePath: base.Path, rd: newRedactor()},
		prefix: "pagpolar-check-" + cfg.RunID + "-",
		paths:  map[string]*Path{},

		cleanupSent: map[string]int64{},
	}
	r.rawTap = &tap{rec: r.rec}
	r.rec.rd.addSecret(cfg.CardToken)
	for _, v := range customerValues() {
		r.rec.rd.addPrivate(v)
	}
	r.rep = &Report{RunID: cfg.RunID, BaseURL: displayURL(base), SDKVersion: pagpolar.Version, Started: time.Now().UTC()}
	r.phase("preflight: GET %s%s", displayURL(base), wire.RouteSales)
	if err := r.preflight(ctx); err != nil {
		return nil, err
	}
	// A configuration refusal ends the run at once (refusals.seen).
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	refused := &refusals{stop: stop}
	r.rec.onAdd = func(x exchange) { refused.seen(x, r.rec.rd) }
	var err error
	if r.a, r.tapA, err = r.client(); err != nil {
		return nil, err
	}
	if r.b, _, err = r.client(); err != nil {
		return nil, err
	}
	r.script(ctx)
	if err := refused.first(); err != nil {
		return nil, fmt.Errorf("%w (the run stopped there; created so far: %s)", err, r.rec.rd.scrub(r.createdSummary()))
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("apicheck: %w (after %d calls; created so far: %s)", ctx.Err(), len(r.rec.exchanges()), r.rec.rd.scrub(r.createdSummary()))
	}
	r.finish()
	return r.rep, nil
}

func (cfg Config) validate() error {
	var missing []string
	for _, f := range []struct{ name, v string }{
		{"BaseURL", cfg.BaseURL}, {"CredentialID", cfg.CredentialID}, {"OfferID", cfg.OfferID},
		{"PlanID", cfg.PlanID}, {"OtherPlanID", cfg.OtherPlanID},
	} {
		if strings.TrimSpace(f.v) == "" {
			missing = append(missing, f.name)
		}
	}
	if cfg.Token == nil {
		missing = append(missing, "Token")
	}
	if len(missing) > 0 {
		return fmt.Errorf("apicheck: Config.%s not set", strings.Join(missing, ", Config."))
	}
	if cfg.PlanID == cfg.OtherPlanID {
		return fmt.Errorf("apicheck: Config.PlanID and Config.OtherPlanID are both %q: the plan change needs two plans", cfg.PlanID)
	}
	u, err := url.Parse(cfg.BaseURL)
	switch {
	case err != nil:
		return errors.New("apicheck: Config.BaseURL is not a URL: want http(s)://host/v1")
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return fmt.Errorf("apicheck: Config.BaseURL %q: want http(s)://host/v1", displayURL(u))
	case u.User != nil:
		// The SDK authenticates by bearer token; credentials in the URL
		// would be sent to every route and printed with the report.
		return fmt.Errorf("apicheck: Config.BaseURL %s has user information: remove it (the credential goes in Config.Token)", displayURL(u))
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return fmt.Errorf("apicheck: Config.BaseURL %s has a query or fragment: want http(s)://host/v1", displayURL(u))
	}
	return nil
}

// runner is one run of the check.
type runner struct {
	cfg    Config
	base   *url.URL
	rec    *recorder
	rawTap *tap
	prefix string
	rep    *Report

	a, b *pagpolar.Client // a: sends first (its answers withheld when armed); b: repeats a's operations from another store
	tapA *tap

	mu    sync.Mutex
	paths map[string]*Path

	cardSale  string // the card sale's identifier
	cardTotal int64  // its amount in centavos (the SDK's reading)
	rest      int64  // the last refund's amount
	refunded  int64  // centavos refunded by the check
	// stopRefunds: a refund ended other than the check can account for
	// (the over-refund not refused); no more refunds are sent.
	stopRefunds bool
	cleanupSent map[string]int64 // cleanup step → the refund amount it sent
	subID       string
}

func (r *runner) progress(format string, args ...any) {
	if r.cfg.Progress != nil {
		r.cfg.Progress(r.rec.rd.scrub(fmt.Sprintf(format, args...)))
	}
}

func (r *runner) phase(format string, args ...any) {
	if r.cfg.Phase != nil {
		r.cfg.Phase(r.rec.rd.scrub(fmt.Sprintf(format, args...)))
	}
}

func (r *runner) client() (*pagpolar.Client, *tap, error) {
	t := &tap{rec: r.rec}
	opts := []pagpolar.Option{
		pagpolar.WithBaseURL(r.base.String()),
		pagpolar.WithStore(keystore.NewMemory()),
		pagpolar.WithHTTPClient(&http.Client{Transport: t}),
		pagpolar.WithUserAgent("pagpolar-check/" + pagpolar.Version),
	}
	if r.cfg.Logger != nil {
		opts = append(opts, pagpolar.WithLogger(r.cfg.Logger))
	} else {
		opts = append(opts, pagpolar.WithLogger(slog.New(slog.DiscardHandler)))
	}
	if r.cfg.Policy != nil {
		opts = append(opts, pagpolar.WithRetryPolicy(*r.cfg.Policy))
	}
	c, err := pagpolar.NewClient(r.cfg.CredentialID, r.cfg.Token, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("apicheck: %w", err)
	}
	return c, t, nil
}

func (r *runner) ref(name string) string  { return r.prefix + name }
func (r *runner) opID(name string) string { return r.prefix + name }

func customer() pagpolar.Customer {
	return pagpolar.Customer{Name: "PagPolar SDK Check", Email: "sdk-check@example.com", Document: "12345678909"}
}

// customerValues are the customer's values the check sends, as the
// redactor removes them from what it reports (the document also in the
// CPF layout).
func customerValues() []string {
	c := customer()
	return []string{c.Name, c.Email, c.Document, c.Phone, "123.456.789-09"}
}

// raw sends one request as it is, through the recording tap.
func (r *runner) raw(ctx context.Context, method, path string, q url.Values, body any, key string) (exchange, error) {
	u := *r.base
	u.Path = strings.TrimRight(r.base.Path, "/") + path
	if q != nil {
		u.RawQuery = q.Encode()
	}
	var rd *strings.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return exchange{}, err
		}
		rd = strings.NewReader(string(b))
	}
	ctx, cancel := context.WithTimeout(ctx, rawTimeout)
	defer cancel()
	var req *http.Request
	var err error
	if rd != nil {
		req, err = http.NewRequestWithContext(ctx, method, u.String(), rd)
	} else {
		req, err = http.NewRequestWithContext(ctx, method, u.String(), nil)
	}
	if err != nil {
		return exchange{}, err
	}
	req.GetBody = nil // never resent by the transport
	tok, err := r.cfg.Token.Token(ctx)
	if err != nil {
		return exchange{}, fmt.Errorf("token source: %w", err)
	}
	req.Header.Set(wire.HeaderAuthorization, "Bearer "+tok)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "pagpolar-check/"+pagpolar.Version)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set(wire.HeaderIdempotencyKey, key)
	}
	resp, err := (&http.Client{Transport: r.rawTap, CheckRedirect: noRedirect}).Do(req)
	if err != nil {
		return exchange{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body) // the tap's copy: already read whole
	if err != nil {
		return exchange{}, err
	}
	return exchange{method: method, path: path, status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// rawTimeout bounds one raw request (the SDK's own are bounded by its
// policy's AttemptTimeout).
const rawTimeout = 30 * time.Second

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
