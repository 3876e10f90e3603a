package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/sqlstore"
)

// Regression tests from a review of the stores; each failed before its fix.

// A second Migrate on a store whose writer holds the file's one write
// connection used to wait forever.
func TestMigrateAgainAfterWrites(t *testing.T) {
	s := newSQLite(t)
	ctx := context.Background()
	if _, err := s.Create(ctx, keystore.Record{OperationID: "op-1", Key: "k", Kind: "pix"}, "w", time.Minute); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := s.Migrate(mctx); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	if _, err := s.Create(ctx, keystore.Record{OperationID: "op-2", Key: "k2", Kind: "pix"}, "w", time.Minute); err != nil {
		t.Fatalf("write after the second Migrate: %v", err)
	}
}

// A PostgreSQL write whose caller gave up while the batch waited for a pool
// connection was applied anyway, after the caller had been told it failed.
func TestPostgresWriteNotAppliedAfterCallerGaveUp(t *testing.T) {
	dsn := postgresDSN(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() }) // after newPostgres's clean-up (LIFO)
	db.SetMaxOpenConns(1)
	s := newPostgres(t, db)
	ctx := context.Background()
	held, err := db.Conn(ctx) // the application holds the pool's only connection
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = s.Create(cctx, keystore.Record{OperationID: "op-late", Key: "k", Kind: "pix"}, "w", time.Minute)
	cancel()
	if !errors.Is(err, keystore.ErrUnavailable) {
		t.Fatalf("Create with a starved pool: %v", err)
	}
	_ = held.Close()
	// Give the writer time to get the connection and (wrongly) apply it.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := s.Get(ctx, "op-late"); err == nil {
			t.Fatal("a write reported as failed was applied later")
		}
		time.Sleep(50 * time.Millisecond) // real time: the writer runs on it
	}
}

// OpenPostgres ignored WithMaxBatch(1) and still serialised every write
// through the batch writer; with it, writes run on the pool and the
// conformance suite still holds.
func TestOpenPostgresUnbatched(t *testing.T) {
	dsn := postgresDSN(t)
	table := "pagpolar_test_" + randomSuffix(t)
	s, err := sqlstore.OpenPostgres(dsn, sqlstore.WithMaxBatch(1), sqlstore.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("pgx", dsn)
		if err == nil {
			_, _ = db.Exec("DROP TABLE IF EXISTS " + table)
			_, _ = db.Exec("DROP TABLE IF EXISTS " + table + "_meta")
			_ = db.Close()
		}
		_ = s.Close()
	})
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	// Two writes held up by one row lock must not hold each other up: with
	// the batch writer the second would wait for the first's lock.
	if _, err := s.Create(ctx, keystore.Record{OperationID: "a", Key: "k", Kind: "pix"}, "w", time.Minute); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, "SELECT 1 FROM "+table+" WHERE operation_id = 'a' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	blocked := make(chan error, 1)
	go func() {
		bctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		_, err := s.Renew(bctx, "a", 1, time.Minute) // matches the row, so it waits for the row lock
		blocked <- err
	}()
	// Wait until the Acquire is really waiting on the row lock.
	waiting := false
	for i := 0; i < 100 && !waiting; i++ {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%'||$1||'%'`, table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		waiting = n > 0
		if !waiting {
			time.Sleep(20 * time.Millisecond) // real time: PostgreSQL's lock wait is the subject
		}
	}
	if !waiting {
		t.Fatal("the Acquire never waited on the row lock")
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := s.Create(cctx, keystore.Record{OperationID: "b", Key: "k2", Kind: "pix"}, "w", time.Minute); err != nil {
		t.Fatalf("a write to another row waited behind a locked one: %v", err)
	}
	_ = tx.Rollback()
	<-blocked
}
