package main

// pagpolar chaos, the command: its usage, flags and exit codes.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

const chaosUsage = `usage: pagpolar chaos -store URL [flags]

Runs the demo's orders across several worker processes that share one key
store (PostgreSQL or Redis; SQLite works for processes of one host) and one
fake PagPolar API. The fake runs inside this process on 127.0.0.1, so its
ledger is checked directly; the workers are this binary's hidden
` + "`worker`" + ` command. Every order is worked by two workers at once. Workers are
SIGKILLed at random moments and kill themselves at the named crash points
(after the save and before the send; after the send and before the answer is
stored), are restarted, and re-issue their unfinished orders with the same
operation IDs. At the end this process runs ResumeAll, re-issues what is still
open, and checks the ledger. The report ends with the checks and the verdict.

Exit codes: 0 every check passed; 1 a check failed (an operation got two
effects, or none); 2 bad usage; 3 settling could not finish (the -timeout
ran out, or the store detected a loss of records and refuses every new
operation): the report says what stayed open and why, and no check but
"without an outcome" failed (and, after a detected loss, "effects whose
record the key store lost": each is one effect sent once before the loss,
counted exactly, not a double).

Big run (about ten minutes on a 2-core machine):
  pagpolar chaos -store postgres://... -workers 3 -orders 20000 -kill-every 3s
  pagpolar chaos -store redis://...    -workers 3 -orders 20000 -kill-every 3s

flags:
`

// chaosConfig is the parsed command line of `pagpolar chaos`.
type chaosConfig struct {
	store       string
	workers     int
	orders      int
	concurrency int
	faultRate   float64
	seed        int64
	window      time.Duration
	killEvery   time.Duration
	maxKills    int
	crashProb   float64
	timeout     time.Duration
	asJSON      bool

	// How to start a worker: exe with "worker" and its flags, plus env.
	// Default: this executable. Tests use their own binary.
	exe string
	env []string
	// crashes says where process n of worker slot w kills itself; nil:
	// the flags' plan (the two points alternate, -crash-probability).
	crashes func(w, n int) workerCrash
}

// workerCrash is a worker process's crash plan (see the worker's
// PAGPOLAR_CRASH_* variables); the zero value never crashes.
type workerCrash struct {
	point string
	prob  float64
	skip  int
	// forced (for process 0 of a slot) makes the crash certain, for
	// tests: the slot keeps this plan for each new process until one has
	// crashed at the point, the random killer spares those processes, and
	// the slots without a forced plan start only once every forced crash
	// has happened, so that a forced slot works orders nobody else works
	// yet (with three or more workers) and reaches its point. Use prob 1.
	forced bool
}

func (c *chaosConfig) crashFor(w, n int) workerCrash {
	if c.crashes != nil {
		return c.crashes(w, n)
	}
	if c.crashProb <= 0 {
		return workerCrash{}
	}
	// Alternate the two crash points between processes.
	return workerCrash{point: []string{crashAfterSave, crashAfterSend}[(w+n)%2], prob: c.crashProb}
}

// parseChaosFlags reads chaos's flags; for -h it writes the usage to
// stdout and returns flag.ErrHelp.
func parseChaosFlags(args []string, stdout io.Writer) (*chaosConfig, error) {
	cfg := &chaosConfig{}
	fs := flag.NewFlagSet("pagpolar chaos", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&cfg.store, "store", "", "key store URL shared by the workers: postgres://..., redis://..., sqlite:PATH (default: SQLite in a temporary file)")
	fs.IntVar(&cfg.workers, "workers", 3, "worker processes")
	fs.IntVar(&cfg.orders, "orders", 2000, "orders to run")
	fs.IntVar(&cfg.concurrency, "concurrency", 16, "orders in flight per worker")
	fs.Float64Var(&cfg.faultRate, "fault-rate", 0.3, "share of money requests that meet an injected fault (0 to 1)")
	fs.Int64Var(&cfg.seed, "seed", 1, "seed of the orders, the faults and the kills")
	fs.DurationVar(&cfg.window, "window", time.Second, "the in-processing window, on the fake and in the clients' policy")
	fs.DurationVar(&cfg.killEvery, "kill-every", 3*time.Second, "SIGKILL a random worker about this often (0: never)")
	fs.IntVar(&cfg.maxKills, "kills", 0, "stop the random kills after this many (0: no limit)")
	fs.Float64Var(&cfg.crashProb, "crash-probability", 0.002, "per operation reaching a worker's crash point, the chance it kills itself there")
	fs.DurationVar(&cfg.timeout, "timeout", 30*time.Minute, "give up (and fail) after this long")
	fs.BoolVar(&cfg.asJSON, "json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, chaosUsage)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
		}
		return nil, err
	}
	switch {
	case fs.NArg() > 0:
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case strings.HasPrefix(strings.ToLower(cfg.store), "memory:"):
		return nil, errors.New("-store memory: cannot be shared by processes; use postgres://..., redis://... or sqlite:PATH")
	case cfg.workers <= 0 || cfg.orders <= 0 || cfg.concurrency <= 0:
		return nil, errors.New("-workers, -orders and -concurrency must be positive")
	case cfg.faultRate < 0 || cfg.faultRate > 1:
		return nil, fmt.Errorf("-fault-rate %v is outside [0, 1]", cfg.faultRate)
	case cfg.crashProb < 0 || cfg.crashProb > 1:
		return nil, fmt.Errorf("-crash-probability %v is outside [0, 1]", cfg.crashProb)
	case cfg.window < 50*time.Millisecond:
		return nil, errors.New("-window must be at least 50ms")
	case cfg.killEvery < 0 || cfg.maxKills < 0 || cfg.timeout <= 0:
		return nil, errors.New("-kill-every and -kills must not be negative, -timeout must be positive")
	}
	return cfg, nil
}

// runChaos is `pagpolar chaos`.
func runChaos(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseChaosFlags(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "pagpolar chaos: %v\n", err)
		return 2
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "pagpolar chaos: finding this executable to start workers: %v\n", err)
		return 1
	}
	cfg.exe = exe
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	res, err := chaos(ctx, cfg, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "pagpolar chaos: %v\n", err)
		return 1
	}
	rep := res.Report
	if cfg.asJSON {
		err = rep.WriteJSON(stdout)
		fmt.Fprintf(stderr, "chaos: %s\n", res.Outage)
	} else {
		err = rep.WriteText(stdout)
		if err == nil {
			_, err = fmt.Fprintf(stdout, "%s\n", res.Outage)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "pagpolar chaos: writing the report: %v\n", err)
		return 1
	}
	return runExitCode(rep)
}
