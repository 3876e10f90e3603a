package sqlstore

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestWriter_DeferredWriteIsAnsweredOnceWhenTheBatchFails: a write the
// batch deferred (a PostgreSQL statement retried alone after a lock
// timeout) is answered by the goroutine that runs it alone. When the rest
// of the batch then failed, the batch answered it too: with its caller
// gone, that second answer blocked on the full one-slot channel for good,
// and with it the writer and Close.
func TestWriter_DeferredWriteIsAnsweredOnceWhenTheBatchFails(t *testing.T) {
	failed := errors.New("write batch: context deadline exceeded")
	w := &writer{applyFn: func(batch []*writeReq) ([]result, error) {
		return []result{{deferred: true}, {}}, failed
	}}
	ctx := context.Background()
	alone := &writeReq{ctx: ctx, id: "alone", out: make(chan result, 1)}
	other := &writeReq{ctx: ctx, id: "other", out: make(chan result, 1)}
	alone.out <- result{} // its own goroutine's answer, its caller gone
	done := make(chan struct{})
	go func() { w.execute([]*writeReq{alone, other}); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("execute blocked answering a deferred write a second time")
	}
	if r := <-other.out; !errors.Is(r.err, failed) {
		t.Fatalf("the batch's other write: %+v, want the batch's error", r)
	}
	if r := <-alone.out; r.err != nil {
		t.Fatalf("the deferred write's answer was replaced: %+v", r)
	}
}
