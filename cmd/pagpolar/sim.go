package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// simFault is a fault kind the sim injects with a per-request probability.
type simFault struct {
	flag   string
	usage  string
	action pagpolartest.FaultAction
	rate   float64
	set    bool // given on the command line (overrides -fault-rate)
}

// simFaults lists the fault kinds in the order they are injected: first the
// ones met before processing, then those met at processing, the decline last
// (it only matches card payments).
func simFaults() []*simFault {
	return []*simFault{
		{flag: "drop-before", action: pagpolartest.FaultDropBeforeProcessing, usage: "drop the connection before processing (nothing processed)"},
		{flag: "gateway", action: pagpolartest.FaultGateway, usage: "an intermediary's HTML 502/503/504 (see -gateway-status); nothing processed"},
		{flag: "throttle", action: pagpolartest.FaultRateLimit, usage: "429 with Retry-After; nothing processed"},
		{flag: "unavailable", action: pagpolartest.FaultUnavailable, usage: "the API's own 503 with Retry-After; nothing processed"},
		{flag: "slow", action: pagpolartest.FaultLatency, usage: "add -slow-delay, then process normally"},
		{flag: "drop-after-commit", action: pagpolartest.FaultCommitThenDrop, usage: "commit, keep the answer for replay, drop the connection"},
		{flag: "drop-release", action: pagpolartest.FaultCommitDropRelease, usage: "commit, release the key, drop the connection"},
		{flag: "commit-500", action: pagpolartest.FaultCommitThen500, usage: "commit, then answer 500 (key released)"},
		{flag: "commit-500-after", action: pagpolartest.FaultCommitThen500After, usage: "commit, answer 500 after -commit-500-delay (key in processing meanwhile)"},
		{flag: "error-500", action: pagpolartest.Fault500NoCommit, usage: "answer 500 without committing (key released)"},
		{flag: "hold", action: pagpolartest.FaultHold, usage: "hold processing for -hold-delay (same-key requests get 409)"},
		{flag: "lookup-lag", action: pagpolartest.FaultLookupLag, usage: "hide what the request creates from list lookups for -lookup-lag-delay"},
		{flag: "gateway-after-commit", action: pagpolartest.FaultGatewayAfterCommit, usage: "commit, then an intermediary's HTML error (key released)"},
		{flag: "decline", action: pagpolartest.FaultDecline, usage: "decline card payments (402, declined sale recorded)"},
	}
}

// simConfig is the parsed command line of `pagpolar sim`.
type simConfig struct {
	addr             string
	allowRemote      bool
	processingWindow time.Duration
	replayWindow     time.Duration
	rateLimit        int
	seed             int64
	latency          time.Duration
	noSubLookup      bool
	shapes           []pagpolartest.Shape
	tokens           int
	credentials      int
	shutdownTimeout  time.Duration
	verbose          bool
	webhookURL       string // deliver the fake's business events here, as PagPolar's webhooks
	async            bool   // decide card sales, refunds and plan changes after answering
	asyncAfter       time.Duration
	asyncCardStatus  string
	asyncDeclineEach int

	faultRate      float64
	faults         []*simFault
	gatewayStatus  int
	slowDelay      time.Duration
	commit500Delay time.Duration
	holdDelay      time.Duration
	lookupLagDelay time.Duration
}

