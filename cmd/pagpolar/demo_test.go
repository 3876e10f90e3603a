package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/longtest"
	"github.com/pagpolar/pagpolar-go/internal/report"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// TestDemo runs `pagpolar demo` as a user does (flags, default SQLite store
// in a temporary file, JSON report) with every fault kind at a high rate,
// and checks the report: no double effect, no operation without an outcome,
// records in line with the ledger, and every fault kind met.
func TestDemo(t *testing.T) {
	var out, errb bytes.Buffer
	code := runDemo(context.Background(), []string{"-orders", "400", "-concurrency", "32", "-fault-rate", "0.5", "-seed", "3", "-json"}, &out, &errb)
	var rep report.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("exit %d, report not JSON: %v\n%s\n%s", code, err, out.String(), errb.String())
	}
	if code != 0 || !rep.OK() {
		t.Fatalf("exit %d, report:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	c := rep.Check
	if len(c.Duplicates)+len(c.FalseFailures)+len(c.WithoutEffect)+len(c.Orphans)+len(c.Unfinished)+len(c.Unknown) != 0 {
		t.Fatalf("check %+v", c)
	}
	if c.Effects+c.Declined < rep.Orders || c.ByKind["refund"] == 0 || c.ByKind["subscription"] == 0 || c.ByKind["plan_change"] == 0 || c.Declined == 0 {
		t.Fatalf("want every order charged or declined, and some refunds, subscriptions and plan changes: %+v", c)
	}
	// The temporary store is deleted at exit: the report does not name
	// its path, it says how to keep one.
	if !strings.Contains(rep.Store, "temporary SQLite file") || strings.Contains(rep.Store, os.TempDir()) {
		t.Errorf("default store %q, want a temporary SQLite file, not its path", rep.Store)
	}
	if strings.Contains(out.String(), "null") {
		t.Errorf("-json prints null:\n%s", out.String())
	}
	// Every fault kind of the mix was met (at this rate and size each is
	// expected dozens of times; the seed makes the run repeatable).
	for _, f := range []pagpolartest.FaultAction{
		pagpolartest.FaultCommitThenDrop, pagpolartest.FaultCommitDropRelease, pagpolartest.FaultDropBeforeProcessing,
		pagpolartest.FaultCommitThen500, pagpolartest.FaultCommitThen500After, pagpolartest.Fault500NoCommit,
		pagpolartest.FaultHold, pagpolartest.FaultLookupLag, pagpolartest.FaultGateway, pagpolartest.FaultGatewayAfterCommit,
		pagpolartest.FaultRateLimit, pagpolartest.FaultUnavailable, pagpolartest.FaultLatency, pagpolartest.FaultDecline,
	} {
		if rep.FaultsApplied[f.String()] == 0 {
			t.Errorf("fault %s never applied: %v", f, rep.FaultsApplied)
		}
	}
	// Ambiguity happened and was settled by lookups, not by blind resends.
	if rep.Obtained["lookup"] == 0 || rep.SDK.Lookups == 0 || rep.SDK.Ambiguous.Total() == 0 {
		t.Errorf("no operation settled by lookup: obtained %v, sdk %+v", rep.Obtained, rep.SDK)
	}
	// The checkout deadline leaves some operations open; the reconciler
	// settles every one of them.
	if s := rep.Settling; s.LeftUnsettled == 0 || s.StillUnsettledEnd != 0 || s.SettledByResume+s.SettledByReissue < s.LeftUnsettled {
		t.Errorf("settling %+v: want some left open by checkout and all settled after", s)
	}
	if rep.Latency.N == 0 || rep.Requests.PerOrder < 1 || rep.RunTimeMS <= 0 {
		t.Errorf("latency %+v, requests %+v, run time %v", rep.Latency, rep.Requests, rep.RunTimeMS)
	}
	// Not a terminal: every phase's progress comes as whole lines.
	for _, want := range []string{"checkout: 400/400 orders", "settling, round 1: looking up", "settling, round 1: calling again", "verify: 400/400 orders"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("progress lacks %q: %q", want, errb.String())
		}
	}
	if strings.Contains(errb.String(), "\r") {
		t.Errorf("progress on a non-terminal rewrites lines: %q", errb.String())
	}
}

