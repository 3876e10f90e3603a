package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pagpolar/pagpolar-go/internal/privateredis"
)

// A chaos run whose Redis restarts without persistence half-way: the
// store detects that it lost records it had acknowledged and refuses
// every new operation. The report counts the effects whose record is gone
// as what the store lost (each one effect, sent once: not a double, not an
// effect nobody asked for), says why settling stopped, and the run exits
// 3 (incomplete), not 1.
func TestChaosReportsRedisAmnesiaAsLostRecords(t *testing.T) {
	if testing.Short() {
		t.Skip("runs worker processes on a private Redis it restarts")
	}
	srv := privateredis.Start(t)
	cfg := chaosTestConfig(t, "sqlite")
	cfg.store = "redis://" + srv.Addr + "/0?volatile=1"
	cfg.workers, cfg.orders = 3, 600
	cfg.killEvery, cfg.maxKills = 1200*time.Millisecond, 3
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	poll, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	restarted := make(chan int64, 1)
	var restartErr error
	go func() {
		// Once the workers have written a few hundred records.
		c := redis.NewClient(&redis.Options{Addr: srv.Addr})
		defer c.Close()
		for poll.Err() == nil {
			if n, err := c.DBSize(poll).Result(); err == nil && n >= 300 {
				restartErr = srv.Restart()
				restarted <- n
				return
			}
			select {
			case <-poll.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
		close(restarted)
	}()
	var logs bytes.Buffer
	res, err := chaos(ctx, cfg, &syncWriter{w: &logs})
	stopPoll()
	if err != nil {
		t.Fatalf("chaos: %v\n%s", err, logs.String())
	}
	keys, ok := <-restarted
	if restartErr != nil {
		t.Fatal(restartErr)
	}
	if !ok {
		t.Fatal("the run ended before the workers wrote 300 keys: Redis was never restarted")
	}
	var txt bytes.Buffer
	if err := res.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	c, code := res.Check, runExitCode(res.Report)
	t.Logf("Redis restarted empty at %d keys; exit %d; lost records %d, duplicates %d, orphans %d, unfinished %d, disagreements %d; settling: %s",
		keys, code, len(c.LostRecords), len(c.Duplicates), len(c.Orphans), len(c.Unfinished), len(res.Chaos.Disagreements), res.Settling.Stopped)
	if !res.Settling.Amnesia {
		t.Fatalf("settling did not stop on the store's amnesia:\n%s", txt.String())
	}
	if len(c.LostRecords) == 0 {
		t.Fatalf("no effect was counted as a lost record:\n%s", txt.String())
	}
	if len(c.Duplicates)+len(c.Orphans)+len(c.FalseFailures)+len(c.WithoutEffect) != 0 {
		t.Fatalf("the report counts what the store lost as wrong effects:\n%s", txt.String())
	}
	if code != demoExitIncomplete {
		t.Fatalf("exit %d, want %d (incomplete: the store lost records and refuses):\n%s", code, demoExitIncomplete, txt.String())
	}
	if !strings.Contains(txt.String(), "effects whose record the key store lost") || !strings.Contains(txt.String(), "lost records it had acknowledged") {
		t.Fatalf("the report does not say the store lost acknowledged records:\n%s", txt.String())
	}
}