// parseSimFlags parses sim's command line; on -h it writes the usage to
// helpOut and returns flag.ErrHelp. It prints nothing else: the caller
// prints the error.
func parseSimFlags(args []string, helpOut io.Writer) (*simConfig, error) {
	cfg := &simConfig{faults: simFaults()}
	fs := flag.NewFlagSet("pagpolar sim", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	usage := func() {
		fmt.Fprintf(helpOut, "usage: pagpolar sim [flags]\n\n"+
			"Runs the fake PagPolar API and prints, as NAME=value lines on stdout, every\n"+
			"variable the examples, the README's quick start and the staging test read:\n"+
			"PAGPOLAR_BASE_URL, PAGPOLAR_CREDENTIAL_ID, PAGPOLAR_TOKEN, PAGPOLAR_OFFER_ID,\n"+
			"PAGPOLAR_PLAN_ID, PAGPOLAR_OTHER_PLAN_ID, PAGPOLAR_FP_SECRET. For instance\n"+
			"\"pagpolar sim | tee sim.env\" here, and \"set -a; . ./sim.env; set +a\" in the shell\n"+
			"that runs the examples.\n\n"+
			"Fault rates are per-request probabilities among the money requests that reach\n"+
			"the fault's stage; the same -seed and request order give the same faults.\n"+
			"-async makes it decide after answering, as acquirers with antifraud do: card\n"+
			"sales answered pending, refunds requested, plan changes scheduled, each decided\n"+
			"-async-after later (TRANSACTION_PAID/DECLINED, TRANSACTION_REFUNDED,\n"+
			"SUBSCRIPTION_PLAN_CHANGED to -webhook-url).\n"+
			"SIGINT/SIGTERM stop it.\n\nflags:\n")
		fs.SetOutput(helpOut)
		fs.PrintDefaults()
	}
	fs.Usage = func() {}
	fs.StringVar(&cfg.addr, "addr", "127.0.0.1:8080", "listen address (host:port; port 0 picks a free one)")
	fs.BoolVar(&cfg.allowRemote, "allow-remote", false, "allow listening on a non-loopback address")
	fs.DurationVar(&cfg.processingWindow, "processing-window", 60*time.Second, "how long a key stays in processing (409)")
	fs.DurationVar(&cfg.replayWindow, "replay-window", 24*time.Hour, "how long a 2xx is replayed for its key")
	fs.IntVar(&cfg.rateLimit, "rate-limit", 0, "money requests per minute per credential (0: unlimited)")
	fs.Int64Var(&cfg.seed, "seed", 1, "seed of the probabilistic faults")
	fs.DurationVar(&cfg.latency, "latency", 0, "base latency added to every request")
	fs.BoolVar(&cfg.noSubLookup, "no-subscription-lookup", false, "GET /subscriptions?external_reference= answers 404")
	fs.Func("shapes", "answer in these shapes (comma list): "+shapeNames(), func(v string) error {
		sh, err := pagpolartest.ParseShapes(v)
		cfg.shapes = sh
		return err
	})
	fs.IntVar(&cfg.tokens, "tokens", 0, "extra access tokens of the default credential to print")
	fs.IntVar(&cfg.credentials, "credentials", 0, "extra credentials (one token each) to print")
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", 5*time.Second, "how long a graceful stop waits for requests in flight")
	fs.BoolVar(&cfg.verbose, "v", false, "log every request on stderr")
	fs.StringVar(&cfg.webhookURL, "webhook-url", "", "deliver every sale's and subscription's events to this URL as PagPolar's webhooks, "+
		"with Authorization: Bearer $"+envWebhookToken+" (a fresh token, printed as "+envWebhookToken+"=..., when unset)")
	fs.BoolVar(&cfg.async, "async", false, "decide after answering, as acquirers with antifraud do: card sales answered "+
		"pending (see -async-card-status), refunds answered requested, plan changes answered scheduled (the subscription "+
		"stays on the old plan, next_offer_identifier shows the new one); each is decided -async-after later with its event")
	fs.DurationVar(&cfg.asyncAfter, "async-after", 2*time.Second, "with -async: how long after its answer an effect is decided")
	fs.StringVar(&cfg.asyncCardStatus, "async-card-status", "pending", "with -async: status of an undecided card sale (pending or in_analysis)")
	fs.IntVar(&cfg.asyncDeclineEach, "async-decline-every", 0, "with -async: about one in N card sales ends declined, by -seed, "+
		"external reference and card token (0: none; tokens starting tok_decline always end declined)")
	fs.Float64Var(&cfg.faultRate, "fault-rate", 0, "total fault rate split evenly among the kinds not set by their own flag")
	for _, f := range cfg.faults {
		fs.Float64Var(&f.rate, f.flag, 0, "rate: "+f.usage)
	}
	fs.IntVar(&cfg.gatewayStatus, "gateway-status", 502, "status of the intermediary's errors: 502, 503 or 504")
	fs.DurationVar(&cfg.slowDelay, "slow-delay", 2*time.Second, "delay of -slow")
	fs.DurationVar(&cfg.commit500Delay, "commit-500-delay", 5*time.Second, "delay of -commit-500-after")
	fs.DurationVar(&cfg.holdDelay, "hold-delay", 5*time.Second, "delay of -hold")
	fs.DurationVar(&cfg.lookupLagDelay, "lookup-lag-delay", 5*time.Second, "delay of -lookup-lag")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage()
		}
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	fs.Visit(func(fl *flag.Flag) {
		for _, f := range cfg.faults {
			if f.flag == fl.Name {
				f.set = true
			}
		}
	})
	if err := cfg.check(); err != nil {
		return nil, err
	}
	return cfg, nil
}