// TestDemoSeedReproducesFaults: two runs with one seed at -concurrency 1
// meet the same faults and reach the same verdict and effects; this holds by
// construction (each fault is decided by the seed, the order and the
// attempt, never by arrival order or timing). At concurrency 16 the orders
// share the client's retry budget, so whether an order makes another attempt
// (and meets that attempt's fault) depends on timing: a measured pair of
// runs differed by one 500_no_commit. There only the verdict is compared.
func TestDemoSeedReproducesFaults(t *testing.T) {
	longtest.Skip(t)
	run := func(conc string) report.Report {
		var out, errb bytes.Buffer
		code := runDemo(context.Background(), []string{"-orders", "120", "-concurrency", conc, "-fault-rate", "0.5", "-window", "200ms", "-seed", "11", "-store", "memory:", "-json"}, &out, &errb)
		var rep report.Report
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil || code != 0 {
			t.Fatalf("exit %d: %v\n%s\n%s", code, err, out.String(), errb.String())
		}
		return rep
	}
	a, b := run("1"), run("1")
	if !maps.Equal(a.FaultsApplied, b.FaultsApplied) {
		t.Errorf("-concurrency 1: same seed, other faults:\n%v\n%v", a.FaultsApplied, b.FaultsApplied)
	}
	if a.OK() != b.OK() || a.Check.Effects != b.Check.Effects || a.Check.Declined != b.Check.Declined || !maps.Equal(a.Check.ByKind, b.Check.ByKind) {
		t.Errorf("-concurrency 1: same seed, other outcome: %+v\n%+v", a.Check, b.Check)
	}
	if a.FaultsApplied.Total() < 20 {
		t.Errorf("-concurrency 1: only %d faults met: %v", a.FaultsApplied.Total(), a.FaultsApplied)
	}
	for _, r := range []report.Report{run("16"), run("16")} {
		if !r.OK() {
			t.Errorf("-concurrency 16: verdict not OK: %+v", r.Check)
		}
	}
}

// TestProgressOnATerminal: on a terminal the line is rewritten in place
// and ends with a newline when the phase ends; otherwise each line is whole.
func TestProgressOnATerminal(t *testing.T) {
	var b bytes.Buffer
	p := startProgress(&b, true, func(time.Duration) string { return "phase: 1/1" })
	p.stop()
	if got := b.String(); !strings.HasPrefix(got, "\r\033[Kphase: 1/1") || !strings.HasSuffix(got, "phase: 1/1\n") {
		t.Fatalf("terminal progress %q", got)
	}
	b.Reset()
	p = startProgress(&b, false, func(time.Duration) string { return "phase: 1/1" })
	p.stop()
	if got := b.String(); got != "phase: 1/1\n" {
		t.Fatalf("plain progress %q", got)
	}
	(*progress)(nil).stop() // a phase not shown
}

