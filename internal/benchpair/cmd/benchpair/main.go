package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pagpolar/pagpolar-go/internal/benchpair"
	"github.com/pagpolar/pagpolar-go/internal/benchpair/cases"
)

func main() {
	var (
		suite    = flag.String("suite", "overhead", "overhead, stores or resume")
		rounds   = flag.Int("rounds", 10, "rounds (every case runs once per round, in a shuffled order)")
		ops      = flag.Int("ops", 0, "measured operations per case and round (0: the suite's default)")
		pars     = flag.String("p", "", "comma-separated parallelism levels (default: the suite's)")
		seed     = flag.Int64("seed", 1, "seed of the per-round shuffle")
		latency  = flag.Duration("latency", 20*time.Millisecond, "API latency of the fake (stores, resume)")
		stores   = flag.String("stores", "sqlite,postgres,redis", "durable stores for -suite stores")
		pgDSN    = flag.String("postgres", os.Getenv("PAGPOLAR_TEST_POSTGRES_DSN"), "PostgreSQL DSN (a table per round is created and dropped)")
		redisURL = flag.String("redis", "", "Redis URL with AOF on; empty: start a private redis-server (appendfsync always) on a free port")
		mdPath   = flag.String("md", "", "also write the Markdown tables for BENCHMARKS.md to this file")
	)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var md io.Writer = io.Discard
	if *mdPath != "" {
		f, err := os.Create(*mdPath)
		if err != nil {
			log.Fatal(err)
		}
		defer f.Close()
		md = f
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	cmdline := "go run ./internal/benchpair/cmd/benchpair " + strings.Join(os.Args[1:], " ")
	fmt.Fprintf(out, "goos: %s\ngoarch: %s\npkg: github.com/pagpolar/pagpolar-go/internal/benchpair\ncpu: %s\n", runtime.GOOS, runtime.GOARCH, cpuName())
	fmt.Fprintf(out, "# %s\n# GOMAXPROCS=%d, %s, started %s, load average %v\n", cmdline, runtime.GOMAXPROCS(0), runtime.Version(), time.Now().UTC().Format(time.RFC3339), benchpair.LoadAvg())
	fmt.Fprintf(md, "Command: `%s` (%s, GOMAXPROCS=%d, started %s; load average at the start %v).\n\n",
		cmdline, runtime.Version(), runtime.GOMAXPROCS(0), time.Now().UTC().Format("2006-01-02 15:04 MST"), benchpair.LoadAvg())

	var err error
	switch *suite {
	case "overhead":
		err = overhead(ctx, out, md, *rounds, *ops, parList(*pars, "1,64"), *seed)
	case "stores":
		err = storesSuite(ctx, out, md, *rounds, *ops, parList(*pars, "64,1"), *seed, *latency, strings.Split(*stores, ","), *pgDSN, *redisURL)
	case "resume":
		err = resume(ctx, out, md, *rounds, *seed, *latency)
	default:
		err = fmt.Errorf("unknown suite %q", *suite)
	}
	if err != nil {
		out.Flush()
		log.Fatal(err)
	}
}

func parList(s, def string) []int {
	if s == "" {
		s = def
	}
	var ps []int
	for _, f := range strings.Split(s, ",") {
		p, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || p < 1 {
			log.Fatalf("-p: %q is not a positive number", f)
		}
		ps = append(ps, p)
	}
	return ps
}

func cpuName() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func overhead(ctx context.Context, out *bufio.Writer, md io.Writer, rounds, ops int, pars []int, seed int64) error {
	fmt.Fprintf(md, "| parallelism | hand-written µs/op (wall) | SDK µs/op (wall) | SDK ÷ hand-written, wall | SDK ÷ hand-written, CPU | allocs/op hand-written → SDK | B/op hand-written → SDK | load average (1 min) | goal ≤ 1.15× |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, p := range pars {
		n := ops
		if n == 0 {
			n = 3000
		}
		cfg := benchpair.Config{Rounds: rounds, Ops: n, Warmup: 200, Parallel: p, Seed: seed}
		cs := []benchpair.Case{cases.HandwrittenCase("handwritten", 0), cases.SDKCase("sdk-memory", 0, cases.Memory)}
		samples, err := benchpair.Run(ctx, cfg, cs)
		if err != nil {
			return err
		}
		prefix := fmt.Sprintf("Pix/p%d", p)
		benchpair.WriteBench(out, prefix, samples)
		benchpair.WriteRatios(out, prefix, "handwritten", samples)
		benchpair.WriteSummary(out, fmt.Sprintf("%s: %d rounds × %d ops per case", prefix, rounds, n), "handwritten", samples)
		out.Flush()
		w := benchpair.Summarize(benchpair.PerRound(samples, "sdk-memory", "handwritten", benchpair.WallPerOp))
		c := benchpair.Summarize(benchpair.PerRound(samples, "sdk-memory", "handwritten", benchpair.CPUPerOp))
		us := func(name string) string {
			return benchpair.Summarize(benchpair.Of(samples, name, func(s benchpair.Sample) float64 { return benchpair.WallPerOp(s) / 1e3 })).Fmt("%.1f")
		}
		of := func(name string, f func(benchpair.Sample) float64) float64 {
			return benchpair.Median(benchpair.Of(samples, name, f))
		}
		fmt.Fprintf(md, "| p%d (%d rounds × %d ops) | %s | %s | **%s** | **%s** | %.0f → %.0f | %.0f → %.0f | %s | %s |\n", p, rounds, n,
			us("handwritten"), us("sdk-memory"), w.FmtIQR("%.2f×"), c.FmtIQR("%.2f×"),
			of("handwritten", benchpair.AllocsPerOp), of("sdk-memory", benchpair.AllocsPerOp),
			of("handwritten", benchpair.BytesPerOp), of("sdk-memory", benchpair.BytesPerOp),
			benchpair.Summarize(benchpair.All(samples, benchpair.Load1)).Fmt("%.1f"), verdict(w.Median <= 1.15 && c.Median <= 1.15))
	}
	fmt.Fprintln(md)
	return nil
}

func verdict(ok bool) string {
	if ok {
		return "met (median)"
	}
	return "**not met**"
}

// redisServer starts a private redis-server with appendfsync always on a
// free loopback port, in a temporary directory; stop kills it.
func redisServer() (url string, stop func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	dir, err := os.MkdirTemp("", "benchpair-redis-")
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "yes", "--appendfsync", "always", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, fmt.Errorf("starting redis-server: %w", err)
	}
	stop = func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = os.RemoveAll(dir)
	}
	url = fmt.Sprintf("redis://127.0.0.1:%d/0", port)
	opt, _ := redis.ParseURL(url)
	rc := redis.NewClient(opt)
	defer rc.Close()
	for range 100 {
		if rc.Ping(context.Background()).Err() == nil {
			// Say what the server really runs with, not what was asked.
			cfg, err := rc.ConfigGet(context.Background(), "append*").Result()
			if err != nil || cfg["appendonly"] != "yes" || cfg["appendfsync"] != "always" {
				stop()
				return "", nil, fmt.Errorf("private redis-server: appendonly %q, appendfsync %q (%v), want yes, always", cfg["appendonly"], cfg["appendfsync"], err)
			}
			return url, stop, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	return "", nil, fmt.Errorf("private redis-server on port %d did not answer", port)
}

func storesSuite(ctx context.Context, out *bufio.Writer, md io.Writer, rounds, ops int, pars []int, seed int64, latency time.Duration, names []string, pgDSN, redisURL string) error {
	open := map[string]cases.StoreOpener{}
	for _, n := range names {
		switch n {
		case "sqlite":
			open[n] = cases.SQLite("")
		case "postgres":
			if pgDSN == "" {
				return fmt.Errorf("postgres: set -postgres or PAGPOLAR_TEST_POSTGRES_DSN")
			}
			open[n] = cases.Postgres(pgDSN)
		case "redis":
			if redisURL == "" {
				u, stop, err := redisServer()
				if err != nil {
					return err
				}
				defer stop()
				redisURL = u
				fmt.Fprintf(out, "# private redis-server at %s (checked with CONFIG GET: appendonly yes, appendfsync always)\n", u)
			}
			open[n] = cases.Redis(redisURL)
		case "":
		default:
			return fmt.Errorf("unknown store %q", n)
		}
	}
	goal := map[string]float64{"sqlite": 0.85, "postgres": 0.85, "redis": 0.9}
	for _, p := range pars {
		n := ops
		if n == 0 {
			n = 2000
			if p == 1 {
				n = 100
			}
		}
		calls := map[string]*cases.Calls{"memory": {}}
		cs := []benchpair.Case{cases.SDKCase("memory", latency, cases.Counted(cases.Memory, calls["memory"]))}
		for _, name := range names {
			if o, ok := open[name]; ok {
				calls[name] = &cases.Calls{}
				cs = append(cs, cases.SDKCase(name, latency, cases.Counted(o, calls[name])))
				if p == 1 {
					cs = append(cs, cases.FloorCase("floor-"+name, o, 0), cases.FloorCase("floor-idle-"+name, o, latency))
				} else {
					// floor-: the calls a charge makes now; floor2-: the same
					// without the Release (what one call fewer would allow).
					cs = append(cs, cases.FloorChargeCase("floor-"+name, o, latency), cases.FloorCase("floor2-"+name, o, latency))
				}
			}
		}
		cfg := benchpair.Config{Rounds: rounds, Ops: n, Warmup: min(n, 64), Parallel: p, Seed: seed, Pauses: p == 1}
		samples, err := benchpair.Run(ctx, cfg, cs)
		if err != nil {
			return err
		}
		prefix := fmt.Sprintf("ChargeStore/latency=%s/p%d", latency, p)
		benchpair.WriteBench(out, prefix, samples)
		benchpair.WriteRatios(out, prefix, "memory", samples)
		benchpair.WriteSummary(out, fmt.Sprintf("%s: %d rounds × %d ops per case", prefix, rounds, n), "memory", samples)
		charges := int64(rounds * (n + cfg.Warmup))
		for _, name := range append([]string{"memory"}, names...) {
			if c, ok := calls[name]; ok {
				fmt.Fprintf(out, "# store calls per charge, %s: %s\n", name, c.String(charges))
				fmt.Fprintf(md, "Store calls per charge (%s, p%d, warm-up included): %s.\n\n", name, p, c.String(charges))
			}
		}
		load := benchpair.Summarize(benchpair.All(samples, benchpair.Load1)).Fmt("%.1f")
		if p != 1 {
			fmt.Fprintf(md, "At p%d (%d rounds × %d charges per store; API latency %s). The floor is the store's own calls of a charge (Create, %s idle, Update, Release) from a hand-written loop at the same parallelism, same round:\n\n"+
				"| store | charges/s | p50 ms | p99 ms | throughput ÷ memory (same round) | floor ÷ memory (same round) | SDK ÷ floor (same round) | goal | load average (1 min) |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n", p, rounds, n, latency, latency)
			for _, name := range append([]string{"memory"}, names...) {
				if _, ok := open[name]; !ok && name != "memory" {
					continue
				}
				ratio, fl, vf, g := "—", "—", "—", "baseline"
				if name != "memory" {
					r := benchpair.Summarize(benchpair.PerRound(samples, name, "memory", benchpair.OpsPerSec))
					f := benchpair.Summarize(benchpair.PerRound(samples, "floor-"+name, "memory", benchpair.OpsPerSec))
					v := benchpair.Summarize(benchpair.PerRound(samples, name, "floor-"+name, benchpair.OpsPerSec))
					ratio = "**" + r.FmtIQR("%.2f×") + "**"
					fl, vf = f.FmtIQR("%.2f×"), "**"+v.FmtIQR("%.2f×")+"**"
					g = fmt.Sprintf("≥ %.2f× or ≥ 0.90× of the floor: ", goal[name]) + verdict(r.Median >= goal[name] || v.Median >= 0.9)
				}
				fmt.Fprintf(md, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", name,
					benchpair.Summarize(benchpair.Of(samples, name, benchpair.OpsPerSec)).Fmt("%.0f"),
					benchpair.Summarize(benchpair.Of(samples, name, msf(benchpair.P50))).Fmt("%.1f"),
					benchpair.Summarize(benchpair.Of(samples, name, msf(benchpair.P99))).Fmt("%.1f"),
					ratio, fl, vf, g, benchpair.Summarize(benchpair.Of(samples, name, benchpair.Load1)).Fmt("%.1f"))
			}
			fmt.Fprintln(md)
			out.Flush()
			continue
		}
		// p1: the latency each store adds to a charge (its p50 − memory's
		// p50, same round) against its floor (the two writes alone, same
		// round).
		fmt.Fprintf(md, "At p1 (%d rounds × %d charges per store, API latency %s; load average over the samples %s). The floor is the store's two writes of a charge "+
			"(Create, then Update to succeeded, records of the SDK's sizes) made alone, %d × per round: back to back, and with the charge's %s idle between them (not counted):\n\n"+
			"| store | charge p50 ms | added p50 ms (− memory, same round) | floor p50 ms | idle floor p50 ms | added ÷ floor (same round) | added ÷ idle floor | goal ≤ 1.5× floor |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n",
			rounds, n, latency, load, n, latency)
		fmt.Fprintf(md, "| memory | %s | — | — | — | — | — | |\n", benchpair.Summarize(benchpair.Of(samples, "memory", msf(benchpair.P50))).Fmt("%.2f"))
		for _, name := range names {
			if _, ok := open[name]; !ok {
				continue
			}
			added := benchpair.Diff(samples, name, "memory", benchpair.P50)
			floor := benchpair.Of(samples, "floor-"+name, benchpair.P50)
			idle := benchpair.Of(samples, "floor-idle-"+name, benchpair.P50)
			var ratio, ratioIdle []float64
			for i := range min(len(added), len(floor), len(idle)) {
				ratio = append(ratio, added[i]/floor[i])
				ratioIdle = append(ratioIdle, added[i]/idle[i])
				fmt.Fprintf(out, "BenchmarkAdded/%s/%s\t1\t%.0f added-p50-ns\t%.0f floor-p50-ns\t%.0f idle-floor-p50-ns\t%.4f added/floor-x\t%.4f added/idle-floor-x\n",
					prefix, name, added[i], floor[i], idle[i], added[i]/floor[i], added[i]/idle[i])
			}
			r, ri := benchpair.Summarize(ratio), benchpair.Summarize(ratioIdle)
			fmt.Fprintf(md, "| %s | %s | %s | %s | %s | **%s** | %s | %s |\n", name,
				benchpair.Summarize(benchpair.Of(samples, name, msf(benchpair.P50))).Fmt("%.2f"),
				benchpair.Summarize(scale(added, 1e-6)).Fmt("%.2f"),
				benchpair.Summarize(scale(floor, 1e-6)).Fmt("%.2f"),
				benchpair.Summarize(scale(idle, 1e-6)).Fmt("%.2f"),
				r.FmtIQR("%.2f×"), ri.FmtIQR("%.2f×"), verdict(r.Median <= 1.5))
			fmt.Fprintf(out, "# %s: added p50 %s ms, floor p50 %s ms (idle %s ms), added ÷ floor %s (÷ idle floor %s)\n", name,
				benchpair.Summarize(scale(added, 1e-6)).Fmt("%.2f"), benchpair.Summarize(scale(floor, 1e-6)).Fmt("%.2f"),
				benchpair.Summarize(scale(idle, 1e-6)).Fmt("%.2f"), r.Fmt("%.2f"), ri.Fmt("%.2f"))
		}
		fmt.Fprintln(md)
		out.Flush()
	}
	return nil
}

func msf(f func(benchpair.Sample) float64) func(benchpair.Sample) float64 {
	return func(s benchpair.Sample) float64 { return f(s) / 1e6 }
}

func scale(xs []float64, k float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = x * k
	}
	return out
}

