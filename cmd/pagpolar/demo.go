package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	mathrand "math/rand"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/internal/report"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/storeurl"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

const demoUsage = `usage: pagpolar demo [flags]

Runs orders through the SDK against the fake PagPolar API, started in this
process, with every kind of fault injected on purpose (lost answers, 500s
after the sale was created, gateway pages, 429s, slow processing...). The
API's 60 s in-processing window is shortened to -window on both sides, so
that what takes minutes in production settles in seconds. Then a background
job settles what the checkout requests left open; if operations stay
"outcome unknown", the run's webhook events are delivered to an inbox whose
Settle is the client, and the report counts how many they settled. The
fake's ledger is checked against what the SDK reported, and a report is
printed.

Exits 1 if any order was charged twice or any operation ended without an
outcome. The same -seed gives the same orders and the same faults (each
decided by the seed, the order and the attempt, not by timing), so two runs
report the same fault counts, effects and verdict. That holds by
construction at -concurrency 1; at higher concurrency the orders share a
client-wide retry budget, so whether an order tries again depends on timing
and the counts can differ slightly (measured: one 500_no_commit in 120
orders). Timings, request counts and how settling split its work vary.

The key store is a temporary SQLite file deleted at exit; with -store the
run's records stay in that store under the fake's fresh credential ID, for
pagpolar ops to look at (the reaper removes them after the retention period).

The first go run compiles the SDK, silently (one to two minutes with an
empty build cache); the default run then takes about 10 s.

flags:
`

// demoConfig is the parsed command line of `pagpolar demo`.
type demoConfig struct {
	store       string
	orders      int
	concurrency int
	faultRate   float64
	seed        int64
	window      time.Duration
	timeout     time.Duration
	asJSON      bool
	shapes      string        // "", a shape, a comma list, or "all" (one run per shape)
	clockOffset time.Duration // the client's clock against the fake's and the store's
	noSubLookup bool          // the fake answers 404 to GET /subscriptions?external_reference=
}

// parseDemoFlags parses demo's command line; on -h it writes the usage to
// helpOut and returns flag.ErrHelp. It prints nothing else: the caller
// prints the error.
func parseDemoFlags(args []string, helpOut io.Writer) (*demoConfig, error) {
	cfg := &demoConfig{}
	fs := flag.NewFlagSet("pagpolar demo", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&cfg.store, "store", "", "key store URL: sqlite:PATH, postgres://..., redis://... (default: SQLite in a temporary file)")
	fs.IntVar(&cfg.orders, "orders", 2000, "orders to run")
	fs.IntVar(&cfg.concurrency, "concurrency", 64, "orders in flight at once")
	fs.Float64Var(&cfg.faultRate, "fault-rate", 0.3, "share of money requests that meet an injected fault (0 to 1)")
	fs.Int64Var(&cfg.seed, "seed", 1, "seed of the orders and of the faults")
	fs.DurationVar(&cfg.window, "window", time.Second, "the in-processing window, on the fake and in the client's policy")
	fs.DurationVar(&cfg.timeout, "timeout", 10*time.Minute, "give up (and fail) after this long")
	fs.BoolVar(&cfg.asJSON, "json", false, "print the report as JSON")
	fs.StringVar(&cfg.shapes, "shapes", "today", "answer shapes of the fake: today, a comma list of "+shapeNames()+", or all (one run per shape)")
	fs.DurationVar(&cfg.clockOffset, "client-clock-offset", 0, "run the client with its clock this far off the fake's and the store's (e.g. 5m, -3s)")
	fs.BoolVar(&cfg.noSubLookup, "no-subscription-lookup", false, "the fake has no subscription lookup (GET /subscriptions?external_reference= answers 404): a subscribe whose answer is lost stays unknown until its webhook event")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(helpOut, demoUsage)
			fs.SetOutput(helpOut)
			fs.PrintDefaults()
		}
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	switch {
	case cfg.orders <= 0:
		return nil, errors.New("-orders must be positive")
	case cfg.concurrency <= 0:
		return nil, errors.New("-concurrency must be positive")
	case cfg.faultRate < 0 || cfg.faultRate > 1:
		return nil, fmt.Errorf("-fault-rate %v is outside [0, 1]", cfg.faultRate)
	case cfg.window < 50*time.Millisecond:
		return nil, errors.New("-window must be at least 50ms")
	case cfg.timeout <= 0:
		return nil, errors.New("-timeout must be positive")
	}
	if cfg.shapes != "all" {
		if _, err := pagpolartest.ParseShapes(cfg.shapes); err != nil {
			return nil, fmt.Errorf("-shapes: %w", err)
		}
	}
	return cfg, nil
}

// runDemo is `pagpolar demo`.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseDemoFlags(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "pagpolar demo: %v\nRun \"pagpolar demo -h\" for the flags.\n", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	if cfg.shapes == "all" {
		return demoAllShapes(ctx, cfg, stdout, stderr)
	}
	rep, err := demo(ctx, cfg, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "pagpolar demo: %v\n", err)
		return 1
	}
	if cfg.asJSON {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteText(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "pagpolar demo: writing the report: %v\n", err)
		return 1
	}
	if !rep.OK() {
		return 1
	}
	return 0
}

