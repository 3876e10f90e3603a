package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	mathrand "math/rand"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/internal/report"
)

// The worker is the process `pagpolar chaos` starts, kills and restarts. It
// is hidden from `pagpolar help`: it speaks a line protocol to its parent.
//
// It reads order indices (one per line) from stdin until EOF, runs each
// order through the SDK with the scenario's order code, and writes one JSON
// workerMsg per line on stdout: each operation's outcome, each finished
// order, its Hook counters every 250 ms, and, just before it kills itself
// at a crash point, which point and operation.
const workerUsage = `usage: pagpolar worker -base-url URL -credential ID -store URL [flags] < order-indices

Internal: the worker process of ` + "`pagpolar chaos`" + `. The access token comes from
$PAGPOLAR_TOKEN. With $PAGPOLAR_CRASH_POINT=after-save|after-send the worker
kills itself with SIGKILL at that point of an operation, with probability
$PAGPOLAR_CRASH_PROBABILITY (default 1) per operation reaching it, once the
first $PAGPOLAR_CRASH_SKIP (default 0) have passed it.

flags:
`

// Environment variables of the worker.
const (
	envToken     = "PAGPOLAR_TOKEN"
	envCrashAt   = "PAGPOLAR_CRASH_POINT"
	envCrashProb = "PAGPOLAR_CRASH_PROBABILITY"
	envCrashSeed = "PAGPOLAR_CRASH_SEED"
	envCrashSkip = "PAGPOLAR_CRASH_SKIP"
)

// Crash points: where the worker kills itself.
const (
	crashAfterSave = "after-save" // the record is durable, the request not sent
	crashAfterSend = "after-send" // the answer arrived, it is not stored yet
)

// workerMsg is one line of the worker's stdout.
type workerMsg struct {
	T       string        `json:"t"` // "outcome", "order", "stats", "crash", "resume", "store"
	Outcome *outcome      `json:"outcome,omitempty"`
	Order   int           `json:"order"`           // "order": the finished order
	Stats   *report.Stats `json:"stats,omitempty"` // "stats": cumulative since start
	Point   string        `json:"point,omitempty"` // "crash"
	Op      string        `json:"op,omitempty"`    // "crash": the operation
	Resumed int           `json:"resumed,omitempty"`
	Settled int           `json:"settled,omitempty"` // "resume": operations ResumeAll settled
	// "store": the worker waited this long for its store to answer again
	// (at start-up, or between orders after calls failed as unavailable).
	WaitedMS int64 `json:"waited_ms,omitempty"`
}

type workerConfig struct {
	baseURL     string
	credential  string
	store       string
	seed        int64
	window      time.Duration
	concurrency int
	calls       int
	resume      bool
	name        string
}

func parseWorkerFlags(args []string, stderr io.Writer) (*workerConfig, error) {
	cfg := &workerConfig{}
	fs := flag.NewFlagSet("pagpolar worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, workerUsage); fs.PrintDefaults() }
	fs.StringVar(&cfg.baseURL, "base-url", "", "API base URL (the chaos parent's fake)")
	fs.StringVar(&cfg.credential, "credential", "", "credential ID")
	fs.StringVar(&cfg.store, "store", "", "key store URL shared with the other workers")
	fs.Int64Var(&cfg.seed, "seed", 1, "seed the orders are derived from (as the parent's)")
	fs.DurationVar(&cfg.window, "window", time.Second, "the in-processing window (as the fake's)")
	fs.IntVar(&cfg.concurrency, "concurrency", 16, "orders in flight at once")
	fs.IntVar(&cfg.calls, "calls", 5, "calls per operation before reporting it unsettled (0: no limit)")
	fs.BoolVar(&cfg.resume, "resume", false, "run ResumeAll before the orders, as a restarted service does")
	fs.StringVar(&cfg.name, "name", "worker", "name in lease owners")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	switch {
	case fs.NArg() > 0:
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case cfg.baseURL == "" || cfg.credential == "" || cfg.store == "":
		return nil, errors.New("-base-url, -credential and -store are required")
	case cfg.concurrency <= 0:
		return nil, errors.New("-concurrency must be positive")
	case cfg.window < 50*time.Millisecond:
		return nil, errors.New("-window must be at least 50ms")
	}
	return cfg, nil
}

// crashPlan is where and how often a worker kills itself.
type crashPlan struct {
	point string
	prob  float64
	mu    sync.Mutex
	skip  int // matching events still to let pass
	rng   *mathrand.Rand
}

func crashFromEnv() (*crashPlan, error) {
	p := &crashPlan{point: os.Getenv(envCrashAt), prob: 1}
	switch p.point {
	case "":
		return p, nil
	case crashAfterSave, crashAfterSend:
	default:
		return nil, fmt.Errorf("%s=%q: want %s or %s", envCrashAt, p.point, crashAfterSave, crashAfterSend)
	}
	if v := os.Getenv(envCrashProb); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f > 1 {
			return nil, fmt.Errorf("%s=%q: want a probability in [0, 1]", envCrashProb, v)
		}
		p.prob = f
	}
	if v := os.Getenv(envCrashSkip); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%s=%q: want a count >= 0", envCrashSkip, v)
		}
		p.skip = n
	}
	seed := time.Now().UnixNano()
	if v := os.Getenv(envCrashSeed); v != "" {
		s, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s=%q: want an integer", envCrashSeed, v)
		}
		seed = s
	}
	p.rng = mathrand.New(mathrand.NewSource(seed))
	return p, nil
}

