package cases

import (
	"context"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// noLease is a store whose Acquire ignores leases: two workers get one
// operation, which LeaseWatch must count.
type noLease struct{ *keystore.Memory }

func (s noLease) Acquire(ctx context.Context, id, _ string, _ time.Duration) (keystore.Record, error) {
	return s.Memory.Get(ctx, id)
}

func TestLeaseWatch(t *testing.T) {
	ctx := context.Background()
	w := NewLeaseWatch(noLease{keystore.NewMemory()})
	rec, err := w.Create(ctx, keystore.Record{OperationID: "a", Key: "k", Kind: "pix"}, "one", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Acquire(ctx, "a", "two", time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := w.Overlaps.Load(); got != 1 {
		t.Fatalf("an operation taken while held: %d overlaps, want 1", got)
	}
	rec.State = keystore.StateSucceeded
	if _, err := w.Update(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Acquire(ctx, "a", "three", time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := w.Overlaps.Load(); got != 1 {
		t.Errorf("taken after its worker settled it: %d overlaps, want still 1", got)
	}
	if err := w.Release(ctx, "a", 1); err != nil {
		t.Logf("release: %v", err)
	}
	if _, err := w.Create(ctx, keystore.Record{OperationID: "b", Key: "k2", Kind: "pix"}, "one", time.Minute); err != nil {
		t.Fatal(err)
	}
	if w.Max != 1 || w.Overlaps.Load() != 1 {
		t.Errorf("Max %d, overlaps %d; want 1 and 1", w.Max, w.Overlaps.Load())
	}

	// A real lease: the second Acquire is refused, and nothing overlaps.
	ok := NewLeaseWatch(keystore.NewMemory())
	if _, err := ok.Create(ctx, keystore.Record{OperationID: "a", Key: "k", Kind: "pix"}, "one", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := ok.Acquire(ctx, "a", "two", time.Minute); err == nil {
		t.Fatal("the memory store granted a held lease")
	}
	if ok.Overlaps.Load() != 0 {
		t.Errorf("%d overlaps with a store that keeps leases", ok.Overlaps.Load())
	}
}

// The floor case makes the SDK's two writes and leaves the record
// succeeded with its result.
func TestFloorCase(t *testing.T) {
	ctx := context.Background()
	m := keystore.NewMemory()
	c := FloorCase("floor-memory", func(context.Context) (keystore.Store, func(), error) { return m, func() {}, nil }, 0)
	op, done, err := c.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	if err := op(ctx, 7); err != nil {
		t.Fatal(err)
	}
	r, err := m.Get(ctx, "floor/7")
	if err != nil {
		t.Fatal(err)
	}
	if r.State != keystore.StateSucceeded || len(r.Result) < 300 || len(r.Meta) != 95 || r.Attempts != 1 {
		t.Errorf("record %s, result %d B, meta %d B, attempts %d; want succeeded, ≥ 300 B, 95 B, 1", r.State, len(r.Result), len(r.Meta), r.Attempts)
	}
}
