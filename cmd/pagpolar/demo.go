package main

// pagpolar demo, the command: its usage, flags and exit codes, and printing its report.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

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

Exit codes: 0 every check passed; 1 the ledger check failed (an order charged
twice, an effect reported failed, an operation without an outcome...); 2 bad
usage or a store the demo cannot use (a bad or refused -store URL); 3 the run
could not finish (it timed out, or the store failed mid-run; when settling is
what stopped, the report says what stayed open and why). The same -seed gives the same orders and the same faults (each
decided by the seed, the order and the attempt, not by timing), so two runs
report the same fault counts, effects and verdict. That holds by
construction at -concurrency 1; at higher concurrency the orders share a
client-wide retry budget, so whether an order tries again depends on timing
and the counts can differ slightly (measured: one 500_no_commit in 120
orders). Timings, request counts and how settling split its work vary.

The key store is a temporary SQLite file deleted at exit; with -store the
run's records stay in that store under the fake's fresh credential ID, for
pagpolar ops to look at (the reaper removes them after the retention period).

The first go run compiles the SDK and prints nothing meanwhile: 2.5 min
measured with an empty build cache on a 2-core machine under load (go build
./cmd/pagpolar); the default run then takes about 10 s.

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
	async       bool          // the fake decides cards, refunds and plan changes later (pagpolartest.WithAsync)
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
	fs.DurationVar(&cfg.timeout, "timeout", 10*time.Minute, "give up (and fail) after this long (with -shapes all: each shape's run)")
	fs.BoolVar(&cfg.asJSON, "json", false, "print the report as JSON")
	fs.StringVar(&cfg.shapes, "shapes", "today", "answer shapes of the fake: today, a comma list of "+shapeNames()+", or all (one run per shape)")
	fs.DurationVar(&cfg.clockOffset, "client-clock-offset", 0, "run the client with its clock this far off the fake's and the store's (e.g. 5m, -3s)")
	fs.BoolVar(&cfg.noSubLookup, "no-subscription-lookup", false, "the fake has no subscription lookup (GET /subscriptions?external_reference= answers 404): a subscribe whose answer is lost stays unknown until its webhook event")
	fs.BoolVar(&cfg.async, "async", false, "the fake decides later: card sales answered pending, refunds requested, plan changes scheduled, decided half a window later (the demo waits for a card's decision before refunding it)")
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

// Exit codes of pagpolar demo (documented in demoUsage).
const (
	demoExitOK         = 0
	demoExitFailed     = 1 // the ledger check failed
	demoExitUsage      = 2 // bad usage, or a store the demo cannot use
	demoExitIncomplete = 3 // the run could not finish
)

// errDemoSetup is wrapped by the errors of setting a run up from its
// flags (the store URL, the shapes): usage errors, exit 2.
var errDemoSetup = errors.New("cannot set the run up")

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
	if cfg.shapes == "all" {
		return demoAllShapes(ctx, cfg, stdout, stderr) // -timeout bounds each shape's run
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	rep, err := demo(ctx, cfg, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "pagpolar demo: %v\n", err)
		if errors.Is(err, errDemoSetup) {
			return demoExitUsage
		}
		return demoExitIncomplete
	}
	if cfg.asJSON {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteText(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "pagpolar demo: writing the report: %v\n", err)
		return demoExitIncomplete
	}
	return runExitCode(rep)
}