// demoAllShapes runs the demo once per answer shape (today's first) and
// prints one line per shape, then the full report of any that failed.
func demoAllShapes(ctx context.Context, cfg *demoConfig, stdout, stderr io.Writer) int {
	shapes := append([]pagpolartest.Shape{pagpolartest.ShapeToday}, pagpolartest.AllShapes()...)
	var reps []*report.Report
	code := 0
	for _, sh := range shapes {
		one := *cfg
		one.shapes = string(sh)
		fmt.Fprintf(stderr, "== shape %s\n", sh)
		rep, err := demo(ctx, &one, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "pagpolar demo: shape %s: %v\n", sh, err)
			return 1
		}
		reps = append(reps, rep)
		if !rep.OK() {
			code = 1
		}
	}
	if cfg.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(reps); err != nil {
			return 1
		}
		return code
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "shape\tverdict\torders\toperations\tcharged twice\tfalse failures\tsucceeded w/o effect\tunfinished\tunknown at end\tsettled by events\tsettling took\trun\n")
	for i, rep := range reps {
		v := "OK"
		if !rep.OK() {
			v = "FAILED"
		}
		c := rep.Check
		byEvents := 0
		if rep.Webhooks != nil {
			byEvents = rep.Webhooks.Settled
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.1fs\t%.1fs\n", shapes[i], v, rep.Orders, c.Operations,
			len(c.Duplicates), len(c.FalseFailures)+len(c.Orphans), len(c.WithoutEffect), len(c.Unfinished), len(c.Unknown), byEvents,
			rep.Settling.SettleMS/1000, rep.RunTimeMS/1000)
	}
	_ = tw.Flush()
	for i, rep := range reps {
		if !rep.OK() {
			fmt.Fprintf(stdout, "\n== shape %s\n", shapes[i])
			_ = rep.WriteText(stdout)
		}
	}
	return code
}

func shapeNames() string {
	var names []string
	for _, s := range pagpolartest.AllShapes() {
		names = append(names, string(s))
	}
	return strings.Join(names, ", ")
}

// demo runs the whole scenario and returns its report.
func demo(ctx context.Context, cfg *demoConfig, stderr io.Writer) (*report.Report, error) {
	start := time.Now()
	shapes, err := pagpolartest.ParseShapes(cfg.shapes)
	if err != nil {
		return nil, err
	}
	var fakeOpts []pagpolartest.Option
	if cfg.noSubLookup {
		fakeOpts = append(fakeOpts, pagpolartest.WithoutSubscriptionLookup())
	}
	srv, err := startDemoFake(cfg.window, cfg.seed, cfg.faultRate, cfg.orders, fakeOpts, shapes...)
	if err != nil {
		return nil, err
	}
	defer srv.Close()

	storeURL, cleanup, err := scenarioStoreURL(cfg.store)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	store, closeStore, err := storeurl.Open(ctx, storeURL)
	if err != nil {
		return nil, fmt.Errorf("opening the key store: %w", err)
	}
	defer func() { _ = closeStore() }()

	col := report.NewCollector()
	var extra []pagpolar.Option
	if cfg.clockOffset != 0 {
		extra = append(extra, pagpolar.WithClock(offsetClock(cfg.clockOffset)))
	}
	c, err := newScenarioClient(srv.URL, srv.CredentialID, srv.Token, store, cfg.window, cfg.concurrency, col.Observe, fmt.Sprintf("demo-pid%d", os.Getpid()), extra...)
	if err != nil {
		return nil, err
	}

	// The checkout pass: each order as a request handler would run it,
	// within a deadline, leaving what stays unknown to the reconciler.
	run := &orderRunner{c: c, calls: checkoutCalls, deadline: checkoutDeadline(cfg.window), pause: cfg.window / 10}
	res := newResults()
	tty := isTerminal(stderr)
	var done atomic.Int64
	prog := startProgress(stderr, tty, func(el time.Duration) string {
		d := done.Load()
		return fmt.Sprintf("checkout: %d/%d orders, %d operations without a final answer yet, %.0f orders/s, %s",
			d, cfg.orders, res.open.Load(), float64(d)/el.Seconds(), el.Round(100*time.Millisecond))
	})
	forEachOrder(ctx, cfg.orders, cfg.concurrency, func(i int) {
		res.add(run.process(ctx, orderAt(cfg.seed, i))...)
		done.Add(1)
	})
	prog.stop()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("checkout pass: %w", err)
	}

	settleStart := time.Now()
	settling := reconcileShowing(ctx, c, store, srv.CredentialID, &orderRunner{c: c, pause: cfg.window / 10}, cfg.seed, cfg.orders, res, cfg.concurrency,
		func(line func(time.Duration) string) *progress { return startProgress(stderr, tty, line) })
	settling.SettleMS = float64(time.Since(settleStart).Microseconds()) / 1000
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("settling: %w", err)
	}
	// What the lookups left unknown, the run's webhook events may settle.
	webhooks, settled, err := settleByWebhooks(ctx, c, store, srv, func(line func(time.Duration) string) *progress { return startProgress(stderr, tty, line) })
	if err != nil {
		return nil, fmt.Errorf("webhook events: %w", err)
	}
	webhooks.CarriedOn = carryOn(ctx, &orderRunner{c: c, calls: 4, pause: cfg.window / 10}, cfg.seed, cfg.orders, settled, res, cfg.concurrency)

	var read atomic.Int64
	prog = startProgress(stderr, tty, func(el time.Duration) string {
		return fmt.Sprintf("verify: %d/%d orders' records read from the store, %s", read.Load(), cfg.orders, el.Round(100*time.Millisecond))
	})
	ops, err := expectedOpsCounting(ctx, store, srv.CredentialID, cfg.seed, cfg.orders, &read)
	prog.stop()
	if err != nil {
		return nil, err
	}
	ledger := srv.Ledger()
	storeName := redactURL(storeURL)
	if cfg.store == "" {
		storeName = "a temporary SQLite file, deleted at exit (-store sqlite:PATH keeps it)"
	}
	rep := &report.Report{
		Mode:      "demo",
		Store:     storeName,
		Orders:    cfg.orders,
		FaultRate: cfg.faultRate,
		Seed:      cfg.seed,
		WindowMS:  float64(cfg.window.Microseconds()) / 1000,
		Shapes:    shapeStrings(shapes),
		Check:     report.Verify(srv.CredentialID, ledger, ops),
		Obtained:  res.obtained(),
		Settling:  settling,
		Webhooks:  webhooks,
		SDK:       col.Snapshot(),
		Latency:   res.lat.Summary(),
	}
	rep.Requests, rep.FaultsApplied = report.Traffic(ledger, srv.CredentialID, cfg.orders)
	if cfg.clockOffset != 0 {
		rep.ClientClockOffset = cfg.clockOffset.String()
	}
	rep.RunTimeMS = float64(time.Since(start).Microseconds()) / 1000
	return rep, nil
}

