package apicheck

// What stops a run at once: the API unreachable, the credential or base URL
// wrong (Probe, the preflight), or a money call refused for the check's own
// configuration (an offer that does not exist).

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// Errors of Probe and of Run's preflight; each says the cause in its text.
var (
	// ErrUnreachable: no answer from the base URL's host (refused, timed
	// out, no such host).
	ErrUnreachable = errors.New("apicheck: the API cannot be reached")
	// ErrCredentialRefused: the API answered 401 or 403.
	ErrCredentialRefused = errors.New("apicheck: the credential was refused")
	// ErrNotTheAPI: what answered is not the PagPolar API (a 404 or 405 in
	// another shape than the API's errors: usually a base URL without /v1).
	ErrNotTheAPI = errors.New("apicheck: the base URL does not answer as the API")
	// ErrConfig is wrapped by Run's error when the API refused one of the
	// check's first money calls with a 4xx other than 409 and 429: an offer
	// or plan that does not exist, a card token it does not take. The run
	// stops at once; the error holds the API's reason.
	ErrConfig = errors.New("apicheck: the API refused the check's configuration")
)

// ProbeConfig names the API Probe reads.
type ProbeConfig struct {
	BaseURL string
	Token   pagpolar.TokenSource
	// HTTPClient's transport carries the request (default: http.DefaultTransport).
	HTTPClient *http.Client
}

// Probe proves a base URL and a credential with one read (GET
// /sales?external_reference=pagpolar-probe, which creates nothing), as Run
// does before its first call. Its error wraps ErrUnreachable,
// ErrCredentialRefused or ErrNotTheAPI and says why in words an operator
// can act on; nil means the API answered as itself.
func Probe(ctx context.Context, cfg ProbeConfig) error {
	base, err := url.Parse(strings.TrimRight(cfg.BaseURL, "/"))
	if err != nil || base.Host == "" {
		return fmt.Errorf("%w: the base URL is not a URL with a host", ErrNotTheAPI)
	}
	rt := http.DefaultTransport
	if cfg.HTTPClient != nil && cfg.HTTPClient.Transport != nil {
		rt = cfg.HTTPClient.Transport
	}
	r := &runner{cfg: Config{Token: cfg.Token}, base: base, rec: &recorder{base: rt, basePath: base.Path, rd: newRedactor()}, prefix: "pagpolar-"}
	r.rawTap = &tap{rec: r.rec}
	return r.preflight(ctx)
}

// preflight reads one list: it proves the base URL and the credential
// before anything is charged.
func (r *runner) preflight(ctx context.Context) error {
	r.rec.setStep("preflight")
	x, err := r.raw(ctx, http.MethodGet, wire.RouteSales, url.Values{"external_reference": {r.ref("preflight")}}, nil, "")
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL and its query
		}
		return fmt.Errorf("%w: cannot reach %s (GET %s%s: %s): is the host right, and the API up?", ErrUnreachable, r.base.Host, displayURL(r.base), wire.RouteSales, r.rec.rd.scrub(err.Error()))
	}
	switch {
	case x.status == http.StatusUnauthorized || x.status == http.StatusForbidden:
		return fmt.Errorf("%w: GET %s answered %d: the credential was refused; check PAGPOLAR_CREDENTIAL_ID and PAGPOLAR_TOKEN (and that they are for %s)", ErrCredentialRefused, wire.RouteSales, x.status, displayURL(r.base))
	case x.status == http.StatusNotFound || x.status == http.StatusMethodNotAllowed:
		if _, _, own := wire.APIError(x.header.Get("Content-Type"), x.body); !own {
			return fmt.Errorf("%w: GET %s%s answered %d, not as the API: the base URL must end in /v1", ErrNotTheAPI, displayURL(r.base), wire.RouteSales, x.status)
		}
	}
	return nil
}

// configSteps are the first sends of each money call, and what of the
// configuration each depends on: a refusal there is the configuration's.
var configSteps = map[string]string{
	"pix/lookup":         "the offer (-offer, $PAGPOLAR_OFFER_ID)",
	"boleto/lookup":      "the offer (-offer, $PAGPOLAR_OFFER_ID)",
	"card/lookup":        "the offer or the card token (-offer, -card-token)",
	"subscribe/lookup":   "the plan (-plan, $PAGPOLAR_PLAN_ID)",
	"plan-change/answer": "the other plan (-other-plan, $PAGPOLAR_OTHER_PLAN_ID)",
}

// refusals stops a run at the first configuration refusal.
type refusals struct {
	stop context.CancelCauseFunc
	mu   sync.Mutex
	err  error
}

// seen is the recorder's hook: it is called with every exchange.
func (f *refusals) seen(x exchange, rd *redactor) {
	what, ok := configSteps[x.step]
	if !ok || x.method != http.MethodPost || x.status < 400 || x.status >= 500 || x.status == http.StatusConflict || x.status == http.StatusTooManyRequests {
		return
	}
	code, msg, own := wire.APIError(x.header.Get("Content-Type"), x.body)
	reason := msg
	if code != "" {
		reason = code + ": " + msg
	}
	if !own || reason == "" {
		reason = "(not in the API's error shape)"
	}
	err := fmt.Errorf("%w: POST %s answered %d: %s; check %s", ErrConfig, x.path, x.status, rd.scrub(oneLine(reason)), what)
	f.mu.Lock()
	first := f.err == nil
	if first {
		f.err = err
	}
	f.mu.Unlock()
	if first {
		f.stop(err)
	}
}

func (f *refusals) first() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}