// TestDemoTextReport checks the text report's verdict lines on a clean run
// without faults.
func TestDemoTextReport(t *testing.T) {
	var out, errb bytes.Buffer
	if code := runDemo(context.Background(), []string{"-orders", "40", "-fault-rate", "0", "-store", "memory:"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "pagpolar demo: OK") {
		t.Errorf("the last line is not the verdict: %q", last)
	}
	for _, want := range []string{"pagpolar demo: OK", "charged twice (two successful effects for one operation)  0", "operations without an outcome at the end                  0", "key store             memory:", "settled by webhook events               none needed"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// TestDemoEveryShape runs the demo against the fake answering in each
// plausible shape and with the client's clock off: every run must report
// no double effect, no false failure and no success without an effect
// (unknown outcomes are allowed, and counted). The runs are independent
// (each its own fake, store and client) and mostly wait on the settle
// windows, so a few go at once; `demo -shapes all` runs the same shapes
// one after another.
func TestDemoEveryShape(t *testing.T) {
	longtest.Skip(t)
	type run struct {
		name string
		args []string
		rep  report.Report
		code int
		err  string
	}
	var runs []*run
	for _, sh := range append([]pagpolartest.Shape{pagpolartest.ShapeToday}, pagpolartest.AllShapes()...) {
		runs = append(runs, &run{name: "shape " + string(sh), args: []string{"-shapes", string(sh), "-orders", "120", "-concurrency", "16", "-fault-rate", "0.5", "-seed", "5", "-json"}})
	}
	for _, off := range []string{"5m", "-5m", "3s", "-3s"} {
		runs = append(runs, &run{name: "client clock " + off, args: []string{"-client-clock-offset", off, "-orders", "120", "-concurrency", "16", "-fault-rate", "0.5", "-json"}})
	}
	const atOnce = 4
	sem := make(chan struct{}, atOnce)
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			var out, errb bytes.Buffer
			r.code = runDemo(context.Background(), r.args, &out, &errb)
			if err := json.Unmarshal(out.Bytes(), &r.rep); err != nil {
				r.err = fmt.Sprintf("exit %d, not a JSON report: %v\n%s", r.code, err, tail(errb.String(), 2000))
			}
		})
	}
	wg.Wait()
	for _, r := range runs {
		if r.err != "" {
			t.Errorf("%s: %s", r.name, r.err)
			continue
		}
		rep, c := r.rep, r.rep.Check
		wrong := len(c.Duplicates) + len(c.FalseFailures) + len(c.WithoutEffect) + len(c.Orphans)
		if r.name == "shape "+string(pagpolartest.ShapeDateStepBack) {
			// An API clock stepped back an hour makes lists look like stored
			// copies for a while: operations stay unknown or not executed at
			// the end (liveness, reported), never a wrong answer (asserted).
			if wrong != 0 {
				t.Errorf("%s: %+v", r.name, c)
			}
			t.Logf("%s: %d unfinished, %d unknown at the end (liveness)", r.name, len(c.Unfinished), len(c.Unknown))
			continue
		}
		if r.code != 0 || !rep.OK() || wrong != 0 {
			t.Errorf("%s: exit %d, %+v", r.name, r.code, c)
		}
		t.Logf("%s: %d operations, %d unknown at the end, settling %.1fs", r.name, c.Operations, len(c.Unknown), rep.Settling.SettleMS/1000)
	}
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

func TestDemoFlags(t *testing.T) {
	for _, args := range [][]string{{"-orders", "0"}, {"-concurrency", "-1"}, {"-fault-rate", "1.5"}, {"-window", "1ms"}, {"stray"}, {"-shapes", "nope"}} {
		var errb bytes.Buffer
		if code := runDemo(context.Background(), args, &bytes.Buffer{}, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errb.String())
		}
	}
	var errb bytes.Buffer
	// A store the demo cannot use is a usage error (2), not a failed
	// ledger check (1).
	if code := runDemo(context.Background(), []string{"-store", "nosuch://x"}, &bytes.Buffer{}, &errb); code != demoExitUsage || !strings.Contains(errb.String(), "key store") {
		t.Errorf("bad store URL: exit %d, %q", code, errb.String())
	}
	if code := runDemo(context.Background(), []string{"-store", "sqlite:" + filepath.Join(t.TempDir(), "no", "dir", "x.db")}, &bytes.Buffer{}, &errb); code != demoExitUsage {
		t.Errorf("a SQLite file that cannot be created: exit %d, %q", code, errb.String())
	}
}

// TestFaultMixRates checks that the injected coins add up to the asked
// rate: the first-match order makes each coin conditional on the earlier.
func TestFaultMixRates(t *testing.T) {
	const rate = 0.3
	front, processing := 1.0, 1.0
	for _, f := range faultMix(rate, time.Second) {
		if f.Route != "" {
			continue // read faults
		}
		switch f.Action {
		case pagpolartest.FaultDropBeforeProcessing, pagpolartest.FaultGateway, pagpolartest.FaultRateLimit, pagpolartest.FaultUnavailable, pagpolartest.FaultLatency:
			front *= 1 - f.Probability
		default:
			processing *= 1 - f.Probability
		}
	}
	if got := 1 - front; got < 0.4*rate-1e-9 || got > 0.4*rate+1e-9 {
		t.Errorf("front faults hit %.4f of requests, want %.4f", got, 0.4*rate)
	}
	if got := 1 - processing; got < 0.6*rate-1e-9 || got > 0.6*rate+1e-9 {
		t.Errorf("processing faults hit %.4f of requests, want %.4f", got, 0.6*rate)
	}
	if faultMix(0, time.Second) != nil {
		t.Error("rate 0 must inject nothing")
	}
}

