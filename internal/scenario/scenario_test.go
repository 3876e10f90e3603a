package scenario

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/internal/longtest"
)

// figures sums what the scenarios of one test found.
type figures struct {
	mu                                   sync.Mutex
	scenarios, calls, unknown, unsettled int
	exposures                            int
	reasons                              map[string]int // why calls answered unknown
	// perScenario, when set (SCENARIO_FIGURES=file), gets one line per
	// scenario: its index, calls, unknown answers, operations unsettled
	// after the final ResumeAll, and failures. Two runs with one seed draw
	// the same scenarios, so their lines compare scenario by scenario (a
	// change that leaves more operations unknown shows where).
	perScenario io.Writer
}

func (f *figures) add(r Result) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.scenarios++
	f.calls += r.Calls
	f.unknown += r.Unknown
	f.unsettled += r.Unsettled
	f.exposures += len(r.Violations) - len(r.Failures())
	if f.perScenario != nil {
		fmt.Fprintf(f.perScenario, "%d %d %d %d %d\n", f.scenarios, r.Calls, r.Unknown, r.Unsettled, len(r.Failures()))
	}
	for _, rep := range r.Reports {
		var ou *pagpolar.OutcomeUnknownError
		if rep.Step > 0 && rep.Outcome == Unknown && errors.As(rep.Err, &ou) {
			if f.reasons == nil {
				f.reasons = map[string]int{}
			}
			f.reasons[reasonClass(ou.Reason)]++
		}
	}
}

// reasonClass shortens an unknown's reason to its kind (identifiers cut).
func reasonClass(r string) string {
	words := strings.Fields(r)
	var keep []string
	for _, w := range words {
		if strings.ContainsAny(w, "0123456789") {
			w = "…"
		}
		keep = append(keep, w)
		if len(keep) == 8 {
			break
		}
	}
	return strings.Join(keep, " ")
}

// checkScenario runs sc and fails t with the minimal reproduction.
func checkScenario(t interface {
	Helper()
	Fatalf(string, ...any)
}, sc Scenario, fig *figures) {
	t.Helper()
	res, err := Run(sc)
	if err != nil {
		t.Fatalf("run: %v\nscenario:\n%s", err, sc)
	}
	if fig != nil {
		fig.add(res)
	}
	if fails := res.Failures(); len(fails) > 0 {
		msg := ""
		for _, v := range fails {
			msg += "\n  " + v.String()
		}
		for _, rep := range res.Reports {
			msg += "\n  report: step " + strconv.Itoa(rep.Step) + " " + rep.OpID + " " + rep.Outcome.String() + " " + rep.EffectID
			if rep.Err != nil {
				msg += " (" + rep.Err.Error() + ")"
			}
		}
		t.Fatalf("invariants broken:%s\nscenario:\n%s\nas Go source (for a regression test: checkScenario(t, <this>, nil)):\n%#v", msg, sc, sc)
	}
}

// recorder takes what checkScenario would fail a test with.
type recorder struct{ msg string }

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
}

// defaultChecks is the README command's budget; longChecks, with
// PAGPOLAR_LONG=1, CI's bounded hunt: about two minutes on the project's
// 2-core machine. -rapid.checks=N (or SCENARIO_CHECKS=N) hunts longer.
const (
	defaultChecks = 100
	longChecks    = 300
)

// TestScenarios draws scenarios and checks the ledger invariants on each
// (see Check). A failure prints the minimal scenario (rapid shrinks it),
// as words and as Go source, and rapid prints the seed to run it again:
//
//	go test ./internal/scenario -run TestScenarios -rapid.seed=N
func TestScenarios(t *testing.T) {
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == "100" { // rapid's default: not set by the caller
		n := defaultChecks
		if longtest.Enabled() {
			n = longChecks
		}
		if s := os.Getenv("SCENARIO_CHECKS"); s != "" {
			n, _ = strconv.Atoi(s)
		}
		_ = f.Value.Set(strconv.Itoa(n))
		defer func() { _ = f.Value.Set("100") }()
	}
	if testing.Short() {
		_ = flag.Set("rapid.checks", "20")
	}
	// The seed, printed: a run reproduces with -rapid.seed=N.
	if f := flag.Lookup("rapid.seed"); f != nil && f.Value.String() == "0" {
		_ = f.Value.Set(strconv.FormatUint(uint64(time.Now().UnixNano()), 10))
		defer func() { _ = f.Value.Set("0") }()
	}
	if f := flag.Lookup("rapid.seed"); f != nil {
		t.Logf("seed: go test ./internal/scenario -run TestScenarios -rapid.seed=%s", f.Value.String())
	}
	var fig figures
	if path := os.Getenv("SCENARIO_FIGURES"); path != "" {
		out, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		fig.perScenario = out
	}
	start := time.Now()
	// SCENARIO_DURATION=30m bounds a long hunt by time instead of count:
	// past it, the remaining checks draw and run nothing (so a hunt ends
	// with its figures instead of being killed by -timeout).
	var until time.Time
	if s := os.Getenv("SCENARIO_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("SCENARIO_DURATION: %v", err)
		}
		until = start.Add(d)
	}
	// SCENARIO_KEEP_GOING=1 (for a long hunt): a failing scenario is
	// printed (words and Go source) and counted, and the hunt goes on
	// instead of stopping to shrink it; the test fails at the end.
	keepGoing := os.Getenv("SCENARIO_KEEP_GOING") != ""
	var failed []string
	rapid.Check(t, func(rt *rapid.T) {
		if !until.IsZero() && time.Now().After(until) {
			return
		}
		sc := Draw(rt)
		if !keepGoing {
			checkScenario(rt, sc, &fig)
			return
		}
		rec := &recorder{}
		checkScenario(rec, sc, &fig)
		if rec.msg != "" {
			fig.mu.Lock()
			failed = append(failed, rec.msg)
			n := fig.scenarios
			fig.mu.Unlock()
			t.Logf("scenario %d failed: %s", n, rec.msg)
		}
	})
	if len(failed) > 0 {
		t.Errorf("%d of the scenarios failed (each printed above)", len(failed))
	}
	share := 0.0
	if fig.calls > 0 {
		share = float64(fig.unknown) / float64(fig.calls)
	}
	t.Logf("%d scenarios in %s: %d calls, %d answered unknown (%.1f%%), %d operations unsettled after the final ResumeAll, %d violations under documented exposures",
		fig.scenarios, time.Since(start).Round(time.Second), fig.calls, fig.unknown, 100*share, fig.unsettled, fig.exposures)
	type kv struct {
		k string
		n int
	}
	var top []kv
	for k, n := range fig.reasons {
		top = append(top, kv{k, n})
	}
	sort.Slice(top, func(i, j int) bool { return top[i].n > top[j].n || top[i].n == top[j].n && top[i].k < top[j].k })
	for i, x := range top {
		if i == 8 {
			break
		}
		t.Logf("  unknown because %q…: %d", x.k, x.n)
	}
}

// checkExposure runs a scenario that reproduces one of README's open
// exposures: it must break nothing outside the exposure, and still break
// something, so that the day it stops README's limit and the runner's
// rule go too.
func checkExposure(t *testing.T, sc Scenario) {
	t.Helper()
	res, err := Run(sc)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failures()) > 0 {
		t.Fatalf("failures outside the exposure: %v", res.Failures())
	}
	if len(res.Violations) == 0 {
		t.Fatal("the exposure no longer reproduces: remove it from README's limits and from the runner")
	}
}