func shapeStrings(shapes []pagpolartest.Shape) []string {
	out := []string{}
	for _, s := range shapes {
		out = append(out, string(s))
	}
	return out
}

// offsetClock is the system clock off by a fixed amount: a client host
// whose clock is wrong (SAFETY rule 12).
type offsetClock time.Duration

func (o offsetClock) Now() time.Time                         { return time.Now().Add(time.Duration(o)) }
func (o offsetClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// scenarioStoreURL returns the store URL to use: the given one, or a SQLite
// file in a new temporary directory that cleanup removes.
func scenarioStoreURL(given string) (u string, cleanup func(), err error) {
	if given != "" {
		return given, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "pagpolar-keys-")
	if err != nil {
		return "", nil, fmt.Errorf("temporary directory for the SQLite store: %w", err)
	}
	return "sqlite:" + filepath.Join(dir, "keys.db") + "?declared_new=" + url.QueryEscape("pagpolar: a temporary file created for this run"), func() { _ = os.RemoveAll(dir) }, nil
}

// redactURL drops the password of a store URL for printing.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	return u.Redacted()
}

// ---- the scenario shared by demo, chaos and worker ----

// checkoutCalls is how many calls a checkout request makes per operation
// before it answers "processing" and leaves the rest to the reconciler.
const checkoutCalls = 3

// checkoutDeadline is the time a checkout request has for an order (its
// charge and refund): two windows, less than an ambiguous charge can take
// to settle (1.8 windows of trust delay, plus lookups and a resend), so
// some orders are answered "processing" and settled afterwards.
func checkoutDeadline(window time.Duration) time.Duration { return 2 * window }

// scenarioPolicy is the client's policy against the fake with the
// in-processing window shortened to window, in the production proportions
// (60 s window, 30 s attempt timeout): an attempt gives up after half a
// window, and a "not found" is trusted only 1.8 windows after the send
// (window, margin, settle delay). The fault mix's longest hold (1.1 windows)
// therefore outlasts the attempt, so the client must settle a request the
// server is still processing, and ends before the trust delay, so waiting
// for it is enough (a server that processes past the delay is the
// documented exposure, not injected here).
func scenarioPolicy(window time.Duration) pagpolar.RetryPolicy {
	return pagpolar.RetryPolicy{
		MaxAttempts:       6,
		NewBackOff:        pagpolar.Exponential(window/50, window/5),
		MaxRetryAfter:     window / 4,
		AttemptTimeout:    window / 2,
		ProcessingWindow:  window,
		WindowMargin:      window / 2,
		SettleDelay:       window * 3 / 10,
		LookupInterval:    window / 10,
		LeaseTTL:          3 * window,
		LeaseWaitInterval: 10 * time.Millisecond,
	}
}

// newScenarioClient builds the SDK client every part of the scenario uses;
// owner names it in leases and must be unique among the clients of a store.
func newScenarioClient(baseURL, credential, token string, store keystore.Store, window time.Duration, conns int, hook pagpolar.Hook, owner string, extra ...pagpolar.Option) (*pagpolar.Client, error) {
	opts := []pagpolar.Option{
		pagpolar.WithBaseURL(baseURL),
		pagpolar.WithStore(store),
		pagpolar.WithRetryPolicy(scenarioPolicy(window)),
		pagpolar.WithHTTPClient(&http.Client{Transport: &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns}}),
		pagpolar.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
		pagpolar.WithUserAgent("pagpolar-scenario"),
		pagpolar.WithOwner(owner),
	}
	if hook != nil {
		opts = append(opts, pagpolar.WithHook(hook))
	}
	return pagpolar.NewClient(credential, pagpolar.StaticToken(token), append(opts, extra...)...)
}

