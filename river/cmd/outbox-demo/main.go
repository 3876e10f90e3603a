package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	if os.Getenv(envWorker) != "" {
		os.Exit(workerMain())
	}
	os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr))
}

func cli(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("outbox-demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := config{}
	fs.IntVar(&cfg.orders, "orders", 200, "orders to check out")
	fs.IntVar(&cfg.rollbackEvery, "rollback-every", 10, "every n-th order's transaction rolls back after its intent was inserted (0: none)")
	fs.IntVar(&cfg.kills, "kills", 6, "worker processes to SIGKILL mid-operation")
	fs.Int64Var(&cfg.seed, "seed", 1, "seed of the kill moments and of the fake's faults")
	fs.Float64Var(&cfg.faultRate, "fault-rate", 0.2, "share of the charge requests the fake API fails (lost answers, 500 after commit, drops, 429)")
	fs.DurationVar(&cfg.latency, "latency", 20*time.Millisecond, "the fake API's latency")
	fs.StringVar(&cfg.store, "store", "", "the shop's database: empty for SQLite files in a temporary directory, or postgres://... (a schema of its own is created and dropped)")
	fs.DurationVar(&cfg.timeout, "timeout", 3*time.Minute, "bound on the whole run")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if cfg.orders < 1 || cfg.orders > 10_000 || cfg.kills < 0 || cfg.rollbackEvery < 0 || cfg.faultRate < 0 || cfg.faultRate >= 1 {
		fmt.Fprintln(stderr, "outbox-demo: 1 <= -orders <= 10000, -kills >= 0, -rollback-every >= 0, 0 <= -fault-rate < 1")
		return 2
	}
	sctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(sctx, cfg.timeout)
	defer cancel()
	rep, err := run(ctx, cfg, stderr)
	if rep != nil {
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			_ = enc.Encode(rep)
		} else {
			rep.print(stdout)
		}
	}
	switch {
	case errors.Is(err, errNotDrained):
		fmt.Fprintf(stderr, "outbox-demo: %v\n", err)
		return 3
	case err != nil:
		fmt.Fprintf(stderr, "outbox-demo: %v\n", err)
		return 1
	case !rep.OK():
		return 1
	}
	return 0
}
