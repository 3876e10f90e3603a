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
	"slices"
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
	if err := r.preflight(ctx); err != nil {
		return nil, err
	}
	var err error
	if r.a, r.tapA, err = r.client(); err != nil {
		return nil, err
	}
	if r.b, _, err = r.client(); err != nil {
		return nil, err
	}
	r.script(ctx)
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

// preflight reads one list: it proves the base URL and the credential
// before anything is charged.
func (r *runner) preflight(ctx context.Context) error {
	r.rec.setStep("preflight")
	x, err := r.raw(ctx, http.MethodGet, wire.RouteSales, url.Values{"external_reference": {r.ref("preflight")}}, nil, "")
	if err != nil {
		return fmt.Errorf("apicheck: cannot reach %s: %w", displayURL(r.base), err)
	}
	switch {
	case x.status == http.StatusUnauthorized || x.status == http.StatusForbidden:
		return fmt.Errorf("apicheck: %s refused the credential (GET %s answered %d); check PAGPOLAR_CREDENTIAL_ID and PAGPOLAR_TOKEN", displayURL(r.base), wire.RouteSales, x.status)
	case x.status == http.StatusNotFound || x.status == http.StatusMethodNotAllowed:
		if _, _, own := wire.APIError(x.header.Get("Content-Type"), x.body); !own {
			return fmt.Errorf("apicheck: GET %s%s answered %d, not as the API: is the base URL right (it must end in /v1)?", displayURL(r.base), wire.RouteSales, x.status)
		}
	}
	return nil
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

// path records how one SDK call ended.
func (r *runner) path(name, opID string, src pagpolar.Source, err error, expect string) {
	p := &Path{Name: name, OperationID: opID}
	var unk *pagpolar.OutcomeUnknownError
	switch {
	case err == nil && expect == "":
		p.Outcome, p.Detail = OutcomeSettled, "succeeded ("+string(src)+")"
		if strings.HasSuffix(name, "/lost-answer") && src != pagpolar.SourceLookup {
			p.Detail += "; not by its lookup: the lookup did not find the effect, and the SDK waited out the in-processing window to send again"
		}
	case err == nil:
		p.Outcome, p.Detail = OutcomeUnexpected, "succeeded ("+string(src)+"), expected "+expect
	case errors.As(err, &unk):
		p.Outcome, p.Detail = OutcomeUnknown, unk.Reason
		if unk.Ref != "" {
			p.Detail += "; found " + unk.Ref
		}
	case expect != "":
		p.Outcome, p.Detail = OutcomeSettled, expect+": "+oneLine(err.Error())
	default:
		p.Outcome, p.Detail = OutcomeUnexpected, oneLine(err.Error())
	}
	p.Detail = r.rec.rd.scrub(p.Detail)
	r.mu.Lock()
	r.paths[name] = p
	r.rep.Paths = append(r.rep.Paths, p)
	r.mu.Unlock()
	r.progress("%-28s %-10s %s", name, p.Outcome, p.Detail)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// script is the run's calls, in order. Each step goes on whatever the
// earlier ones ended in: what it cannot do is reported not exercised.
func (r *runner) script(ctx context.Context) {
	cust := customer()
	order := r.ref("order")

	// Charges: the answer to a's send is withheld (a lost answer: the SDK
	// settles by GET /sales?external_reference=); b repeats the operation
	// from another store (the API's replay).
	charge := func(kind string, call func(c *pagpolar.Client) (*pagpolar.Charge, error)) string {
		id := ""
		r.rec.setStep(kind + "/lookup")
		r.tapA.dropNextAnswer()
		res, err := call(r.a)
		src := pagpolar.Source("")
		if res != nil {
			src, id = res.Operation.Source, res.Sale.ID
		}
		r.path(kind+"/lost-answer", r.opID(kind), src, err, "")
		r.rec.setStep(kind + "/replay")
		res, err = call(r.b)
		src = ""
		if res != nil {
			src = res.Operation.Source
			if id == "" {
				id = res.Sale.ID
			}
		}
		r.path(kind+"/replay", r.opID(kind), src, err, "")
		if id == "" {
			id = r.createdID(kind + "/lookup")
		}
		return id
	}
	charge("pix", func(c *pagpolar.Client) (*pagpolar.Charge, error) {
		return c.Payments.Pix(ctx, pagpolar.PixParams{OperationID: r.opID("pix"), OfferID: r.cfg.OfferID, ExternalReference: order, Customer: cust})
	})
	charge("boleto", func(c *pagpolar.Client) (*pagpolar.Charge, error) {
		return c.Payments.Boleto(ctx, pagpolar.BoletoParams{OperationID: r.opID("boleto"), OfferID: r.cfg.OfferID, ExternalReference: order, Customer: cust})
	})
	if r.cfg.CardToken != "" {
		r.cardSale = charge("card", func(c *pagpolar.Client) (*pagpolar.Charge, error) {
			return c.Payments.CreditCard(ctx, pagpolar.CreditCardParams{OperationID: r.opID("card"), OfferID: r.cfg.OfferID, ExternalReference: order, Customer: cust, CardToken: r.cfg.CardToken})
		})
	}
	if ctx.Err() != nil {
		return
	}

	// Refunds of the card sale: 1 centavo with the answer withheld, its
	// replay, one over what is left (refused), then the rest.
	if r.cardSale != "" {
		r.refunds(ctx)
	}
	if ctx.Err() != nil {
		return
	}

	// Subscription and plan changes (PIX: nothing is captured).
	subRef := r.ref("subscription")
	subscribe := func(c *pagpolar.Client) (*pagpolar.SubscriptionResult, error) {
		return c.Subscriptions.Subscribe(ctx, pagpolar.SubscribeParams{OperationID: r.opID("subscribe"), OfferID: r.cfg.PlanID,
			ExternalReference: subRef, Customer: cust, PaymentMethod: wire.MethodPix})
	}
	r.rec.setStep("subscribe/lookup")
	r.tapA.dropNextAnswer()
	sres, err := subscribe(r.a)
	src := pagpolar.Source("")
	if sres != nil {
		src, r.subID = sres.Operation.Source, sres.Subscription.ID
	}
	r.path("subscribe/lost-answer", r.opID("subscribe"), src, err, "")
	r.rec.setStep("subscribe/replay")
	sres, err = subscribe(r.b)
	src = ""
	if sres != nil {
		src = sres.Operation.Source
		if r.subID == "" {
			r.subID = sres.Subscription.ID
		}
	}
	r.path("subscribe/replay", r.opID("subscribe"), src, err, "")
	if r.subID == "" {
		r.subID = r.createdID("subscribe/lookup")
	}
	if r.subID != "" {
		change := func(c *pagpolar.Client, op, to string) (*pagpolar.PlanChangeResult, error) {
			return c.Subscriptions.ChangePlan(ctx, pagpolar.ChangePlanParams{OperationID: r.opID(op), SubscriptionID: r.subID, NewOfferID: to})
		}
		r.rec.setStep("plan-change/answer")
		pres, err := change(r.a, "plan-change-1", r.cfg.OtherPlanID)
		r.path("plan-change/answer", r.opID("plan-change-1"), sourceOf(pres), err, "")
		r.rec.setStep("plan-change/lookup")
		r.tapA.dropNextAnswer()
		pres, err = change(r.a, "plan-change-2", r.cfg.PlanID)
		r.path("plan-change/lost-answer", r.opID("plan-change-2"), sourceOf(pres), err, "")
		r.rec.setStep("plan-change/replay")
		pres, err = change(r.b, "plan-change-1", r.cfg.OtherPlanID)
		r.path("plan-change/replay", r.opID("plan-change-1"), sourceOf(pres), err, "")
	}
	if ctx.Err() != nil {
		return
	}
	r.reads(ctx, order, subRef)
	r.protocol(ctx)
	if r.cfg.CardToken != "" && ctx.Err() == nil {
		r.cleanup(ctx)
	}
}

// cardSales are the card sales the run's 2xx answers name (a replay too:
// one that names a sale not seen before made it), in order, and the card
// sale of the refunds if not among them.
func (r *runner) cardSales() []string {
	var ids []string
	for _, x := range r.rec.exchanges() {
		if _, kind := routeOf(x); kind != "card" || x.method != http.MethodPost || x.status < 200 || x.status >= 300 {
			continue
		}
		if obj, err := wire.ParseObject(x.body); err == nil {
			if id, _ := obj.Str(wire.FieldID); id != "" && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	if r.cardSale != "" && !slices.Contains(ids, r.cardSale) {
		ids = append(ids, r.cardSale)
	}
	return ids
}

// cleanup refunds what is left of every card sale the run created beyond
// the one its refunds exercised (an API that does not keep one key to one
// effect makes more), and of that one if its last refund was not made;
// unless a refund ended as the check cannot account for (stopRefunds).
// Then it reads each one back, for the notes.
func (r *runner) cleanup(ctx context.Context) {
	ids := r.cardSales()
	for i, id := range ids {
		if r.stopRefunds || id == r.cardSale && (r.refundedOK("refund/rest") || r.cardTotal <= r.refunded) {
			continue
		}
		r.rec.setStep("cleanup/sale")
		sale, err := r.a.Payments.GetSale(ctx, id)
		if err != nil {
			r.note(fmt.Sprintf("card sale %s could not be read to refund what is left of it (%s): refund it by hand", id, oneLine(err.Error())))
			continue
		}
		left := sale.Amount - sale.RefundedAmount
		if left <= 0 {
			continue
		}
		step := fmt.Sprintf("cleanup/refund-%d", i+1)
		r.rec.setStep(step)
		r.mu.Lock()
		r.cleanupSent[step] = left
		r.mu.Unlock()
		_, err = r.a.Refunds.Create(ctx, pagpolar.RefundParams{OperationID: r.opID(fmt.Sprintf("cleanup-refund-%d", i+1)), SaleID: id, Amount: left, Reason: "pagpolar check " + r.cfg.RunID})
		if err != nil {
			r.progress("cleanup: refund of %d centavos of card sale %s: %s", left, id, oneLine(err.Error()))
		}
	}
	r.rec.setStep("cleanup/read")
	for _, id := range ids {
		_, _ = r.raw(ctx, http.MethodGet, strings.Replace(wire.RouteSale, "{identifier}", url.PathEscape(id), 1), nil, nil, "")
	}
}

func sourceOf(p *pagpolar.PlanChangeResult) pagpolar.Source {
	if p == nil {
		return ""
	}
	return p.Operation.Source
}

func (r *runner) refunds(ctx context.Context) {
	r.rec.setStep("refund/sale-before")
	sale, err := r.a.Payments.GetSale(ctx, r.cardSale)
	if err != nil {
		r.progress("refunds: not made: GET the card sale: %v", err)
		return
	}
	r.cardTotal = sale.Amount
	salePath := strings.Replace(wire.RouteSale, "{identifier}", url.PathEscape(r.cardSale), 1)
	refund := func(c *pagpolar.Client, op string, amount int64) (*pagpolar.RefundResult, error) {
		return c.Refunds.Create(ctx, pagpolar.RefundParams{OperationID: r.opID(op), SaleID: r.cardSale, Amount: amount, Reason: "pagpolar check " + r.cfg.RunID})
	}
	src := func(res *pagpolar.RefundResult) pagpolar.Source {
		if res == nil {
			return ""
		}
		return res.Operation.Source
	}
	r.rec.setStep("refund/lookup")
	r.tapA.dropNextAnswer()
	res, err := refund(r.a, "refund-1", 1)
	r.path("refund/lost-answer", r.opID("refund-1"), src(res), err, "")
	r.rec.setStep("refund/replay")
	res, err = refund(r.b, "refund-1", 1)
	r.path("refund/replay", r.opID("refund-1"), src(res), err, "")
	if r.refundedOK("refund/lookup") {
		r.refunded++
		r.rec.setStep("refund/sale-after-partial")
		_, _ = r.raw(ctx, http.MethodGet, salePath, nil, nil, "")
	}
	if r.cardTotal <= r.refunded {
		return
	}
	left := r.cardTotal - r.refunded
	r.rest = left
	r.rec.setStep("refund/over")
	res, err = refund(r.a, "refund-over", left+1)
	expect := "refused"
	r.path("refund/refused", r.opID("refund-over"), src(res), err, expect)
	if why := overRefused(r.rec.exchanges(), "refund/over"); why != "" {
		// It may have refunded: another refund could take more than the
		// sale had. Nothing more is refunded by the check.
		r.stopRefunds = true
		r.note(fmt.Sprintf("the refund of %d centavos (1 over what was left) of card sale %s was not refused (%s): the check sent no more refunds; check the sale's refunds and refund what is left by hand", left+1, r.cardSale, why))
		return
	}
	r.rec.setStep("refund/rest")
	res, err = refund(r.a, "refund-rest", left)
	r.path("refund/answer", r.opID("refund-rest"), src(res), err, "")
	if r.refundedOK("refund/rest") {
		r.refunded += left
	}
}

// overRefused says why the step's over-refund was not seen refused ("":
// it was). Refused is every answer to its POSTs a 4xx other than 409 and
// 429 (which say nothing of the refund), at least one of them, and none a
// 2xx, a 5xx or missing.
func overRefused(xs []exchange, step string) string {
	refused := 0
	for _, x := range xs {
		if x.step != step || x.method != http.MethodPost {
			continue
		}
		switch {
		case x.status == 0:
			return "a send got no answer"
		case x.status >= 200 && x.status < 300:
			return fmt.Sprintf("answered %d", x.status)
		case x.status == http.StatusConflict || x.status == http.StatusTooManyRequests:
		case x.status >= 400 && x.status < 500:
			refused++
		default:
			return fmt.Sprintf("answered %d", x.status)
		}
	}
	if refused == 0 {
		return "no refusal was seen"
	}
	return ""
}

// note adds a note for a person.
func (r *runner) note(s string) {
	r.mu.Lock()
	r.rep.Notes = append(r.rep.Notes, s)
	r.mu.Unlock()
	r.progress("note: %s", s)
}

// refundedOK says whether the step's POST /refunds created a refund (read
// raw: whatever the SDK made of it).
func (r *runner) refundedOK(step string) bool {
	for _, x := range r.rec.exchanges() {
		if x.step == step && x.method == http.MethodPost && x.status >= 200 && x.status < 300 && !x.replayed() {
			return true
		}
	}
	return false
}

// createdID is the identifier in the step's first fresh 2xx POST answer.
func (r *runner) createdID(step string) string {
	for _, x := range r.rec.exchanges() {
		if x.step == step && x.method == http.MethodPost && x.status >= 200 && x.status < 300 {
			if o, err := wire.ParseObject(x.body); err == nil {
				id, _ := o.Str(wire.FieldID)
				return id
			}
		}
	}
	return ""
}

// reads are the read routes, raw: every page of each list.
func (r *runner) reads(ctx context.Context, order, subRef string) {
	r.rec.setStep("reads")
	r.list(ctx, wire.RouteSales, url.Values{"external_reference": {order}})
	for _, step := range []string{"pix/lookup", "boleto/lookup", "card/lookup"} {
		if id := r.createdID(step); id != "" {
			_, _ = r.raw(ctx, http.MethodGet, strings.Replace(wire.RouteSale, "{identifier}", url.PathEscape(id), 1), nil, nil, "")
		}
	}
	if r.cardSale != "" {
		r.list(ctx, wire.RouteRefunds, url.Values{"sale_identifier": {r.cardSale}})
	}
	if r.subID != "" {
		_, _ = r.raw(ctx, http.MethodGet, strings.Replace(wire.RouteSubscription, "{id}", url.PathEscape(r.subID), 1), nil, nil, "")
	}
	r.list(ctx, wire.RouteSubscriptions, url.Values{"external_reference": {subRef}})
	r.list(ctx, wire.RouteSales, url.Values{"external_reference": {subRef}})
}

// list reads every page of a list the way the SDK would follow it
// (wire.ParseList), at most 20 pages.
func (r *runner) list(ctx context.Context, path string, q url.Values) {
	x, err := r.raw(ctx, http.MethodGet, path, q, nil, "")
	for range 20 {
		if err != nil || x.status != http.StatusOK {
			return
		}
		page, perr := wire.ParseList(x.body, x.header)
		if perr != nil || page.Next.Done || page.Next.Problem != "" {
			return
		}
		switch {
		case page.Next.URL != "":
			u, uerr := url.Parse(page.Next.URL)
			if uerr != nil {
				return
			}
			if !u.IsAbs() {
				u = r.base.ResolveReference(u)
			}
			if u.Host != r.base.Host {
				return
			}
			x, err = r.raw(ctx, http.MethodGet, strings.TrimPrefix(u.Path, strings.TrimRight(r.base.Path, "/")), u.Query(), nil, "")
		default:
			nq := url.Values{}
			for k, v := range q {
				nq[k] = v
			}
			for k, v := range page.Next.Query {
				nq[k] = v
			}
			x, err = r.raw(ctx, http.MethodGet, path, nq, nil, "")
		}
	}
}

// protocol: a 400 for a missing key, a 404 error body, and a key in
// processing (409) raced with three concurrent sends of one new key.
func (r *runner) protocol(ctx context.Context) {
	cust := customer()
	body := wire.PixRequest{OfferIdentifier: r.cfg.OfferID, ExternalReference: r.ref("no-key"),
		Customer: wire.Customer{Name: cust.Name, Email: cust.Email, Document: cust.Document, Phone: cust.Phone}}
	r.rec.setStep("missing-key")
	_, _ = r.raw(ctx, http.MethodPost, wire.RoutePix, nil, body, "")
	// A 400 alone does not prove nothing was created: look for the sale.
	r.rec.setStep("missing-key/lookup")
	_, _ = r.raw(ctx, http.MethodGet, wire.RouteSales, url.Values{"external_reference": {body.ExternalReference}}, nil, "")
	r.rec.setStep("not-found")
	_, _ = r.raw(ctx, http.MethodGet, strings.Replace(wire.RouteSale, "{identifier}", r.ref("no-such-sale"), 1), nil, nil, "")

	r.rec.setStep("in-progress")
	body.ExternalReference = r.ref("in-progress")
	key := r.prefix + "in-progress-key"
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { _, _ = r.raw(ctx, http.MethodPost, wire.RoutePix, nil, body, key) })
	}
	wg.Wait()
}
