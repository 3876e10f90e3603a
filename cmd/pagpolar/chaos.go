package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	mathrand "math/rand"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/report"
	"github.com/pagpolar/pagpolar-go/keystore/storeurl"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
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
"without an outcome" failed.

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

// chaosRun is the parent's state while workers run.
type chaosRun struct {
	cfg        *chaosConfig
	storeURL   string
	srv        *pagpolartest.Server
	stderr     io.Writer
	res        *results
	mu         sync.Mutex
	running    map[*incarnation]bool
	doneOrders []map[int]bool // per worker slot
	finals     map[string]outcome
	stats      report.Stats
	chaos      report.ChaosStats
	// forcedLeft counts the slots whose forced crash has not happened
	// (guarded by mu); forcedDone is closed when it reaches 0.
	forcedLeft int
	forcedDone chan struct{}
	outage     storeOutage
}

// storeOutage sums what the workers reported of waiting for their store
// (at start-up or between orders): a store outage is reported, not a
// reason to abort the run.
type storeOutage struct {
	Waits    int           `json:"waits"`
	Total    time.Duration `json:"total_ns"`
	Longest  time.Duration `json:"longest_ns"`
	Affected map[int]bool  `json:"-"` // worker slots that waited
}

func (o storeOutage) String() string {
	if o.Waits == 0 {
		return "store outages: none seen by the workers"
	}
	return fmt.Sprintf("store outages: %d waits by %d workers for their store to answer again, %v in all, longest %v (work resumed each time)",
		o.Waits, len(o.Affected), o.Total.Round(time.Millisecond), o.Longest.Round(time.Millisecond))
}

// chaosResult is a chaos run's report and what it saw of its store.
type chaosResult struct {
	*report.Report
	Outage storeOutage
}

// incarnation is one worker process.
type incarnation struct {
	slot, n   int
	cmd       *exec.Cmd
	killed    bool // by the parent (guarded by chaosRun.mu)
	forced    bool // runs a forced crash plan: never killed at random
	crashed   string
	lastStats report.Stats
	stderr    *tailBuffer
}

// forcedOver records that a slot's forced crash happened (or that the slot
// ended without one), and opens the gate of the other slots after the last.
func (r *chaosRun) forcedOver() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.forcedLeft--; r.forcedLeft == 0 {
		close(r.forcedDone)
	}
}