func (cfg *simConfig) check() error {
	host, _, err := net.SplitHostPort(cfg.addr)
	if err != nil {
		return fmt.Errorf("-addr %q: %w", cfg.addr, err)
	}
	if !cfg.allowRemote && !isLoopback(host) {
		return fmt.Errorf("-addr %q is not a loopback address; the fake accepts any client, pass -allow-remote to expose it", cfg.addr)
	}
	switch {
	case cfg.processingWindow <= 0:
		return errors.New("-processing-window must be positive")
	case cfg.replayWindow <= 0:
		return errors.New("-replay-window must be positive")
	case cfg.rateLimit < 0:
		return errors.New("-rate-limit must not be negative")
	case cfg.latency < 0 || cfg.slowDelay < 0 || cfg.commit500Delay < 0 || cfg.holdDelay < 0 || cfg.lookupLagDelay < 0:
		return errors.New("delays must not be negative")
	case cfg.asyncAfter <= 0:
		return errors.New("-async-after must be positive")
	case cfg.asyncCardStatus == "":
		return errors.New("-async-card-status must not be empty")
	case cfg.asyncDeclineEach < 0:
		return errors.New("-async-decline-every must not be negative")
	case cfg.tokens < 0 || cfg.credentials < 0:
		return errors.New("-tokens and -credentials must not be negative")
	case cfg.gatewayStatus != 502 && cfg.gatewayStatus != 503 && cfg.gatewayStatus != 504:
		return fmt.Errorf("-gateway-status %d: want 502, 503 or 504", cfg.gatewayStatus)
	case cfg.faultRate < 0 || cfg.faultRate > 1:
		return fmt.Errorf("-fault-rate %v is outside [0, 1]", cfg.faultRate)
	}
	if cfg.webhookURL != "" {
		u, err := url.Parse(cfg.webhookURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("-webhook-url %q: want an http:// or https:// URL with a host", cfg.webhookURL)
		}
	}
	unset := 0
	for _, f := range cfg.faults {
		if f.rate < 0 || f.rate > 1 {
			return fmt.Errorf("-%s %v is outside [0, 1]", f.flag, f.rate)
		}
		if !f.set {
			unset++
		}
	}
	for _, f := range cfg.faults {
		if !f.set && unset > 0 {
			f.rate = cfg.faultRate / float64(unset)
		}
	}
	// The kinds of one stage share its requests: their rates must add up
	// to at most 1.
	for _, front := range []bool{true, false} {
		sum := 0.0
		for _, f := range cfg.faults {
			if isFront(f.action) == front {
				sum += f.rate
			}
		}
		if sum > 1+1e-9 {
			return fmt.Errorf("fault rates of one stage add up to %.3f, more than 1", sum)
		}
	}
	return nil
}