func resume(ctx context.Context, out *bufio.Writer, md io.Writer, rounds int, seed int64, latency time.Duration) error {
	const n = 1000
	var st cases.ResumeStats
	cfg := benchpair.Config{Rounds: rounds, Ops: 1, Parallel: 1, Seed: seed}
	samples, err := benchpair.Run(ctx, cfg, []benchpair.Case{cases.ResumeCase("resumeall-1000", n, latency, 0, &st)})
	if err != nil {
		return err
	}
	prefix := fmt.Sprintf("ResumeAll/latency=%s", latency)
	benchpair.WriteBench(out, prefix, samples)
	benchpair.WriteSummary(out, fmt.Sprintf("%s: %d rounds, one ResumeAll of %d operations each", prefix, rounds, n), "", samples)
	wall := benchpair.Summarize(benchpair.Of(samples, "resumeall-1000", func(s benchpair.Sample) float64 { return s.Wall.Seconds() }))
	fmt.Fprintf(out, "# ResumeAll of %d: %s s; concurrency bound %d, most leases held at once %d, overlaps %d, settled %d, unsettled %d, lookups %d\n",
		n, wall.Fmt("%.3f"), st.Concurrency, st.MaxLeases, st.Overlaps, st.Settled, st.Unsettled, st.Lookups)
	fmt.Fprintf(md, "| ResumeAll of %d unknown operations, %s per lookup | %d rounds | **%s s** | goal ≤ 1 s: %s | concurrency bound %d (RetryPolicy.ResumeConcurrency default); most operations leased at once %d; an operation taken while leased: %d times; settled %d of %d; lookups %d | load average %s |\n\n",
		n, latency, rounds, wall.Fmt("%.3f"), map[bool]string{true: "met in every round", false: "**not met** in every round"}[wall.Hi <= 1], st.Concurrency, st.MaxLeases, st.Overlaps, st.Settled, rounds*n, st.Lookups,
		benchpair.Summarize(benchpair.Of(samples, "resumeall-1000", benchpair.Load1)).Fmt("%.1f"))
	return nil
}
