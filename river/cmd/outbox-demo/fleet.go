package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// fleet runs the worker processes, one per slot, and kills them at
// seeded moments: the plan names a crash point ("saved": the SDK wrote its
// record and is about to send; "sent": an answer arrived and is not stored
// yet) and how many of that point the fleet reaches before the process
// that reaches the last is SIGKILLed. A killed process is started again at
// once. (The plan does not pin a slot: a process just started again may
// take seconds to fetch a job on a loaded machine, and a kill waiting for
// it missed the run while the other slot drained the queue.)
type fleet struct {
	exe   string
	env   []string
	rng   *rand.Rand
	kills int
	// spread bounds how many crash points a process passes before its
	// planned kill, so that every kill lands while jobs remain.
	spread int
	logw   io.Writer
	logMu  sync.Mutex // every worker's stderr goes to logw

	mu                              sync.Mutex
	procs                           []*proc
	plan                            killPlan
	seen                            int // crash points of the planned kind seen since the plan
	killed, killedSaved, killedSent int
	problems                        []string
	stopping                        bool
	wg                              sync.WaitGroup
}

type killPlan struct {
	point string
	after int
}

type proc struct {
	slot, n int
	cmd     *exec.Cmd
	done    chan struct{}
	killed  bool
}

func (f *fleet) next() {
	f.plan = killPlan{point: []string{"saved", "sent"}[f.killed%2], after: 1 + f.rng.IntN(f.spread)}
	f.seen = 0
}

func (f *fleet) start(ctx context.Context, n int) error {
	if f.exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		f.exe = exe
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.procs = make([]*proc, n)
	f.next()
	for slot := range n {
		if err := f.spawnLocked(ctx, slot, 0); err != nil {
			return err
		}
	}
	return nil
}

func (f *fleet) spawnLocked(ctx context.Context, slot, n int) error {
	name := fmt.Sprintf("worker-%d.%d", slot, n)
	cmd := exec.Command(f.exe)
	cmd.Env = append(os.Environ(), append(f.env, envWorker+"="+name)...)
	cmd.Stderr = &prefixed{w: f.logw, mu: &f.logMu, prefix: name + ": "}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{slot: slot, n: n, cmd: cmd, done: make(chan struct{})}
	f.procs[slot] = p
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f.line(ctx, p, sc.Text())
		}
		err := cmd.Wait()
		close(p.done)
		f.mu.Lock()
		defer f.mu.Unlock()
		if !p.killed && !f.stopping {
			f.problems = append(f.problems, fmt.Sprintf("%s exited on its own: %v", name, err))
		}
	}()
	return nil
}

// line reads one line of a worker and kills it when the plan says so.
func (f *fleet) line(ctx context.Context, p *proc, text string) {
	point, _, _ := strings.Cut(text, " ")
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopping || p.killed || f.killed >= f.kills || f.procs[p.slot] != p || point != f.plan.point {
		return
	}
	f.seen++
	if f.seen < f.plan.after {
		return
	}
	p.killed = true
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	f.killed++
	if point == "saved" {
		f.killedSaved++
	} else {
		f.killedSent++
	}
	if err := f.spawnLocked(ctx, p.slot, p.n+1); err != nil {
		f.problems = append(f.problems, err.Error())
	}
	f.next()
}

// stop ends every worker (SIGTERM: River stops gracefully) and waits.
func (f *fleet) stop() {
	f.mu.Lock()
	f.stopping = true
	procs := append([]*proc(nil), f.procs...)
	f.mu.Unlock()
	for _, p := range procs {
		if p == nil {
			continue
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			_ = p.cmd.Process.Kill()
		}
	}
	f.wg.Wait()
}

// prefixed writes a worker's standard error line by line, named.
type prefixed struct {
	mu     *sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
}

func (p *prefixed) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := strings.IndexByte(string(p.buf), '\n')
		if i < 0 {
			break
		}
		fmt.Fprintf(p.w, "%s%s\n", p.prefix, p.buf[:i])
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}
