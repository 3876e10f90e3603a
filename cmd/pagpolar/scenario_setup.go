package main

// The scenario shared by demo, chaos and worker, its set-up: the client's policy,
// the fake and the faults injected into it.

import (
	"log/slog"
	mathrand "math/rand"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

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

// faultMix returns the faults of a run: every kind docs/SAFETY.md names,
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