// faultMix returns the faults of a run: every kind of the foundation issue,
// met by about rate of the money requests (40 % of the share before
// processing, 60 % at processing), plus a few read faults on the lookups.
// The server applies the first fault that matches, so each coin is
// conditional on the earlier ones of its stage: p = share / (1 - taken).
func faultMix(rate float64, window time.Duration) []pagpolartest.Fault {
	if rate <= 0 {
		return nil
	}
	type kind struct {
		f      pagpolartest.Fault
		weight float64 // percent of rate
	}
	front := []kind{
		{pagpolartest.Fault{Action: pagpolartest.FaultDropBeforeProcessing}, 8},
		{pagpolartest.Fault{Action: pagpolartest.FaultGateway, Status: 502}, 6},
		{pagpolartest.Fault{Action: pagpolartest.FaultGateway, Status: 503}, 6},
		{pagpolartest.Fault{Action: pagpolartest.FaultGateway, Status: 504}, 4},
		{pagpolartest.Fault{Action: pagpolartest.FaultRateLimit, Delay: window / 4}, 6},
		{pagpolartest.Fault{Action: pagpolartest.FaultUnavailable, Delay: window / 4}, 6},
		{pagpolartest.Fault{Action: pagpolartest.FaultLatency, Delay: window / 10}, 4},
	}
	processing := []kind{
		{pagpolartest.Fault{Action: pagpolartest.FaultCommitThenDrop}, 8},
		{pagpolartest.Fault{Action: pagpolartest.FaultCommitDropRelease}, 6},
		{pagpolartest.Fault{Action: pagpolartest.FaultCommitThen500}, 6},
		{pagpolartest.Fault{Action: pagpolartest.FaultCommitThen500After, Delay: window * 3 / 10}, 5},
		{pagpolartest.Fault{Action: pagpolartest.Fault500NoCommit}, 6},
		{pagpolartest.Fault{Action: pagpolartest.FaultHold, Delay: window / 4}, 5},
		// Longer than the attempt timeout and the window: the client
		// gives up, and a same-key request would be processed again
		// while this one still commits; the client's trust delay
		// outlasts it.
		{pagpolartest.Fault{Action: pagpolartest.FaultHold, Delay: window * 11 / 10}, 4},
		{pagpolartest.Fault{Action: pagpolartest.FaultLookupLag, Delay: window * 3 / 20}, 6},
		{pagpolartest.Fault{Action: pagpolartest.FaultGatewayAfterCommit, Status: 504}, 6},
		{pagpolartest.Fault{Action: pagpolartest.FaultDecline}, 8},
	}
	var out []pagpolartest.Fault
	for _, stage := range [][]kind{front, processing} {
		taken := 0.0
		for _, k := range stage {
			share := rate * k.weight / 100
			p := share / (1 - taken)
			taken += share
			f := k.f
			f.Probability = clampProbability(p)
			out = append(out, f)
		}
	}
	// Lookups fail too, so that settling has to retry its reads.
	for _, f := range []pagpolartest.Fault{
		{Route: "get_sales", Action: pagpolartest.Fault500NoCommit},
		{Route: "get_sales", Action: pagpolartest.FaultGateway, Status: 502},
		{Route: "get_refunds", Action: pagpolartest.Fault500NoCommit},
	} {
		f.Probability = clampProbability(rate / 20)
		out = append(out, f)
	}
	return out
}

// clampProbability keeps p inside the open interval the fake treats as a
// coin (0 and 1 mean "always").
func clampProbability(p float64) float64 {
	switch {
	case p <= 0:
		return 1e-9
	case p >= 1:
		return 0.999999
	}
	return p
}

// startScenarioFake starts the in-process fake with the scenario's fault
// mix and bursts for chaos; stop the bursts before Close. Its bursts follow
// the request count, which depends on timing: chaos runs are not meant to
// be reproduced (workers are killed at random).
func startScenarioFake(window time.Duration, seed int64, faultRate float64, shapes ...pagpolartest.Shape) (*pagpolartest.Server, func(), error) {
	srv := pagpolartest.NewUnstartedServer(pagpolartest.WithProcessingWindow(window), pagpolartest.WithSeed(seed), pagpolartest.WithShapes(shapes...))
	for _, f := range faultMix(faultRate, window) {
		srv.Inject(f)
	}
	stopBursts := injectBursts(srv, faultRate, window)
	if err := srv.Start(); err != nil {
		stopBursts()
		return nil, nil, err
	}
	return srv, stopBursts, nil
}

