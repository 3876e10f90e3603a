package main

// Progress lines of a long phase (checkout, settling, verification).

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// progress shows how far a phase of a run is: a line rewritten in place
// when w is a terminal, otherwise a plain line every 5 s and one when the
// phase ends. A nil *progress does nothing.
type progress struct {
	w     io.Writer
	tty   bool
	line  func(elapsed time.Duration) string
	began time.Time
	stopc chan struct{}
	wg    sync.WaitGroup
}

// startProgress shows line (called with the time since the start) until
// stop.
func startProgress(w io.Writer, tty bool, line func(elapsed time.Duration) string) *progress {
	p := &progress{w: w, tty: tty, line: line, began: time.Now(), stopc: make(chan struct{})}
	every := 5 * time.Second
	if tty {
		every = 200 * time.Millisecond
	}
	p.wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.stopc:
				p.print(true)
				return
			case <-t.C:
				p.print(false)
			}
		}
	})
	return p
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func (p *progress) print(last bool) {
	line := p.line(time.Since(p.began))
	switch {
	case p.tty && last:
		fmt.Fprintf(p.w, "\r\033[K%s\n", line)
	case p.tty:
		fmt.Fprintf(p.w, "\r\033[K%s", line)
	default:
		fmt.Fprintln(p.w, line)
	}
}

// stop prints the phase's last line and returns once it is written.
func (p *progress) stop() {
	if p == nil {
		return
	}
	close(p.stopc)
	p.wg.Wait()
}
