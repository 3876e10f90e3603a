package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/report"
)

// chaosTestConfig is a small chaos run whose workers are this test binary.
func chaosTestConfig(t *testing.T, kind string) *chaosConfig {
	t.Helper()
	return &chaosConfig{
		store:       testStoreURL(t, kind),
		workers:     3,
		orders:      300,
		concurrency: 8,
		faultRate:   0.3,
		seed:        1,
		// A full second: the fault mix holds requests up to 1.1 windows,
		// and a killed worker's held request must still end within the
		// client's trust delay (1.8 windows) on a loaded machine.
		window:  time.Second,
		timeout: 3 * time.Minute,
		exe:     os.Args[0],
		env:     []string{testMainEnv + "=1"},
	}
}

func runChaosTest(t *testing.T, cfg *chaosConfig) *chaosReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	var logs bytes.Buffer
	rep, err := chaos(ctx, cfg, &syncWriter{w: &logs})
	if err != nil {
		t.Fatalf("chaos: %v\n%s", err, logs.String())
	}
	var txt bytes.Buffer
	if err := rep.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	t.Logf("chaos on %s:\n%s\nprogress:\n%s", cfg.store, txt.String(), logs.String())
	if !rep.OK() {
		t.Fatalf("the run failed its checks:\n%s\n%s", txt.String(), logs.String())
	}
	return &chaosReport{rep, txt.String()}
}

// TestTwoProcessesSameOrders is issue 4's done-when: two OS processes on
// one store against one fake with faults, both working the same orders
// (each order is given to both), with no kill: no operation gets two
// successful effects, none is left without an outcome, and both processes
// report the same outcome for every operation.
func TestTwoProcessesSameOrders(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			cfg := chaosTestConfig(t, kind)
			cfg.workers, cfg.orders = 2, 150
			r := runChaosTest(t, cfg)
			c := r.Chaos
			if c.Incarnations != 2 || c.Killed != 0 || c.CrashPoints.Total() != 0 || c.OtherExits != 0 {
				t.Fatalf("want two processes that ran to their end: %+v", c)
			}
			// Both processes worked every operation.
			if c.Completions < 2*r.Check.Operations {
				t.Fatalf("%d completions for %d operations, want each from both processes", c.Completions, r.Check.Operations)
			}
			if r.FaultsApplied.Total() == 0 {
				t.Fatal("no fault was applied")
			}
		})
	}
}

// TestChaosSmall is the CI-sized `pagpolar chaos`: three worker processes,
// every order worked by two of them, faults, workers SIGKILLed by the parent
// at random moments and killing themselves at both crash points, restarted
// with ResumeAll and their unfinished orders.
func TestChaosSmall(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			cfg := chaosTestConfig(t, kind)
			cfg.killEvery, cfg.maxKills = time.Second, 2
			// Workers 0 and 1 kill themselves at the 31st operation reaching
			// their crash point, in each of their first three processes
			// (a random kill may beat the first).
			cfg.crashes = func(w, n int) workerCrash {
				if w > 1 || n > 2 {
					return workerCrash{}
				}
				return workerCrash{point: []string{crashAfterSave, crashAfterSend}[w], prob: 1, skip: 30}
			}
			r := runChaosTest(t, cfg)
			c := r.Chaos
			if c.Killed == 0 || c.CrashPoints[crashAfterSave] == 0 || c.CrashPoints[crashAfterSend] == 0 {
				t.Fatalf("want random kills and both crash points: %+v", c)
			}
			if c.Incarnations < 3+c.Killed+c.CrashPoints.Total() {
				t.Fatalf("%d processes for %d deaths: dead workers were not restarted", c.Incarnations, c.Killed+c.CrashPoints.Total())
			}
			if !strings.Contains(r.text, "operations with more than one effect  0") {
				t.Fatalf("report:\n%s", r.text)
			}
		})
	}
}

// TestChaosFlags checks the command line, including what chaos refuses.
func TestChaosFlags(t *testing.T) {
	var errb bytes.Buffer
	if code := runChaos(context.Background(), []string{"-store", "memory:"}, &bytes.Buffer{}, &errb); code != 2 || !strings.Contains(errb.String(), "memory:") {
		t.Fatalf("memory: store: exit %d, %q; want 2 and a reason (processes cannot share it)", code, errb.String())
	}
	for _, args := range [][]string{{"-workers", "0"}, {"-fault-rate", "2"}, {"-crash-probability", "-1"}, {"extra"}} {
		errb.Reset()
		if code := runChaos(context.Background(), args, &bytes.Buffer{}, &errb); code != 2 {
			t.Errorf("%v: exit %d (%s), want 2", args, code, errb.String())
		}
	}
	if got := assignOrders(6, 3); len(got[0]) != 4 || len(got[1]) != 4 || len(got[2]) != 4 {
		t.Fatalf("assignOrders(6, 3) = %v, want each order twice", got)
	}
}

type chaosReport struct {
	*report.Report
	text string
}

// syncWriter serialises writes from the chaos parent's goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