// startDemoFake starts the in-process fake of a demo run so that the seed
// reproduces its faults: each probabilistic fault is decided by the seed,
// the order and the attempt (pagpolartest.WithDeterministicFaults), never by
// the order requests arrive in; a read fault fails only the first read of
// a lookup that reaches it (how often a lookup is polled depends on
// timing); and load-shedding bursts are chosen by order (burstFaults).
func startDemoFake(window time.Duration, seed int64, faultRate float64, orders int, opts []pagpolartest.Option, shapes ...pagpolartest.Shape) (*pagpolartest.Server, error) {
	srv := pagpolartest.NewUnstartedServer(append([]pagpolartest.Option{pagpolartest.WithProcessingWindow(window), pagpolartest.WithSeed(seed),
		pagpolartest.WithShapes(shapes...), pagpolartest.WithDeterministicFaults()}, opts...)...)
	// Bursts first: the first fault that matches a request applies.
	for _, f := range burstFaults(seed, orders, faultRate, window) {
		srv.Inject(f)
	}
	for _, f := range faultMix(faultRate, window) {
		if strings.HasPrefix(f.Route, "get_") || strings.HasPrefix(f.Route, "list_") {
			f.OnlyFirst = 1
		}
		srv.Inject(f)
	}
	if err := srv.Start(); err != nil {
		return nil, err
	}
	return srv, nil
}

// burstFaults sheds load as a rate limiter or an overloaded API answers a
// spike, by order rather than by time or request count: in every block of
// 200 orders, a run of about rate*40 consecutive orders (from an offset the
// seed picks) gets 429 on its first money request, or in every other block
// the API's own 503. Orders next to each other are in flight together, so
// each run is a burst the client-wide retry budget has to absorb.
func burstFaults(seed int64, orders int, rate float64, window time.Duration) []pagpolartest.Fault {
	if rate <= 0 {
		return nil
	}
	const block = 200
	size := 1 + int(rate*40)
	rng := mathrand.New(mathrand.NewSource(seed))
	var out []pagpolartest.Fault
	for k := 0; k*block < orders; k++ {
		first := k*block + rng.Intn(block-size)
		for i := first; i < first+size && i < orders; i++ {
			f := pagpolartest.Fault{Action: pagpolartest.FaultRateLimit, ExternalReference: orderAt(seed, i).Ref, Times: 1, Delay: window / 4}
			if k%2 == 1 {
				f.Action = pagpolartest.FaultUnavailable
			}
			out = append(out, f)
		}
	}
	return out
}

// injectBursts makes the fake shed load in bursts (chaos): after every 200
// money requests, the next ones (about rate*40) get 429, or the API's own
// 503, as a rate limiter or an overloaded API answers a spike. The returned
// function stops new bursts.
func injectBursts(srv *pagpolartest.Server, rate float64, window time.Duration) (stop func()) {
	var stopped atomic.Bool
	if rate <= 0 {
		return func() {}
	}
	var n atomic.Int64
	size := 1 + int(rate*40)
	srv.OnRequest(func(r pagpolartest.RequestLog) {
		if r.Method != http.MethodPost || stopped.Load() {
			return
		}
		k := n.Add(1)
		if k%200 != 0 {
			return
		}
		f := pagpolartest.Fault{Action: pagpolartest.FaultRateLimit, Times: size, Delay: window / 4}
		if k%400 == 0 {
			f.Action = pagpolartest.FaultUnavailable
		}
		srv.Inject(f)
	})
	return func() { stopped.Store(true) }
}

// order is one order of the scenario, derived from the seed and its index
// so that every process of a chaos run agrees on it.
type order struct {
	Index   int
	Ref     string // external reference: the order code
	Method  string // pix, boleto, credit_card, or subscribe
	PayBy   string // subscriptions: pix or credit_card
	Offer   string
	Decline bool  // paid with a card token the fake always declines
	Refund  int64 // centavos to refund once charged (card orders only); 0: none
	// NewPlan: a subscription moves to this plan once subscribed; "": no
	// plan change.
	NewPlan string
}

var demoCustomer = pagpolar.Customer{Name: "Ana Souza", Email: "ana@example.com", Document: "529.982.247-25", Phone: "+55 11 91234-5678"}

// orderAt returns order i of the run seeded with seed: 35 % PIX, 20 %
// boleto, 30 % card (one in eight of them declined, one in four of the
// rest partly refunded afterwards), 15 % subscriptions (by card or PIX,
// half of them changing plan afterwards).
func orderAt(seed int64, i int) order {
	rng := mathrand.New(mathrand.NewSource(seed*1_000_003 + int64(i)))
	o := order{Index: i, Ref: fmt.Sprintf("order-%06d", i), Offer: "offer-basic"}
	switch x := rng.Intn(20); {
	case x < 7:
		o.Method = "pix"
	case x < 11:
		o.Method, o.Offer = "boleto", "offer-premium"
	case x < 17:
		o.Method = "credit_card"
		if rng.Intn(2) == 0 {
			o.Offer = "offer-premium"
		}
		switch {
		case rng.Intn(8) == 0:
			o.Decline = true
		case rng.Intn(4) == 0:
			o.Refund = 500 + rng.Int63n(4000)
		}
	default:
		o.Method, o.Offer, o.PayBy = "subscribe", "plan-basic", "pix"
		if rng.Intn(2) == 0 {
			o.PayBy = "credit_card"
		}
		if rng.Intn(2) == 0 {
			o.NewPlan = "plan-pro"
		}
	}
	return o
}

// chargeOpID and refundOpID are the operation IDs the order code uses: the
// SDK's default for charges and subscriptions, one refund or plan change
// per order.
func chargeOpID(o order) string { return o.Method + ":" + o.Ref }
func refundOpID(o order) string { return "refund:" + o.Ref }
func planOpID(o order) string   { return "plan-change:" + o.Ref }