// asyncOptions is what -async asks of the fake.
func (cfg *simConfig) asyncOptions() pagpolartest.Async {
	return pagpolartest.Async{Cards: true, CardStatus: cfg.asyncCardStatus, Refunds: true, PlanChanges: true,
		DecideAfter: cfg.asyncAfter, DeclineEvery: cfg.asyncDeclineEach}
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// isFront reports whether the action is met before processing (see
// pagpolartest.Fault).
func isFront(a pagpolartest.FaultAction) bool {
	switch a {
	case pagpolartest.FaultDropBeforeProcessing, pagpolartest.FaultGateway, pagpolartest.FaultRateLimit,
		pagpolartest.FaultUnavailable, pagpolartest.FaultLatency:
		return true
	}
	return false
}

// faultsToInject turns the absolute rates into injected faults. The server
// checks faults in order and the first match applies, so each fault's coin
// is conditional on the earlier ones of its stage not applying:
// p_i = rate_i / (1 - sum of the earlier rates).
func (cfg *simConfig) faultsToInject() []pagpolartest.Fault {
	var out []pagpolartest.Fault
	taken := map[bool]float64{}
	for _, f := range cfg.faults {
		if f.rate <= 0 {
			continue
		}
		front := isFront(f.action)
		left := 1 - taken[front]
		p := 1.0
		if left > 1e-12 {
			p = f.rate / left
		}
		if p > 1 {
			p = 1
		}
		taken[front] += f.rate
		fault := pagpolartest.Fault{Action: f.action, Probability: p}
		switch f.action {
		case pagpolartest.FaultGateway, pagpolartest.FaultGatewayAfterCommit:
			fault.Status = cfg.gatewayStatus
		case pagpolartest.FaultLatency:
			fault.Delay = cfg.slowDelay
		case pagpolartest.FaultCommitThen500After:
			fault.Delay = cfg.commit500Delay
		case pagpolartest.FaultHold:
			fault.Delay = cfg.holdDelay
		case pagpolartest.FaultLookupLag:
			fault.Delay = cfg.lookupLagDelay
		}
		out = append(out, fault)
	}
	return out
}

// runSim is `pagpolar sim`.
func runSim(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseSimFlags(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "pagpolar sim: %v\nRun \"pagpolar sim -h\" for the flags.\n", err)
		return 2
	}
	opts := []pagpolartest.Option{
		pagpolartest.WithProcessingWindow(cfg.processingWindow),
		pagpolartest.WithReplayWindow(cfg.replayWindow),
		pagpolartest.WithRateLimit(cfg.rateLimit),
		pagpolartest.WithSeed(cfg.seed),
		pagpolartest.WithLatency(cfg.latency),
	}
	if cfg.noSubLookup {
		opts = append(opts, pagpolartest.WithoutSubscriptionLookup())
	}
	opts = append(opts, pagpolartest.WithShapes(cfg.shapes...))
	if cfg.async {
		opts = append(opts, pagpolartest.WithAsync(cfg.asyncOptions()))
	}
	s := pagpolartest.NewUnstartedServer(opts...)
	for _, f := range cfg.faultsToInject() {
		s.Inject(f)
	}
	var logMu sync.Mutex // stderr is shared by the request log and the status lines
	if cfg.verbose {
		s.OnRequest(func(l pagpolartest.RequestLog) {
			status := strconv.Itoa(l.Status)
			if l.Dropped {
				status = "dropped"
			}
			logMu.Lock()
			defer logMu.Unlock()
			fmt.Fprintf(stderr, "%s %s %s key=%q status=%s replayed=%v fault=%q\n",
				l.At.Format(time.RFC3339Nano), l.Method, l.Path, l.Key, status, l.Replayed, l.Fault)
		})
	}
	// The webhook token comes from the environment (a flag's value would
	// show in ps), or is made here and printed with the other variables.
	webhookToken, printToken := os.Getenv(envWebhookToken), false
	var sender *pagpolartest.WebhookSender
	if cfg.webhookURL != "" {
		if webhookToken == "" {
			webhookToken, printToken = "whk_"+randomSecret(), true
		}
		logf := func(format string, args ...any) {
			logMu.Lock()
			defer logMu.Unlock()
			fmt.Fprintf(stderr, format, args...)
		}
		sender = pagpolartest.NewWebhookSenderFor(s, cfg.webhookURL, webhookToken,
			pagpolartest.WithSenderHTTPClient(&http.Client{Transport: webhookLog{next: http.DefaultTransport, logf: logf}}))
		defer sender.Close()
	}
	if err := s.StartAddr(cfg.addr); err != nil {
		fmt.Fprintf(stderr, "pagpolar sim: %v\n", err)
		return 1
	}

	// NAME=value lines, easy to read from any language.
	// PAGPOLAR_BASE_URL is the name the examples and `pagpolar ops settle`
	// read; PAGPOLAR_URL is kept for scripts written against earlier output.
	fmt.Fprintf(stdout, "PAGPOLAR_URL=%s\nPAGPOLAR_BASE_URL=%s\nPAGPOLAR_CREDENTIAL_ID=%s\nPAGPOLAR_TOKEN=%s\n", s.URL, s.URL, s.CredentialID, s.Token)
	fmt.Fprintln(stdout, "PAGPOLAR_OFFERS=offer-basic:9990,offer-premium:19990,plan-basic:2990,plan-pro:5990")
	// What the README's quick start, the examples and the staging test read.
	fmt.Fprintln(stdout, "PAGPOLAR_OFFER_ID=offer-basic\nPAGPOLAR_PLAN_ID=plan-basic\nPAGPOLAR_OTHER_PLAN_ID=plan-pro")
	fmt.Fprintf(stdout, "PAGPOLAR_FP_SECRET=%s\n", randomSecret()) // the client's fingerprint secret, for trying the SDK; in production, your own
	for i := 1; i <= cfg.tokens; i++ {
		fmt.Fprintf(stdout, "PAGPOLAR_TOKEN_%d=%s\n", i, s.AddToken(s.CredentialID))
	}
	for i := 1; i <= cfg.credentials; i++ {
		cred := fmt.Sprintf("cred_extra_%d", i)
		fmt.Fprintf(stdout, "PAGPOLAR_CREDENTIAL_%d=%s\nPAGPOLAR_CREDENTIAL_%d_TOKEN=%s\n", i, cred, i, s.AddToken(cred))
	}
	if printToken {
		fmt.Fprintf(stdout, "%s=%s\n", envWebhookToken, webhookToken)
	}
	fmt.Fprintln(stdout, "PAGPOLAR_READY=1")
	logMu.Lock()
	kinds := "kinds"
	if n := len(cfg.faultsToInject()); n == 1 {
		kinds = "kind"
	}
	fmt.Fprintf(stderr, "pagpolar sim: serving %s (%d fault %s injected); SIGINT or SIGTERM stops it\n", s.URL, len(cfg.faultsToInject()), kinds)
	if cfg.async {
		fmt.Fprintf(stderr, "pagpolar sim: deciding card sales, refunds and plan changes %s after answering\n", cfg.asyncAfter)
	}
	if sender != nil {
		fmt.Fprintf(stderr, "pagpolar sim: delivering webhooks to %s (failed deliveries are sent again %s later, %d attempts)\n",
			cfg.webhookURL, pagpolartest.DefaultWebhookRetryDelay, pagpolartest.DefaultWebhookAttempts)
	}
	logMu.Unlock()

	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancel()
	err = s.Shutdown(sctx)
	if sender != nil {
		// Deliveries under way end; resends not yet due are dropped.
		_ = sender.Flush(sctx)
		sender.Close()
	}
	logMu.Lock()
	defer logMu.Unlock()
	if err != nil {
		fmt.Fprintf(stderr, "pagpolar sim: stopped; requests still in flight after %s were cut: %v\n", cfg.shutdownTimeout, err)
		return 0
	}
	fmt.Fprintln(stderr, "pagpolar sim: stopped")
	return 0
}

