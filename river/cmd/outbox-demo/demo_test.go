package main

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"
)

// TestMain turns the test binary into a worker process when the demo
// starts it as one.
func TestMain(m *testing.M) {
	if os.Getenv(envWorker) != "" {
		os.Exit(workerMain())
	}
	os.Exit(m.Run())
}

func runDemo(t *testing.T, cfg config) *report {
	t.Helper()
	cfg.exe = os.Args[0]
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	var logs bytes.Buffer
	rep, err := run(ctx, cfg, &logs)
	if rep != nil {
		var out bytes.Buffer
		rep.print(&out)
		t.Log("\n" + out.String())
	}
	if err != nil {
		t.Fatalf("run: %v\nworker logs:\n%s", err, logs.String())
	}
	if !rep.OK() {
		t.Fatalf("checks failed\nworker logs:\n%s", logs.String())
	}
	return rep
}

// Worker processes SIGKILLed in the middle of operations leave running
// jobs that River rescues and runs again under the same operation IDs:
// every committed order is charged exactly once, no rolled-back order is
// charged or has a job, and every order row learned its sale.
func TestOutboxDemo_KilledWorkersChargeEachCommittedOrderOnce(t *testing.T) {
	rep := runDemo(t, config{orders: 24, rollbackEvery: 6, kills: 2, seed: 3, faultRate: 0.2,
		latency: 20 * time.Millisecond, timeout: 5 * time.Minute})
	if rep.Kills != 2 || rep.RescuedJobs == 0 {
		t.Errorf("%d kills, %d rescued jobs: the run did not crash mid-job as planned", rep.Kills, rep.RescuedJobs)
	}
	if rep.RolledBack != 4 || rep.Committed != 20 {
		t.Errorf("committed %d, rolled back %d", rep.Committed, rep.RolledBack)
	}
}

// The long run: more orders and kills, on SQLite and, when
// PAGPOLAR_TEST_POSTGRES_DSN is set, on PostgreSQL (a schema of its own,
// dropped after).
func TestOutboxDemo_LongRunWithKills(t *testing.T) {
	if os.Getenv("PAGPOLAR_LONG") != "1" {
		t.Skip("long test: run with PAGPOLAR_LONG=1 (as .ci/run does)")
	}
	stores := []string{""}
	if dsn := os.Getenv("PAGPOLAR_TEST_POSTGRES_DSN"); dsn != "" {
		stores = append(stores, dsn)
	}
	for _, store := range stores {
		orders := 150
		if store == "" {
			orders = 80 // one SQLite connection per process: slower under -race
		}
		rep := runDemo(t, config{orders: orders, rollbackEvery: 10, kills: 6, seed: 11, faultRate: 0.2,
			latency: 20 * time.Millisecond, timeout: 8 * time.Minute, store: store})
		if rep.Kills != 6 || rep.RescuedJobs == 0 {
			t.Errorf("%s: %d kills, %d rescued jobs", rep.Store, rep.Kills, rep.RescuedJobs)
		}
	}
}

func TestCLI_BadFlagsExitTwo(t *testing.T) {
	for _, args := range [][]string{{"-orders", "0"}, {"-fault-rate", "1"}, {"-kills", "-1"}, {"-nope"}} {
		var out, errb bytes.Buffer
		if code := cli(args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}
