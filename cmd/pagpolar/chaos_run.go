package main

// One chaos run: the fake, the workers, the final settling, and the report.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/report"
	"github.com/pagpolar/pagpolar-go/keystore/storeurl"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

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

// declaredNewURL is raw with the store's declared_new parameter, which
// declares the store new only if it is found empty and initialised by this
// open: the run's fake credential is new, so nothing was sent with records
// such a store could have lost, and the workers need not look every first
// send up (keystore.HistoryProver). Only the parent opens the store so; the
// workers get raw: a worker that opens the store after it lost everything
// (a Redis restarted without persistence) finds it empty again and must see
// an unproven history, not declare one.
func declaredNewURL(raw string) string {
	if strings.Contains(raw, "declared_new=") {
		return raw
	}
	sep := "?"
	if strings.Contains(raw, "?") {
		sep = "&"
	}
	return raw + sep + "declared_new=" + url.QueryEscape("pagpolar chaos: a store this run initialised")
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
	// the workers race to it, and declares a store this open initialises
	// new (see declaredNewURL).
	store, closeStore, err := storeurl.Open(ctx, declaredNewURL(storeURL))
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
