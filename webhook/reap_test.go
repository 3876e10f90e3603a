package webhook_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/webhook"
)

// batchSpy records each DeleteExpired call; block makes them wait for
// their context, as a batch stuck on a row lock would.
type batchSpy struct {
	webhook.Store
	limits []int
	block  bool
}

func (b *batchSpy) DeleteExpired(ctx context.Context, before time.Time, limit int) (int, error) {
	b.limits = append(b.limits, limit)
	if b.block {
		<-ctx.Done()
		return 0, ctx.Err()
	}
	return b.Store.DeleteExpired(ctx, before, limit)
}

// Reap deletes in batches of Batch until one comes back short, and stops a
// batch that hangs after BatchTimeout even when its caller's context has no
// deadline.
func TestReapBatchesAndBounds(t *testing.T) {
	ctx := context.Background()
	store := webhook.NewMemoryStore()
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		if _, _, err := store.Insert(ctx, webhook.Record{Key: k, Entity: "sale:" + k, Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		r, err := store.Claim(ctx, k, "w", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Complete(ctx, k, r.LeaseToken, webhook.Outcome{State: webhook.StateProcessed}); err != nil {
			t.Fatal(err)
		}
	}
	spy := &batchSpy{Store: store}
	later := time.Now().Add(webhook.MinRetention + time.Hour)
	n, err := webhook.Reap(ctx, spy, webhook.ReapOptions{Retention: webhook.MinRetention, Batch: 2, Now: later})
	if err != nil || n != 5 {
		t.Fatalf("Reap = %d, %v; want 5", n, err)
	}
	if len(spy.limits) != 3 {
		t.Errorf("%d batches (%v), want 3 (2, 2, then 1 short)", len(spy.limits), spy.limits)
	}
	for _, l := range spy.limits {
		if l != 2 {
			t.Errorf("a batch asked for %d, want 2", l)
		}
	}

	stuck := &batchSpy{Store: store, block: true}
	start := time.Now()
	_, err = webhook.Reap(ctx, stuck, webhook.ReapOptions{Now: later, BatchTimeout: 50 * time.Millisecond})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Reap on a stuck store: %v, want the batch's deadline", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("a stuck batch held Reap for %v", d)
	}
	for _, bad := range []webhook.ReapOptions{
		{Retention: webhook.MinRetention - time.Second},
		{Batch: -1}, {Pause: -time.Second}, {BatchTimeout: -time.Second},
	} {
		if _, err := webhook.Reap(ctx, store, bad); err == nil {
			t.Errorf("Reap(%+v) succeeded, want an error", bad)
		}
	}
}