// chaos runs the whole scenario across processes and returns its report.
func chaos(ctx context.Context, cfg *chaosConfig, stderr io.Writer) (*chaosResult, error) {
	start := time.Now()
	srv, stopBursts, err := startScenarioFake(cfg.window, cfg.seed, cfg.faultRate)
	if err != nil {
		return nil, err
	}
	defer srv.Close()

	storeURL, cleanup, err := scenarioStoreURL(cfg.store)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	// Opening the store here first also runs its migration once, before
	// the workers race to it.
	store, closeStore, err := storeurl.Open(ctx, storeURL)
	if err != nil {
		return nil, fmt.Errorf("opening the key store: %w", err)
	}
	defer func() { _ = closeStore() }()

	r := &chaosRun{
		cfg: cfg, storeURL: storeURL, srv: srv, stderr: stderr, res: newResults(),
		running: map[*incarnation]bool{}, finals: map[string]outcome{},
		stats: report.NewStats(), chaos: report.ChaosStats{Workers: cfg.workers, CrashPoints: report.Counts{}},
	}
	slots := assignOrders(cfg.orders, cfg.workers)
	r.doneOrders = make([]map[int]bool, cfg.workers)
	for w := range r.doneOrders {
		r.doneOrders[w] = map[int]bool{}
	}
	r.forcedDone = make(chan struct{})
	for w := range slots {
		if cfg.crashFor(w, 0).forced {
			r.forcedLeft++
		}
	}
	if r.forcedLeft == 0 {
		close(r.forcedDone)
	}

	wctx, stopWorkers := context.WithCancel(ctx)
	defer stopWorkers()
	errs := make(chan error, cfg.workers)
	for w := range slots {
		go func(w int) { errs <- r.slot(wctx, w, slots[w]) }(w)
	}
	killerDone := make(chan struct{})
	go func() { defer close(killerDone); r.killer(wctx) }()
	progressDone := make(chan struct{})
	go func() { defer close(progressDone); r.progress(wctx) }()
	var firstErr error
	for range slots {
		if err := <-errs; err != nil && firstErr == nil {
			firstErr = err
			stopWorkers() // kills the other workers (exec.CommandContext)
		}
	}
	stopWorkers()
	<-killerDone
	<-progressDone
	stopBursts()
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	// The order system's reconciler, in this process: ResumeAll, then the
	// order code again for whatever no worker finished.
	col := report.NewCollector()
	c, err := newScenarioClient(srv.URL, srv.CredentialID, srv.AddToken(srv.CredentialID), store, cfg.window, cfg.concurrency, col.Observe, fmt.Sprintf("chaos-parent-pid%d", os.Getpid()))
	if err != nil {
		return nil, err
	}
	for i := 0; i < cfg.orders; i++ {
		// What no worker reported final is open.
		o := orderAt(cfg.seed, i)
		ch, ok := r.finals[chargeOpID(o)]
		if !ok {
			r.res.add(outcome{Order: i, OpID: chargeOpID(o), State: "unsettled"})
			continue
		}
		if _, ok := r.finals[refundOpID(o)]; !ok && ch.State == "succeeded" && o.Refund > 0 {
			r.res.add(outcome{Order: i, OpID: refundOpID(o), State: "unsettled"})
		}
	}
	settleStart := time.Now()
	settling := reconcile(ctx, c, store, srv.CredentialID, &orderRunner{c: c, pause: cfg.window / 10}, cfg.seed, cfg.orders, r.res, cfg.concurrency)
	settling.SettleMS = float64(time.Since(settleStart).Microseconds()) / 1000
	if errors.Is(ctx.Err(), context.Canceled) {
		return nil, fmt.Errorf("settling: %w", ctx.Err())
	}
	// Out of time or not, the run ends with its report: what stayed open
	// is in it, and why (settling.Stopped).
	r.stats.Add(col.Snapshot())
	vctx, vcancel := verifyContext(ctx)
	defer vcancel()
	ops, err := expectedOps(vctx, store, srv.CredentialID, cfg.seed, cfg.orders)
	if err != nil {
		return nil, err
	}
	ledger := srv.Ledger()
	sort.Strings(r.chaos.Disagreements)
	rep := &report.Report{
		Mode:      "chaos",
		Store:     redactURL(storeURL),
		Orders:    cfg.orders,
		FaultRate: cfg.faultRate,
		Seed:      cfg.seed,
		WindowMS:  float64(cfg.window.Microseconds()) / 1000,
		Check:     report.Verify(srv.CredentialID, ledger, ops),
		Obtained:  r.res.obtained(),
		Settling:  settling,
		SDK:       r.stats,
		Latency:   r.res.lat.Summary(),
		Chaos:     &r.chaos,
	}
	rep.Requests, rep.FaultsApplied = report.Traffic(ledger, srv.CredentialID, cfg.orders)
	rep.RunTimeMS = float64(time.Since(start).Microseconds()) / 1000
	r.mu.Lock()
	outage := r.outage
	r.mu.Unlock()
	return &chaosResult{Report: rep, Outage: outage}, nil
}

// assignOrders gives every order to two workers (one if there is only one
// worker): order i goes to workers i mod n and i+1 mod n, so that each pair
// of workers shares a third of the orders and meets on them at about the
// same time (both walk their list in order).
func assignOrders(orders, workers int) [][]int {
	out := make([][]int, workers)
	for i := range orders {
		a := i % workers
		out[a] = append(out[a], i)
		if workers > 1 {
			b := (i + 1) % workers
			out[b] = append(out[b], i)
		}
	}
	return out
}