// outcome is how one business operation ended for the order code.
type outcome struct {
	Order     int    `json:"order"`
	OpID      string `json:"op"`
	State     string `json:"state"` // succeeded, declined, failed, unsettled
	Source    string `json:"source,omitempty"`
	Ref       string `json:"ref,omitempty"` // the sale or refund
	Err       string `json:"err,omitempty"`
	Calls     int    `json:"calls"`
	LatencyUS int64  `json:"latency_us"`
}

func (o outcome) final() bool { return o.State != "unsettled" }

// orderRunner is order-processing code as a checkout backend writes it: one
// operation per charge and per refund, the same operation ID on every call,
// and a call again for every answer that is not final.
type orderRunner struct {
	c        *pagpolar.Client
	calls    int           // calls per operation before leaving it unsettled; 0: until ctx ends
	deadline time.Duration // time for a whole order; 0: until ctx ends
	pause    time.Duration // base pause before calling again after a refusal
}

// process runs an order: its charge (or subscription), then its refund or
// plan change if it has one and the first operation succeeded.
func (r *orderRunner) process(ctx context.Context, o order) []outcome {
	if r.deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.deadline)
		defer cancel()
	}
	ch := r.until(ctx, o.Index, chargeOpID(o), func(ctx context.Context) (string, pagpolar.Source, error) {
		return r.charge(ctx, o)
	})
	out := []outcome{ch}
	switch {
	case ch.State == "succeeded" && o.Refund > 0:
		out = append(out, r.until(ctx, o.Index, refundOpID(o), func(ctx context.Context) (string, pagpolar.Source, error) {
			res, err := r.c.Refunds.Create(ctx, pagpolar.RefundParams{OperationID: refundOpID(o), SaleID: ch.Ref, Amount: o.Refund, Reason: "customer asked"})
			if err != nil {
				return "", "", err
			}
			return res.Refund.ID, res.Operation.Source, nil
		}))
	case ch.State == "succeeded" && o.NewPlan != "":
		out = append(out, r.until(ctx, o.Index, planOpID(o), func(ctx context.Context) (string, pagpolar.Source, error) {
			res, err := r.c.Subscriptions.ChangePlan(ctx, pagpolar.ChangePlanParams{OperationID: planOpID(o), SubscriptionID: ch.Ref, NewOfferID: o.NewPlan})
			if err != nil {
				return "", "", err
			}
			return res.PlanChange.ID, res.Operation.Source, nil
		}))
	}
	return out
}

func (r *orderRunner) charge(ctx context.Context, o order) (string, pagpolar.Source, error) {
	var (
		ch  *pagpolar.Charge
		err error
	)
	switch o.Method {
	case "pix":
		ch, err = r.c.Payments.Pix(ctx, pagpolar.PixParams{OfferID: o.Offer, ExternalReference: o.Ref, Customer: demoCustomer})
	case "boleto":
		ch, err = r.c.Payments.Boleto(ctx, pagpolar.BoletoParams{OfferID: o.Offer, ExternalReference: o.Ref, Customer: demoCustomer})
	case "subscribe":
		p := pagpolar.SubscribeParams{OfferID: o.Offer, ExternalReference: o.Ref, Customer: demoCustomer, PaymentMethod: o.PayBy}
		if o.PayBy == "credit_card" {
			p.CardToken = "tok_ok_" + o.Ref
		}
		res, err := r.c.Subscriptions.Subscribe(ctx, p)
		if err != nil {
			return "", "", err
		}
		return res.Subscription.ID, res.Operation.Source, nil
	default:
		tok := "tok_ok_" + o.Ref
		if o.Decline {
			tok = "tok_decline_" + o.Ref
		}
		ch, err = r.c.Payments.CreditCard(ctx, pagpolar.CreditCardParams{OfferID: o.Offer, ExternalReference: o.Ref, Customer: demoCustomer, CardToken: tok})
	}
	if err != nil {
		return "", "", err
	}
	return ch.Sale.ID, ch.Operation.Source, nil
}

// until calls fn until its answer is final, r.calls times at most.
func (r *orderRunner) until(ctx context.Context, idx int, opID string, fn func(context.Context) (string, pagpolar.Source, error)) outcome {
	start := time.Now()
	o := outcome{Order: idx, OpID: opID, State: "unsettled"}
	pause := r.pause
	for o.Calls = 1; ; o.Calls++ {
		ref, src, err := fn(ctx)
		o.Ref, o.Source, o.Err = ref, string(src), ""
		if err != nil {
			o.Err = err.Error()
		}
		if st := finalState(err); st != "" {
			o.State = st
			break
		}
		if (r.calls > 0 && o.Calls >= r.calls) || ctx.Err() != nil {
			break
		}
		if !errors.Is(err, pagpolar.ErrOutcomeUnknown) && !errors.Is(err, pagpolar.ErrInProgress) {
			// Refused without effect (budget, throttling, store down): wait
			// a little before asking again, longer each time.
			select {
			case <-ctx.Done():
			case <-time.After(pause):
			}
			if pause < 20*r.pause {
				pause *= 2
			}
		}
	}
	o.LatencyUS = time.Since(start).Microseconds()
	return o
}