// hits reports whether e is the plan's crash point and the coin says crash.
func (p *crashPlan) hits(e pagpolar.Event) bool {
	switch {
	case p.point == crashAfterSave && e.Kind == pagpolar.EventSaved:
	case p.point == crashAfterSend && e.Kind == pagpolar.EventSent:
	default:
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.skip > 0 {
		p.skip--
		return false
	}
	return p.rng.Float64() < p.prob
}

// die ends the process the way a power cut or the OOM killer would: SIGKILL
// (on Windows, TerminateProcess), no deferred function, no flush. The caller
// never continues.
func die() {
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		_ = p.Kill()
	}
	for {
		time.Sleep(time.Hour) // the kill is on its way; this goroutine must not send
	}
}

// lineWriter writes one JSON value per line, whole, from many goroutines.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) write(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only our own plain structs
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// One write per line, unbuffered: what was written before a SIGKILL
	// has reached the parent's pipe.
	_, _ = l.w.Write(append(b, '\n'))
}

// runWorker is the hidden `pagpolar worker`.
func runWorker(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return workerMain(ctx, args, os.Stdin, stdout, stderr)
}

func workerMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cfg, err := parseWorkerFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "pagpolar worker: %v\n", err)
		return 2
	}
	token := os.Getenv(envToken)
	if token == "" {
		fmt.Fprintf(stderr, "pagpolar worker: $%s is required\n", envToken)
		return 2
	}
	crash, err := crashFromEnv()
	if err != nil {
		fmt.Fprintf(stderr, "pagpolar worker: %v\n", err)
		return 2
	}
	orders, err := readOrderIndices(stdin)
	if err != nil {
		fmt.Fprintf(stderr, "pagpolar worker: reading order indices: %v\n", err)
		return 2
	}
	out := &lineWriter{w: stdout}
	opened, closeStore, err := openStoreWaiting(ctx, cfg.store, out)
	if err != nil {
		fmt.Fprintf(stderr, "pagpolar worker: opening the key store: %v\n", err)
		return 1
	}
	defer func() { _ = closeStore() }()
	store := &storeWatch{Store: opened}
	col := report.NewCollector()
	hook := func(ctx context.Context, e pagpolar.Event) {
		col.Observe(ctx, e)
		if crash.point != "" && crash.hits(e) {
			out.write(workerMsg{T: "crash", Point: crash.point, Op: e.OperationID})
			die()
		}
	}
	owner := fmt.Sprintf("%s-pid%d", cfg.name, os.Getpid())
	c, err := newScenarioClient(cfg.baseURL, cfg.credential, token, store, cfg.window, cfg.concurrency, hook, owner)
	if err != nil {
		fmt.Fprintf(stderr, "pagpolar worker: %v\n", err)
		return 1
	}

	stats := func() {
		s := col.Snapshot()
		out.write(workerMsg{T: "stats", Stats: &s})
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	stopStats := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stopStats:
				return
			case <-tick.C:
				stats()
			}
		}
	})

	if cfg.resume {
		rs, err := c.ResumeAll(ctx)
		if err != nil {
			fmt.Fprintf(stderr, "pagpolar worker: ResumeAll: %v\n", err)
		}
		settled := 0
		for _, r := range rs {
			if r.State.Settled() {
				settled++
			}
		}
		out.write(workerMsg{T: "resume", Resumed: len(rs), Settled: settled})
	}

	run := &orderRunner{c: c, calls: cfg.calls, pause: cfg.window / 10}
	forEachOrder(ctx, len(orders), cfg.concurrency, func(k int) {
		o := orderAt(cfg.seed, orders[k])
		var outs []outcome
		// An order cut short by a store outage is worked again once the
		// store answers (same operation IDs: the SDK settles before it
		// sends), a few times at most; what is still open then is left to
		// the parent's reconciler.
		for try := 0; try < 5; try++ {
			store.waitUp(ctx, out)
			before := store.failures()
			outs = run.process(ctx, o)
			if allFinal(outs) || store.failures() == before || ctx.Err() != nil {
				break
			}
		}
		for _, oc := range outs {
			out.write(workerMsg{T: "outcome", Outcome: &oc})
		}
		out.write(workerMsg{T: "order", Order: o.Index})
	})
	close(stopStats)
	wg.Wait()
	stats()
	if err := ctx.Err(); err != nil {
		fmt.Fprintf(stderr, "pagpolar worker: %v\n", err)
		return 1
	}
	return 0
}

func allFinal(outs []outcome) bool {
	for _, o := range outs {
		if !o.final() {
			return false
		}
	}
	return true
}

// readOrderIndices reads non-negative integers, one per line.
func readOrderIndices(r io.Reader) ([]int, error) {
	var out []int
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		i, err := strconv.Atoi(line)
		if err != nil || i < 0 {
			return nil, fmt.Errorf("line %q: want an order index", line)
		}
		out = append(out, i)
	}
	return out, sc.Err()
}