// slot keeps worker w running until it has finished its orders: each
// process gets the orders not reported finished yet, and is restarted when
// it dies.
func (r *chaosRun) slot(ctx context.Context, w int, assigned []int) error {
	// A forced crash plan holds until a process crashes at its point; the
	// slots without one wait until every forced crash has happened.
	forced := r.cfg.crashFor(w, 0)
	if forced.forced {
		defer func() {
			if forced.forced {
				r.forcedOver() // ended without the crash: do not hold the others
			}
		}()
	} else {
		select {
		case <-r.forcedDone:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	failures, idle := 0, 0
	for n := 0; ; n++ {
		remaining := r.remaining(w, assigned)
		if len(remaining) == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		plan := r.cfg.crashFor(w, n)
		if forced.forced {
			plan = forced
		} else {
			plan.forced = false
		}
		inc, progressed, err := r.startAndWait(ctx, w, n, remaining, plan)
		if err != nil {
			return err
		}
		if forced.forced && inc.crashed == forced.point {
			forced.forced = false
			r.forcedOver()
		}
		r.mu.Lock()
		state := inc.cmd.ProcessState
		switch {
		case state.Success():
			failures = 0
		case inc.killed:
			r.chaos.Killed++
		case inc.crashed != "":
			r.chaos.CrashPoints[inc.crashed]++
		default:
			r.chaos.OtherExits++
			if !progressed {
				failures++
			}
		}
		r.stats.Add(inc.lastStats)
		r.mu.Unlock()
		if progressed {
			idle = 0
		} else if idle++; idle >= 20 {
			return fmt.Errorf("worker %d: %d processes in a row finished no order (is -crash-probability too high?)", w, idle)
		}
		if !state.Success() && !inc.killed && inc.crashed == "" {
			fmt.Fprintf(r.stderr, "chaos: worker %d process %d exited: %v\n%s", w, n, state, inc.stderr.String())
			if failures >= 3 {
				return fmt.Errorf("worker %d failed %d times in a row without progress (last: %v)", w, failures, state)
			}
		}
	}
}

// remaining lists the orders of a slot not reported finished.
func (r *chaosRun) remaining(w int, assigned []int) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for _, i := range assigned {
		if !r.doneOrders[w][i] {
			out = append(out, i)
		}
	}
	return out
}

// startAndWait runs one worker process over orders and reads its reports
// until it exits.
func (r *chaosRun) startAndWait(ctx context.Context, w, n int, orders []int, cr workerCrash) (*incarnation, bool, error) {
	cfg := r.cfg
	args := []string{"worker",
		"-base-url", r.srv.URL, "-credential", r.srv.CredentialID, "-store", r.storeURL,
		"-seed", strconv.FormatInt(cfg.seed, 10), "-window", cfg.window.String(),
		"-concurrency", strconv.Itoa(cfg.concurrency), "-name", fmt.Sprintf("w%d.%d", w, n),
	}
	if n > 0 {
		args = append(args, "-resume") // as a restarted service does
	}
	cmd := exec.CommandContext(ctx, cfg.exe, args...)
	env := append(os.Environ(), cfg.env...)
	env = append(env, envToken+"="+r.srv.AddToken(r.srv.CredentialID))
	if cr.point != "" {
		env = append(env, envCrashAt+"="+cr.point, envCrashProb+"="+strconv.FormatFloat(cr.prob, 'g', -1, 64),
			envCrashSkip+"="+strconv.Itoa(cr.skip), envCrashSeed+"="+strconv.FormatInt(cfg.seed*1000+int64(w*100+n), 10))
	}
	cmd.Env = env
	var in bytes.Buffer
	for _, i := range orders {
		in.WriteString(strconv.Itoa(i))
		in.WriteByte('\n')
	}
	cmd.Stdin = &in
	inc := &incarnation{slot: w, n: n, cmd: cmd, forced: cr.forced, stderr: &tailBuffer{max: 8 << 10}}
	cmd.Stderr = inc.stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, false, fmt.Errorf("worker %d: %w", w, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, false, fmt.Errorf("starting worker %d: %w", w, err)
	}
	r.mu.Lock()
	r.running[inc] = true
	r.chaos.Incarnations++
	r.mu.Unlock()

	progressed := false
	sc := bufio.NewScanner(pipe)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var m workerMsg
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			// A SIGKILL can only cut the last line; anything else is a bug.
			fmt.Fprintf(r.stderr, "chaos: worker %d: unreadable line %q\n", w, truncateLine(sc.Text()))
			continue
		}
		if r.handle(inc, m) {
			progressed = true
		}
	}
	_ = cmd.Wait()
	r.mu.Lock()
	delete(r.running, inc)
	r.mu.Unlock()
	return inc, progressed, nil
}

