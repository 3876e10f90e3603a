package main

// One demo run, phase by phase: set-up (the fake, the key store, the client), the
// checkout pass, settling, the webhook events, verification, and the report it assembles.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/internal/report"
	"github.com/pagpolar/pagpolar-go/keystore/storeurl"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// demo runs the whole scenario and returns its report.
func demo(ctx context.Context, cfg *demoConfig, stderr io.Writer) (*report.Report, error) {
	start := time.Now()
	shapes, err := pagpolartest.ParseShapes(cfg.shapes)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errDemoSetup, err)
	}
	var fakeOpts []pagpolartest.Option
	if cfg.noSubLookup {
		fakeOpts = append(fakeOpts, pagpolartest.WithoutSubscriptionLookup())
	}
	if cfg.async {
		fakeOpts = append(fakeOpts, demoAsync(cfg.window))
	}
	srv, err := startDemoFake(cfg.window, cfg.seed, cfg.faultRate, cfg.orders, fakeOpts, shapes...)
	if err != nil {
		return nil, err
	}
	defer srv.Close()

	storeURL, cleanup, err := scenarioStoreURL(cfg.store)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errDemoSetup, err)
	}
	defer cleanup()
	store, closeStore, err := storeurl.Open(ctx, storeURL)
	if err != nil {
		return nil, fmt.Errorf("%w: opening the key store: %w", errDemoSetup, err)
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
	run := &orderRunner{c: c, calls: checkoutCalls, deadline: checkoutDeadline(cfg.window), pause: cfg.window / 10, awaitPaid: cfg.async}
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
	if errors.Is(ctx.Err(), context.Canceled) {
		return nil, fmt.Errorf("settling: %w", ctx.Err())
	}
	if settling.Stopped != "" {
		// What is still open stays so: the report says what and why.
		var vcancel context.CancelFunc
		ctx, vcancel = verifyContext(ctx)
		defer vcancel()
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

// demoAsync is the fake's asynchronous decisions in a demo: every card
// sale, refund and plan change is answered undecided and decided half an
// in-processing window later (one card in seven declined then).
func demoAsync(window time.Duration) pagpolartest.Option {
	return pagpolartest.WithAsync(pagpolartest.Async{Cards: true, Refunds: true, PlanChanges: true, DecideAfter: window / 2, DeclineEvery: 7})
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