// finalState classifies a call's answer: "succeeded", "declined" or
// "failed" when it is final, "" when the order code must call again.
func finalState(err error) string {
	var api *pagpolar.APIError
	switch {
	case err == nil:
		return "succeeded"
	case errors.Is(err, pagpolar.ErrDeclined):
		return "declined"
	case errors.Is(err, pagpolar.ErrParamsMismatch), errors.Is(err, pagpolar.ErrValidation):
		return "failed"
	case errors.As(err, &api) && api.StatusCode >= 400 && api.StatusCode < 500 &&
		api.StatusCode != http.StatusConflict && api.StatusCode != http.StatusTooManyRequests &&
		api.StatusCode != http.StatusUnauthorized && api.StatusCode != http.StatusForbidden:
		return "failed"
	}
	return ""
}

// results keeps the latest outcome of every operation.
type results struct {
	mu   sync.Mutex
	ops  map[string]outcome
	lat  report.Latencies
	open atomic.Int64
}

func newResults() *results {
	return &results{ops: map[string]outcome{}}
}

// add records outcomes of the checkout pass (their latency counts).
func (r *results) add(outs ...outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, o := range outs {
		r.ops[o.OpID] = o
		r.lat.Add(time.Duration(o.LatencyUS) * time.Microsecond)
		if !o.final() {
			r.open.Add(1)
		}
	}
}

// set replaces an operation's outcome (reconciliation); it reports
// whether the operation went from unsettled to final.
func (r *results) set(o outcome) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	old, had := r.ops[o.OpID]
	r.ops[o.OpID] = o
	if o.final() && (!had || !old.final()) {
		r.open.Add(-1)
		return true
	}
	return false
}

// unsettledOps returns the operations the order code has no final answer
// for.
func (r *results) unsettledOps() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]bool{}
	for id, o := range r.ops {
		if !o.final() {
			out[id] = true
		}
	}
	return out
}

// obtained counts the operations by how their final answer was obtained.
func (r *results) obtained() report.Counts {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := report.Counts{}
	for _, o := range r.ops {
		switch o.State {
		case "succeeded":
			c[o.Source]++
		case "unsettled":
			c["unsettled"]++
		default:
			c[o.State]++
		}
	}
	return c
}

// reconcile settles what the checkout pass left open, as a background job
// of the order system would. Open are the operations the order code has no
// final answer for, and those whose record is still pending or unknown (an
// answer arrived but could not be recorded, e.g. the lease ran out while the
// machine was starved). Each round runs ResumeAll (lookups only, never a
// charge), then the order code again for each order still open (same
// operation IDs: the SDK settles first and sends only after a trusted
// not-found). Rounds go on until nothing is open or ctx ends.
func reconcile(ctx context.Context, c *pagpolar.Client, store keystore.Store, credential string, run *orderRunner, seed int64, n int, res *results, conc int) report.Settling {
	return reconcileShowing(ctx, c, store, credential, run, seed, n, res, conc, nil)
}

// reconcileShowing is reconcile showing each round's ResumeAll and re-issue
// through show (nil: silently).
func reconcileShowing(ctx context.Context, c *pagpolar.Client, store keystore.Store, credential string, run *orderRunner, seed int64, n int, res *results, conc int,
	show func(line func(time.Duration) string) *progress) report.Settling {
	if show == nil {
		show = func(func(time.Duration) string) *progress { return nil }
	}
	var s report.Settling
	if run.calls == 0 {
		// A few calls per operation and round: an operation the SDK keeps
		// answering "outcome unknown" (a shape it cannot verify) would
		// otherwise be called until the run's deadline.
		r := *run
		r.calls = 4
		run = &r
	}
	index := make(map[string]int, n)
	for i := range n {
		o := orderAt(seed, i)
		index[chargeOpID(o)], index[refundOpID(o)], index[planOpID(o)] = i, i, i
	}
	stuck := 0
	for round := 0; ctx.Err() == nil; round++ {
		open := res.unsettledOps()
		prefix := pagpolar.RecordID(credential, "")
		recs, err := store.List(ctx, keystore.Filter{
			States: []keystore.State{keystore.StatePending, keystore.StateUnknown, keystore.StateNotExecuted},
			Prefix: prefix, Limit: 2 * n,
		})
		if err != nil {
			// The store is down: count what the order code knows and retry.
			recs = nil
		}
		for _, r := range recs {
			if cred, op, ok := pagpolar.SplitRecordID(r.OperationID); ok && cred == credential {
				open[op] = true
			}
		}
		if round == 0 {
			s.LeftUnsettled = len(open)
		}
		if round > 0 && len(open) >= s.StillUnsettledEnd && err == nil {
			// No progress: what is left stays "outcome unknown" (an answer
			// the SDK cannot verify) until a person looks. Give it two more
			// rounds (a lease may have had to expire), then stop.
			if stuck++; stuck >= 3 {
				break
			}
		} else {
			stuck = 0
		}
		s.StillUnsettledEnd = len(open)
		if len(open) == 0 && err == nil {
			break
		}
		s.ReconcileRounds++
		round, lookingUp := s.ReconcileRounds, len(open)
		p := show(func(el time.Duration) string {
			return fmt.Sprintf("settling, round %d: looking up %d operations without a final answer (ResumeAll: lookups, never a charge), %s",
				round, lookingUp, el.Round(100*time.Millisecond))
		})
		rs, _ := c.ResumeAll(ctx)
		p.stop()
		byResume := map[string]bool{}
		for _, r := range rs {
			if open[r.OperationID] && (r.State == keystore.StateSucceeded || r.State == keystore.StateFailed) {
				byResume[r.OperationID] = true
				s.SettledByResume++
			}
		}
		seen := map[int]bool{}
		var orders []int
		for op := range open {
			if i, ok := index[op]; ok && !seen[i] {
				seen[i] = true
				orders = append(orders, i)
			}
		}
		sort.Ints(orders)
		var mu sync.Mutex
		var reissued atomic.Int64
		p = show(func(el time.Duration) string {
			return fmt.Sprintf("settling, round %d: calling again %d/%d orders with the same operation IDs (the SDK looks up before it resends), %s",
				round, reissued.Load(), len(orders), el.Round(100*time.Millisecond))
		})
		forEachOrder(ctx, len(orders), conc, func(k int) {
			for _, o := range run.process(ctx, orderAt(seed, orders[k])) {
				res.set(o)
				if open[o.OpID] && !byResume[o.OpID] && o.final() {
					mu.Lock()
					s.SettledByReissue++
					mu.Unlock()
				}
			}
			reissued.Add(1)
		})
		p.stop()
	}
	return s
}

