package exampleenv

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// The variables Connect reads: every one is printed by `pagpolar sim`.
const (
	EnvBaseURL     = "PAGPOLAR_BASE_URL"
	EnvCredential  = "PAGPOLAR_CREDENTIAL_ID"
	EnvToken       = "PAGPOLAR_TOKEN"
	EnvOfferID     = "PAGPOLAR_OFFER_ID"
	EnvPlanID      = "PAGPOLAR_PLAN_ID"
	EnvOtherPlanID = "PAGPOLAR_OTHER_PLAN_ID"
	EnvFPSecret    = "PAGPOLAR_FP_SECRET"
)

// Vars lists every variable Connect reads, for tests that check the sim
// prints them all.
var Vars = []string{EnvBaseURL, EnvCredential, EnvToken, EnvOfferID, EnvPlanID, EnvOtherPlanID, EnvFPSecret}

// The sim's offers, the defaults of PAGPOLAR_OFFER_ID, PAGPOLAR_PLAN_ID and
// PAGPOLAR_OTHER_PLAN_ID.
const (
	SimOfferID     = "offer-basic"
	SimPlanID      = "plan-basic"
	SimOtherPlanID = "plan-pro"
)

// LogOutput is where the examples' logger writes (tests: io.Discard or a
// buffer).
var LogOutput io.Writer = os.Stderr

// Deadline is how long an example may take in all: every call it makes
// runs under it.
const Deadline = 2 * time.Minute

// API is where an example sends its requests.
type API struct {
	BaseURL      string
	CredentialID string
	Token        pagpolar.TokenSource
	Fake         *pagpolartest.Server // nil against another API
	OfferID      string
	PlanID       string
	OtherPlanID  string
	Log          *slog.Logger

	policy   pagpolar.RetryPolicy // shortened windows against the in-process fake
	fpSecret []byte
}

// Connect returns the API named by the environment, or starts the
// in-process fake, and writes a banner saying which to banner. Call the
// returned function when done.
func Connect(banner io.Writer) (*API, func(), error) { return ConnectWith(banner) }

// ConnectWith is Connect with options for the in-process fake (ignored
// against another API), e.g. pagpolartest.WithAsync.
func ConnectWith(banner io.Writer, fakeOpts ...pagpolartest.Option) (*API, func(), error) {
	log := slog.New(slog.NewTextHandler(LogOutput, &slog.HandlerOptions{Level: slog.LevelDebug}))
	api := &API{
		OfferID:     envOr(EnvOfferID, SimOfferID),
		PlanID:      envOr(EnvPlanID, SimPlanID),
		OtherPlanID: envOr(EnvOtherPlanID, SimOtherPlanID),
		Log:         log,
	}
	if s := os.Getenv(EnvFPSecret); s != "" {
		api.fpSecret = []byte(s)
	}
	set, unset := []string{}, []string{}
	for _, k := range []string{EnvBaseURL, EnvCredential, EnvToken} {
		if os.Getenv(k) != "" {
			set = append(set, k)
		} else {
			unset = append(unset, k)
		}
	}
	switch {
	case len(set) == 3:
		api.BaseURL, api.CredentialID = os.Getenv(EnvBaseURL), os.Getenv(EnvCredential)
		api.Token = pagpolar.StaticToken(os.Getenv(EnvToken))
		fmt.Fprintf(banner, "== using the API at %s (%s), because %s are set; unset them to use an in-process fake\n",
			api.BaseURL, describe(api.BaseURL), strings.Join(set, ", "))
		return api, func() {}, nil
	case len(set) > 0:
		return nil, nil, fmt.Errorf("exampleenv: %s set but %s not: set all three (as `pagpolar sim` prints them) or none (an in-process fake)",
			strings.Join(set, ", "), strings.Join(unset, ", "))
	}
	const window = 300 * time.Millisecond
	srv := pagpolartest.NewUnstartedServer(append([]pagpolartest.Option{pagpolartest.WithProcessingWindow(window)}, fakeOpts...)...)
	if err := srv.Start(); err != nil {
		return nil, nil, err
	}
	api.BaseURL, api.CredentialID, api.Token, api.Fake = srv.URL, srv.CredentialID, pagpolar.StaticToken(srv.Token), srv
	// The fake's in-processing window is 300 ms instead of 60 s; the
	// client must know, or it would wait a real minute to trust a lookup.
	api.policy = pagpolar.RetryPolicy{ProcessingWindow: window, WindowMargin: 50 * time.Millisecond, SettleDelay: 50 * time.Millisecond,
		LookupInterval: 20 * time.Millisecond, MaxRetryAfter: 50 * time.Millisecond}
	fmt.Fprintf(banner, "== using an in-process fake PagPolar at %s (set %s, %s and %s, e.g. from `pagpolar sim`, to use another)\n",
		srv.URL, EnvBaseURL, EnvCredential, EnvToken)
	return api, srv.Close, nil
}

// describe says what kind of API a base URL names.
func describe(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return "an unparsable URL"
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return "on this machine: pagpolar sim?"
	}
	return "a REAL API: charges made here are real for that account"
}

// Options are the client options every example passes: the base URL, the
// logger (at debug, so that each step the SDK takes is shown), the
// fingerprint secret if set, and against the in-process fake its
// shortened windows. The store is the example's own choice.
func (a *API) Options() []pagpolar.Option {
	opts := []pagpolar.Option{pagpolar.WithBaseURL(a.BaseURL), pagpolar.WithLogger(a.Log)}
	if a.Fake != nil {
		opts = append(opts, pagpolar.WithRetryPolicy(a.policy))
	}
	if a.fpSecret != nil {
		opts = append(opts, pagpolar.WithFingerprintSecret(a.fpSecret))
	}
	return opts
}

// Ref returns base made unique to this run ("PEDIDO-1234-20261201T103000-3f9a"),
// or fixed when not empty: an example run twice against one API must not
// reuse an order code the first run charged with other parameters.
func Ref(base, fixed string) string {
	if fixed != "" {
		return fixed
	}
	var b [2]byte
	_, _ = rand.Read(b[:])
	return base + "-" + time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b[:])
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
