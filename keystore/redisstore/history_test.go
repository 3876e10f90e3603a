package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/storetest"
)

// privateStore opens a Store on the private Redis at addr.
func privateStore(t *testing.T, addr string, opts ...Option) *Store {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, DialerRetries: 1})
	t.Cleanup(func() { c.Close() })
	s, err := New(c, append([]Option{WithLogger(quietLogger()), AllowVolatile()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A process started after a Redis without persistence restarted charges
// nothing twice: the markers it writes start an unproven history, and
// every first send is looked up first.
func TestHistory_NewProcessAfterRestartWithoutPersistenceChargesNothingTwice(t *testing.T) {
	redisOptions(t)
	admin, proc := startRedis(t, "--appendonly", "no")
	addr := admin.Options().Addr
	r := storetest.HistoryLossRun(t, 20,
		func(t *testing.T) keystore.Store {
			return privateStore(t, addr, DeclaredNew("test: a new private Redis"))
		},
		func(t *testing.T) {
			restartRedis(t, proc)
			waitFor(t, "the restarted Redis", func() bool { return admin.Ping(context.Background()).Err() == nil })
		},
		func(t *testing.T) keystore.Store { return privateStore(t, addr) })
	storetest.CheckHistoryLoss(t, r, true)
}

// The same after FLUSHALL.
func TestHistory_NewProcessAfterFlushAllChargesNothingTwice(t *testing.T) {
	redisOptions(t)
	admin, _ := startRedis(t)
	addr := admin.Options().Addr
	r := storetest.HistoryLossRun(t, 20,
		func(t *testing.T) keystore.Store {
			return privateStore(t, addr, DeclaredNew("test: a new private Redis"))
		},
		func(t *testing.T) {
			if err := admin.FlushAll(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
		},
		func(t *testing.T) keystore.Store { return privateStore(t, addr) })
	storetest.CheckHistoryLoss(t, r, true)
}

// A prefix New initialises is unproven until declared new or ProofAge old;
// a declaration elsewhere is seen within the recheck interval; a prefix
// with markers is not declared by the option.
func TestHistory_UnprovenUntilDeclared(t *testing.T) {
	redisOptions(t)
	admin, _ := startRedis(t)
	addr := admin.Options().Addr
	ctx := context.Background()
	a := privateStore(t, addr)
	h, err := a.History(ctx)
	if err != nil || h.Proven() || h.UnprovenSince.IsZero() || h.ProvenAt.Sub(h.UnprovenSince) != keystore.ProofAge {
		t.Fatalf("History of a prefix New initialised: %+v, %v; want unproven for ProofAge", h, err)
	}
	if b := privateStore(t, addr, DeclaredNew("too late")); mustHistory(t, b).Proven() {
		t.Fatal("DeclaredNew proved a prefix that already had markers")
	}
	if err := a.DeclareNew(ctx, " "); err == nil {
		t.Fatal("DeclareNew with an empty note succeeded")
	}
	other := privateStore(t, addr)
	if err := other.DeclareNew(ctx, "test: declared by ops init"); err != nil {
		t.Fatal(err)
	}
	if !mustHistory(t, other).Proven() {
		t.Fatal("unproven right after DeclareNew")
	}
	waitFor(t, "the first Store to see the declaration", func() bool { return mustHistory(t, a).Proven() })
	if h := mustHistory(t, privateStore(t, addr)); !h.Proven() || h.Declared != "test: declared by ops init" {
		t.Fatalf("a Store opened after the declaration: %+v", h)
	}
	// An accepted loss starts a new unproven history.
	if err := admin.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Create(ctx, keystore.Record{OperationID: "after-flush"}, "w", time.Minute); err == nil {
		t.Fatal("Create after FLUSHALL succeeded")
	}
	if err := a.AcceptLoss(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Create(ctx, keystore.Record{OperationID: "after-accept"}, "w", time.Minute); err != nil {
		t.Fatal(err)
	}
	if mustHistory(t, a).Proven() {
		t.Fatal("proven right after an accepted loss")
	}
}

func mustHistory(t *testing.T, s *Store) keystore.History {
	t.Helper()
	h, err := s.History(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return h
}