// forEachOrder calls fn(0..n-1) on conc goroutines and returns when every
// call has returned; it stops handing out work when ctx ends.
func forEachOrder(ctx context.Context, n, conc int, fn func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < conc && w < n; w++ {
		wg.Go(func() {
			for i := range next {
				fn(i)
			}
		})
	}
	for i := 0; i < n; i++ {
		select {
		case next <- i:
		case <-ctx.Done():
			i = n
		}
	}
	close(next)
	wg.Wait()
}

// expectedOps reads the final record of every operation the run meant to
// carry out: each order's charge, and the refund of each refundable order
// whose charge succeeded.
func expectedOps(ctx context.Context, store keystore.Store, credential string, seed int64, n int) ([]report.Expected, error) {
	return expectedOpsCounting(ctx, store, credential, seed, n, nil)
}

// expectedOpsCounting is expectedOps adding one to read (if not nil) per
// order read.
func expectedOpsCounting(ctx context.Context, store keystore.Store, credential string, seed int64, n int, read *atomic.Int64) ([]report.Expected, error) {
	var out []report.Expected
	get := func(opID string) (report.Expected, error) {
		rec, err := store.Get(ctx, pagpolar.RecordID(credential, opID))
		switch {
		case err == nil:
			return report.Expected{OperationID: opID, Record: rec, Found: true}, nil
		case errors.Is(err, keystore.ErrNotFound):
			return report.Expected{OperationID: opID}, nil
		}
		return report.Expected{}, fmt.Errorf("reading the record of %s: %w", opID, err)
	}
	for i := range n {
		if read != nil {
			read.Add(1)
		}
		o := orderAt(seed, i)
		e, err := get(chargeOpID(o))
		if err != nil {
			return nil, err
		}
		e.Kind, e.Method, e.ExternalReference = "charge", o.Method, o.Ref
		if o.Method == "subscribe" {
			e.Kind, e.Method = "subscribe", o.PayBy
		}
		out = append(out, e)
		if !e.Found || e.Record.State != keystore.StateSucceeded {
			continue
		}
		switch {
		case o.Refund > 0:
			r, err := get(refundOpID(o))
			if err != nil {
				return nil, err
			}
			r.Kind = "refund"
			out = append(out, r)
		case o.NewPlan != "":
			r, err := get(planOpID(o))
			if err != nil {
				return nil, err
			}
			r.Kind = "plan_change"
			out = append(out, r)
		}
	}
	return out, nil
}

// progress shows how far a phase of a run is: a line rewritten in place
// when w is a terminal, otherwise a plain line every 5 s and one when the
// phase ends. A nil *progress does nothing.
type progress struct {
	w     io.Writer
	tty   bool
	line  func(elapsed time.Duration) string
	began time.Time
	stopc chan struct{}
	wg    sync.WaitGroup
}

// startProgress shows line (called with the time since the start) until
// stop.
func startProgress(w io.Writer, tty bool, line func(elapsed time.Duration) string) *progress {
	p := &progress{w: w, tty: tty, line: line, began: time.Now(), stopc: make(chan struct{})}
	every := 5 * time.Second
	if tty {
		every = 200 * time.Millisecond
	}
	p.wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.stopc:
				p.print(true)
				return
			case <-t.C:
				p.print(false)
			}
		}
	})
	return p
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func (p *progress) print(last bool) {
	line := p.line(time.Since(p.began))
	switch {
	case p.tty && last:
		fmt.Fprintf(p.w, "\r\033[K%s\n", line)
	case p.tty:
		fmt.Fprintf(p.w, "\r\033[K%s", line)
	default:
		fmt.Fprintln(p.w, line)
	}
}

// stop prints the phase's last line and returns once it is written.
func (p *progress) stop() {
	if p == nil {
		return
	}
	close(p.stopc)
	p.wg.Wait()
}
