package pagpolar

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// storeCallRecorder is an Observer that lists the store calls it saw.
type storeCallRecorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *storeCallRecorder) Start(ctx context.Context, s Step) (context.Context, func(StepEnd)) {
	if s.Kind == StepStore {
		r.mu.Lock()
		r.calls = append(r.calls, s.StoreCall)
		r.mu.Unlock()
	}
	return ctx, func(StepEnd) {}
}

func TestWithObserver_StoreCallsAreStepsAndStoreIsAsPassed(t *testing.T) {
	mem := keystore.NewMemory()
	obs := &storeCallRecorder{}
	c, err := NewClient("cred_obs", StaticToken("tok_obs"), WithStore(mem), WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	if c.Store() != keystore.Store(mem) {
		t.Fatalf("Client.Store() = %T, want the store passed to WithStore", c.Store())
	}
	ctx := context.Background()
	if _, err := c.store.Create(ctx, keystore.Record{OperationID: "op-1", Key: "k"}, "me", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := c.store.Get(ctx, "op-absent"); err == nil {
		t.Fatal("Get of an absent record: no error")
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.calls) != 2 || obs.calls[0] != "create" || obs.calls[1] != "get" {
		t.Fatalf("store steps %v, want [create get]", obs.calls)
	}
}