// TestDemoWebhooksSettleUnknowns: on a fake without the subscription
// lookup, a subscribe whose answer was lost stays "outcome unknown" through
// the reconciler; the demo then delivers the run's webhook events to an
// inbox whose Settle is its client and counts, from the records' states
// before and after, how many the events settled: some, with no request
// sent, no double effect and no false failure. The rest (a subscribe that
// never took effect has no event; one sent before the client knew the
// API's clock cannot be dated) stay unknown, and are counted too.
func TestDemoWebhooksSettleUnknowns(t *testing.T) {
	longtest.Skip(t)
	dir := t.TempDir()
	var out, errb bytes.Buffer
	code := runDemo(context.Background(), []string{"-orders", "200", "-concurrency", "32", "-fault-rate", "0.5", "-seed", "3",
		"-no-subscription-lookup", "-store", "sqlite:" + dir + "/keys.db?declared_new=test", "-json"}, &out, &errb)
	var rep report.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("exit %d, report not JSON: %v\n%s\n%s", code, err, out.String(), errb.String())
	}
	c, w := rep.Check, rep.Webhooks
	if code != 0 || !rep.OK() || len(c.Duplicates)+len(c.FalseFailures)+len(c.WithoutEffect)+len(c.Orphans)+len(c.Unfinished) != 0 {
		t.Fatalf("exit %d, check %+v", code, c)
	}
	if w == nil || w.UnknownBefore == 0 || w.Settled == 0 || w.Events == 0 || w.Deliveries < w.Events {
		t.Fatalf("webhooks %+v: want unknown operations, some settled by the run's events", w)
	}
	if w.Requests != 0 || w.Refused != 0 || len(w.Other) != 0 {
		t.Fatalf("webhooks %+v: want no request to the API, no refused delivery, nothing settled but successes", w)
	}
	if w.Settled+w.StillUnknown != w.UnknownBefore {
		t.Fatalf("webhooks %+v: settled and still unknown must add up to the unknown before", w)
	}
	// What stays unknown at the end is what the events left (the orders
	// carried on may add their own), and none of it is a subscribe the
	// events settled: the check reads the same store.
	if len(c.Unknown) < w.StillUnknown || c.States["unknown"] != len(c.Unknown) {
		t.Errorf("check: %d unknown (%v), webhooks left %d", len(c.Unknown), c.States, w.StillUnknown)
	}
	if !strings.Contains(errb.String(), "webhook events: delivering the run's") {
		t.Errorf("no progress line for the webhook phase: %s", errb.String())
	}
	t.Logf("webhooks: %+v; unknown at the end %d", *w, len(c.Unknown))
}

// TestDemoAsync: on a fake that decides later (cards pending, refunds
// requested, plan changes scheduled) with faults, every operation whose
// effect exists is answered — succeeded with its decision — and none is
// left unknown while its effect exists; nothing is charged twice.
func TestDemoAsync(t *testing.T) {
	var out, errb bytes.Buffer
	code := runDemo(context.Background(), []string{"-async", "-orders", "200", "-concurrency", "32", "-seed", "5", "-json"}, &out, &errb)
	var rep report.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("exit %d, report not JSON: %v\n%s\n%s", code, err, out.String(), errb.String())
	}
	if code != 0 || !rep.OK() {
		t.Fatalf("exit %d, report:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	c := rep.Check
	if len(c.UnknownWithEffect) != 0 {
		t.Fatalf("silent where the API answered: %v", c.UnknownWithEffect)
	}
	// Undecided decisions were answered (not turned into unknown), and
	// cards declined after pending were counted as such.
	if c.Decisions["pending"] == 0 || c.Decisions["requested"]+c.Decisions["scheduled"] == 0 || c.DeclinedLater == 0 {
		t.Fatalf("decisions %v, declined later %d: want pending, requested or scheduled, and some declined later", c.Decisions, c.DeclinedLater)
	}
}
