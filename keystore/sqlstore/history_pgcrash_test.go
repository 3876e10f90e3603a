package sqlstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/longtest"
	"github.com/pagpolar/pagpolar-go/internal/privatepg"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/sqlstore"
	"github.com/pagpolar/pagpolar-go/keystore/storetest"
)

// A PostgreSQL server with synchronous_commit off (AllowAsyncCommit)
// crashes while the SDK charges, and loses commits it had acknowledged: a
// new process on the restarted server finds no record of orders that were
// sent (some of them answered "500 after commit", so the API has released
// their key). Its store cannot prove the history since the server's
// start, so every first send is looked up first: nothing is charged
// twice, at one lookup per first send.
func TestHistory_PostgresAsyncCommitCrashChargesNothingTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and crashes a private PostgreSQL")
	}
	longtest.Skip(t) // about a minute: 200 charges, a crash, 200 again
	// The background writer and autovacuum would write WAL out with the
	// data pages they write; the WAL writer is stopped before the kill
	// (privatepg.Server.StopWALWriter).
	pg := privatepg.Start(t, "synchronous_commit=off", "wal_writer_delay=200ms", "bgwriter_lru_maxpages=0", "autovacuum=off", "wal_buffers=16MB")
	open := func(t *testing.T, opts ...sqlstore.Option) keystore.Store {
		s, err := sqlstore.OpenPostgres(pg.DSN, append([]sqlstore.Option{sqlstore.AllowAsyncCommit(), sqlstore.WithCallTimeout(5 * time.Second)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		if err := s.Migrate(context.Background()); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
		return s
	}
	const orders = 200
	r := storetest.HistoryCrashRun(t, orders, 8,
		func(t *testing.T) keystore.Store {
			return open(t, sqlstore.DeclaredNew("test: a new private PostgreSQL"))
		},
		func(t *testing.T) {
			pg.StopWALWriter(t)
			<-time.After(600 * time.Millisecond) // 3 × wal_writer_delay of commits, unwritten
			pg.Kill(t)
		},
		func(t *testing.T) { pg.Restart(t) },
		func(t *testing.T) keystore.Store { return open(t) })
	t.Logf("first process: %d sent, %d acknowledged, %d of them lost in the crash; second process: doubles %d, lookups %d, unknown %d, refused %d, posts %d, first call %v, err %v",
		r.Sent, r.Acknowledged, r.Lost, r.Doubles, r.Lookups, r.Unknown, r.Refused, r.Posts, r.FirstErr.Round(time.Millisecond), r.Err)
	if r.Lost == 0 {
		t.Fatalf("the crash lost no acknowledged record (%d acknowledged): the test proves nothing", r.Acknowledged)
	}
	if r.Doubles != 0 {
		t.Errorf("%d orders were charged twice", r.Doubles)
	}
	if r.Err != nil {
		t.Errorf("unexpected error: %v", r.Err)
	}
	// Every new order, and every order whose record was lost, is a first
	// send of an unproven history: one lookup each at least.
	if min := orders + r.Lost; r.Lookups < min || r.Lookups > 3*orders {
		t.Errorf("%d lookups before first sends, want at least %d (the %d new orders and the %d lost) and at most %d", r.Lookups, min, orders, r.Lost, 3*orders)
	}
}
