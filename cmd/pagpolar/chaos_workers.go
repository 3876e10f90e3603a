package main

// The worker processes of a chaos run: assigning orders, starting, killing and
// restarting workers, and what they report.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	mathrand "math/rand"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

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

// handle applies one worker's report; it reports whether an order was
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