// handle applies one report of a worker; it reports whether an order was
// finished.
func (r *chaosRun) handle(inc *incarnation, m workerMsg) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch m.T {
	case "outcome":
		if m.Outcome == nil {
			return false
		}
		o := *m.Outcome
		r.chaos.Completions++
		if !o.final() {
			return false
		}
		if prev, ok := r.finals[o.OpID]; ok {
			if prev.State != o.State || prev.Ref != o.Ref {
				r.chaos.Disagreements = append(r.chaos.Disagreements,
					fmt.Sprintf("%s: %s %s, then %s %s", o.OpID, prev.State, prev.Ref, o.State, o.Ref))
			}
			return false
		}
		r.finals[o.OpID] = o
		r.res.add(o)
	case "order":
		r.doneOrders[inc.slot][m.Order] = true
		return true
	case "stats":
		if m.Stats != nil {
			inc.lastStats = *m.Stats
		}
	case "crash":
		inc.crashed = m.Point
	case "store":
		d := time.Duration(m.WaitedMS) * time.Millisecond
		o := &r.outage
		o.Waits++
		o.Total += d
		o.Longest = max(o.Longest, d)
		if o.Affected == nil {
			o.Affected = map[int]bool{}
		}
		o.Affected[inc.slot] = true
	}
	return false
}

// killer SIGKILLs a random running worker about every cfg.killEvery (never
// one whose forced crash is still to come).
func (r *chaosRun) killer(ctx context.Context) {
	if r.cfg.killEvery <= 0 {
		return
	}
	rng := mathrand.New(mathrand.NewSource(r.cfg.seed + 11))
	for kills := 0; r.cfg.maxKills == 0 || kills < r.cfg.maxKills; {
		wait := r.cfg.killEvery/2 + time.Duration(rng.Int63n(int64(r.cfg.killEvery)))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		r.mu.Lock()
		var live []*incarnation
		for inc := range r.running {
			if inc.crashed == "" && !inc.killed && !inc.forced {
				live = append(live, inc)
			}
		}
		sort.Slice(live, func(i, j int) bool { return live[i].slot < live[j].slot })
		if len(live) > 0 {
			inc := live[rng.Intn(len(live))]
			// Marked before the kill: the slot reads it after Wait.
			inc.killed = true
			if err := inc.cmd.Process.Kill(); err != nil {
				inc.killed = false // it had exited already
			} else {
				kills++
			}
		}
		r.mu.Unlock()
	}
}

// progress prints a line every few seconds (every 200 ms, rewritten in
// place, on a terminal).
func (r *chaosRun) progress(ctx context.Context) {
	tty := isTerminal(r.stderr)
	every := 5 * time.Second
	if tty {
		every = 200 * time.Millisecond
	}
	start := time.Now()
	t := time.NewTicker(every)
	defer t.Stop()
	show := func(last bool) {
		r.mu.Lock()
		done := 0
		for _, d := range r.doneOrders {
			done += len(d)
		}
		line := fmt.Sprintf("chaos: %d/%d worker orders done, %d processes started, %d killed, %d crash points, %d store waits, %s",
			done, 2*r.cfg.orders, r.chaos.Incarnations, r.chaos.Killed, r.chaos.CrashPoints.Total(), r.outage.Waits, time.Since(start).Round(100*time.Millisecond))
		if r.cfg.workers == 1 {
			line = strings.Replace(line, fmt.Sprintf("/%d ", 2*r.cfg.orders), fmt.Sprintf("/%d ", r.cfg.orders), 1)
		}
		r.mu.Unlock()
		switch {
		case tty && last:
			fmt.Fprintf(r.stderr, "\r\033[K%s\n", line)
		case tty:
			fmt.Fprintf(r.stderr, "\r\033[K%s", line)
		default:
			fmt.Fprintln(r.stderr, line)
		}
	}
	for {
		select {
		case <-ctx.Done():
			show(true)
			return
		case <-t.C:
			show(false)
		}
	}
}

// tailBuffer keeps the last max bytes written to it (a worker's stderr).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

func truncateLine(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
