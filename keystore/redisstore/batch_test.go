package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
)

func newCall(ctx context.Context, tag string) *call {
	return &call{ctx: ctx, args: []any{tag}, done: make(chan struct{})}
}

// queued reports how many calls wait in b's queue.
func queued(b *batcher) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

func waitQueued(t *testing.T, b *batcher, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d queued calls", n), func() bool { return queued(b) == n })
}

// TestBatcherQueuesWhileBusy drives the batcher with an exec that records
// its batches: calls arriving while the only slot is busy go out together
// in the next batch, a queued call whose context ends is never sent, and the
// batcher is idle afterwards.
func TestBatcherQueuesWhileBusy(t *testing.T) {
	gate := make(chan struct{})
	var mu sync.Mutex
	var batches [][]string
	b := &batcher{maxBusy: 1, maxBatch: 64}
	b.exec = func(ctx context.Context, calls []*call) {
		var tags []string
		for _, c := range calls {
			tags = append(tags, c.args[0].(string))
		}
		mu.Lock()
		batches = append(batches, tags)
		first := len(batches) == 1
		mu.Unlock()
		if first {
			<-gate
		}
		for _, c := range calls {
			c.res = "ran " + c.args[0].(string)
			close(c.done)
		}
	}
	results := make(chan string, 4)
	run := func(c *call) {
		res, _, err := b.do(c)
		if err != nil {
			results <- c.args[0].(string) + ": " + err.Error()
			return
		}
		results <- res.(string)
	}
	go run(newCall(context.Background(), "a")) // takes the slot, blocks in exec
	waitFor(t, "the first batch to start", func() bool { mu.Lock(); defer mu.Unlock(); return len(batches) == 1 })
	go run(newCall(context.Background(), "b"))
	waitQueued(t, b, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go run(newCall(ctx, "c"))
	waitQueued(t, b, 2)
	go run(newCall(context.Background(), "d"))
	waitQueued(t, b, 3)
	cancel()
	if got := <-results; got != "c: context canceled" {
		t.Fatalf("cancelled queued call: %q, want it to return its context error at once", got)
	}
	waitQueued(t, b, 2)
	close(gate)
	got := map[string]bool{}
	for range 3 {
		got[<-results] = true
	}
	for _, want := range []string{"ran a", "ran b", "ran d"} {
		if !got[want] {
			t.Fatalf("results %v lack %q", got, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(batches) != 2 || fmt.Sprint(batches[1]) != "[b d]" {
		t.Fatalf("batches = %v, want [[a] [b d]]: the queued calls share one batch and the cancelled one is not sent", batches)
	}
	waitFor(t, "the batcher to go idle", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.busy == 0 && len(b.queue) == 0
	})
}

// TestConcurrentCallsShareAPipeline: against Redis, 64 Creates issued while
// the one slot is held go out as one pipeline and all take effect once.
func TestConcurrentCallsShareAPipeline(t *testing.T) {
	s, _ := newTestStore(t)
	s.batch.maxBusy = 1
	const n = 64
	var mu sync.Mutex
	var sizes []int
	holding := make(chan struct{})
	exec := s.batch.exec
	s.batch.exec = func(ctx context.Context, calls []*call) {
		mu.Lock()
		sizes = append(sizes, len(calls))
		first := len(sizes) == 1
		mu.Unlock()
		if first {
			close(holding)
			// Hold the slot until every other caller has queued (bounded:
			// exec runs on a caller's goroutine, which must not FailNow).
			deadline := time.Now().Add(15 * time.Second)
			for queued(s.batch) < n-1 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
		}
		exec(ctx, calls)
	}
	ctx := context.Background()
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if i > 0 {
				<-holding
			}
			_, err := s.Create(ctx, keystore.Record{OperationID: fmt.Sprintf("b/%02d", i)}, "w", time.Minute)
			errs <- err
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	if fmt.Sprint(sizes) != "[1 63]" {
		t.Fatalf("batch sizes %v, want [1 63]", sizes)
	}
	mu.Unlock()
	got, err := s.List(ctx, keystore.Filter{Prefix: "b/", Limit: 1000})
	if err != nil || len(got) != n {
		t.Fatalf("List: %d records, %v; want %d", len(got), err, n)
	}
}

// TestQueuedCallWithEndedContextIsNotSent: a call whose context ends before
// its batch is sent writes nothing, while the rest of the batch runs.
func TestQueuedCallWithEndedContextIsNotSent(t *testing.T) {
	s, c := newTestStore(t)
	createCall := func(ctx context.Context, id string) *call {
		keys, _, args := s.createCall("n-"+id, keystore.Record{OperationID: id, Key: "k", Kind: "pix", Fingerprint: "fp", State: keystore.StatePending},
			"w", time.Minute, s.parts[s.shardOf(id)].view())
		return &call{ctx: ctx, sc: createScript, keys: keys, done: make(chan struct{}), args: args}
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	calls := []*call{createCall(ended, "ended"), createCall(context.Background(), "live")}
	s.execBatch(context.Background(), calls)
	for _, c := range calls {
		<-c.done
	}
	if !errors.Is(calls[0].err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", calls[0].err)
	}
	if calls[1].err != nil {
		t.Fatalf("the live call of the batch: %v", calls[1].err)
	}
	ctx := context.Background()
	if n := c.Exists(ctx, s.recordKey("ended")).Val(); n != 0 {
		t.Fatal("a call whose context had ended was sent")
	}
	if n := c.Exists(ctx, s.recordKey("live")).Val(); n != 1 {
		t.Fatal("the live call was not sent")
	}
}