// randomSecret is a fresh 32-character fingerprint secret.
func randomSecret() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return hex.EncodeToString(b[:])
}

// envWebhookToken names the variable holding the webhook token the sim
// sends (and the example receiver checks).
const envWebhookToken = "PAGPOLAR_WEBHOOK_TOKEN"

// webhookLog logs each webhook delivery of the sim: event, object, answer.
type webhookLog struct {
	next http.RoundTripper
	logf func(format string, args ...any)
}

func (l webhookLog) RoundTrip(req *http.Request) (*http.Response, error) {
	var env struct {
		Event string `json:"event"`
		Data  struct {
			Transaction  *struct{ ID string } `json:"transaction"`
			Subscription *struct{ ID string } `json:"subscription"`
		} `json:"data"`
	}
	if req.GetBody != nil {
		if b, err := req.GetBody(); err == nil {
			_ = json.NewDecoder(b).Decode(&env)
		}
	}
	what := env.Event
	switch {
	case env.Data.Transaction != nil:
		what += " " + env.Data.Transaction.ID
	case env.Data.Subscription != nil:
		what += " " + env.Data.Subscription.ID
	}
	resp, err := l.next.RoundTrip(req)
	if err != nil {
		l.logf("pagpolar sim: webhook %s: not delivered: %v\n", what, err)
		return nil, err
	}
	l.logf("pagpolar sim: webhook %s: %s\n", what, resp.Status)
	return resp, nil
}
