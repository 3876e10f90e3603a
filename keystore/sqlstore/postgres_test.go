package sqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/sqlstore"
)

// Two pools on one table stand for two processes.
func TestPostgresTwoProcesses(t *testing.T) {
	var a, b sharedPG
	t.Cleanup(a.close)
	t.Cleanup(b.close)
	ctx := context.Background()
	sa := newPostgres(t, a.get(t))
	sb, err := sqlstore.New(b.get(t), sqlstore.WithTable(sa.Table()))
	if err != nil {
		t.Fatal(err)
	}
	stores := []*sqlstore.Store{sa, sb}
	for round := range 3 {
		id := fmt.Sprintf("order-%d", round)
		var wg sync.WaitGroup
		errs := make(chan error, 32)
		for i := range 32 {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				_, err := stores[i%2].Create(ctx, rec(id), fmt.Sprintf("owner-%d", i), time.Minute)
				errs <- err
			}(i)
		}
		wg.Wait()
		close(errs)
		wins := 0
		for err := range errs {
			if err == nil {
				wins++
			} else if !errors.Is(err, keystore.ErrExists) {
				t.Fatal(err)
			}
		}
		if wins != 1 {
			t.Fatalf("%d Creates won across two pools, want 1", wins)
		}
	}
}

func TestPostgresMigrateConcurrently(t *testing.T) {
	var pg sharedPG
	t.Cleanup(pg.close)
	db := pg.get(t)
	s := newPostgres(t, db) // migrated once
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			errs <- s.Migrate(context.Background())
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent Migrate: %v", err)
		}
	}
}

func TestPostgresUnreachable(t *testing.T) {
	postgresDSN(t) // only where PostgreSQL tests run
	s, err := sqlstore.OpenPostgres("postgres://nobody:s3cret-pw@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	if err != nil {
		t.Fatalf("OpenPostgres: %v", err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.Ping(ctx); !errors.Is(err, keystore.ErrUnavailable) {
		t.Fatalf("Ping: %v, want ErrUnavailable", err)
	}
	_, err = s.Create(ctx, rec("x"), "w", time.Minute)
	if !errors.Is(err, keystore.ErrUnavailable) {
		t.Fatalf("Create: %v, want ErrUnavailable", err)
	}
	if err != nil && strings.Contains(err.Error(), "s3cret-pw") {
		t.Fatalf("error leaks the password: %v", err)
	}
}

// The store's connections are killed by the server: calls may fail once
// with ErrUnavailable, then work again without a restart.
func TestPostgresConnectionsKilled(t *testing.T) {
	dsn := postgresDSN(t)
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	app := "pagpolar_kill_" + randomSuffix(t)
	cfg.RuntimeParams["application_name"] = app
	db := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { db.Close() }) // after newPostgres's clean-up drops the table
	s := newPostgres(t, db)
	if _, err := s.Create(ctx, rec("before"), "w", time.Minute); err != nil {
		t.Fatal(err)
	}

	var admin sharedPG
	defer admin.close()
	var killed int
	if err := admin.get(t).QueryRowContext(ctx,
		"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	if killed == 0 {
		t.Fatal("no connection of the store to terminate")
	}
	var lastErr error
	for range 10 {
		_, lastErr = s.Create(ctx, rec("after"), "w", time.Minute)
		if lastErr == nil || errors.Is(lastErr, keystore.ErrExists) {
			lastErr = nil
			break
		}
		if !errors.Is(lastErr, keystore.ErrUnavailable) {
			t.Fatalf("Create after the connections were killed: %v, want ErrUnavailable or success", lastErr)
		}
	}
	if lastErr != nil {
		t.Fatalf("store did not recover after its connections were killed: %v", lastErr)
	}
	if _, err := s.Get(ctx, "before"); err != nil {
		t.Fatal(err)
	}
}

// The database goes away entirely and comes back empty: calls fail closed
// with ErrUnavailable meanwhile; afterwards the Store knows the table it
// used is gone (amnesia: Create refuses) until the loss is accepted, and
// then works again without a restart.
func TestPostgresDatabaseGoneAndBack(t *testing.T) {
	dsn := postgresDSN(t)
	ctx := context.Background()
	var admin sharedPG
	t.Cleanup(admin.close) // after the clean-up below drops the database
	adb := admin.get(t)
	dbname := "pagpolar_outage_" + randomSuffix(t)
	if _, err := adb.ExecContext(ctx, "CREATE DATABASE "+dbname); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := adb.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+dbname+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", dbname, err)
		}
	})
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Database = dbname
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	s, err := sqlstore.New(db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, rec("before"), "w", time.Minute); err != nil {
		t.Fatal(err)
	}

	if _, err := adb.ExecContext(ctx, "DROP DATABASE "+dbname+" WITH (FORCE)"); err != nil {
		t.Fatal(err)
	}
	for _, call := range []func() error{
		func() error { _, err := s.Create(ctx, rec("during"), "w", time.Minute); return err },
		func() error { _, err := s.Get(ctx, "before"); return err },
		func() error { return s.Ping(ctx) },
	} {
		if err := call(); !errors.Is(err, keystore.ErrUnavailable) {
			t.Fatalf("call while the database is gone: %v, want ErrUnavailable", err)
		}
	}

	if _, err := adb.ExecContext(ctx, "CREATE DATABASE "+dbname); err != nil {
		t.Fatal(err)
	}
	var err2 error
	for range 10 {
		if err2 = s.Migrate(ctx); err2 == nil {
			break
		}
	}
	if err2 != nil {
		t.Fatalf("Migrate after the database came back: %v", err2)
	}
	if _, err := s.Create(ctx, rec("after"), "w", time.Minute); !errors.Is(err, keystore.ErrAmnesia) {
		t.Fatalf("Create after the database came back empty: %v, want ErrAmnesia", err)
	}
	if err := s.AcceptLoss(ctx, "test: the database was dropped on purpose"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, rec("after"), "w", time.Minute); err != nil {
		t.Fatalf("Create after AcceptLoss: %v", err)
	}
}

// A value PostgreSQL would refuse fails its own call only, not the batch it
// would have shared with other writes.
func TestPostgresBadTextFailsAlone(t *testing.T) {
	var pg sharedPG
	t.Cleanup(pg.close)
	s := newPostgres(t, pg.get(t))
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 32)
	for i := range errs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := rec(fmt.Sprintf("op-%d", i))
			if i%4 == 0 {
				r.Error = "bad \xff byte"
			}
			if i%4 == 1 {
				r.Fingerprint = "nul\x00"
			}
			_, errs[i] = s.Create(ctx, r, "w", time.Minute)
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		bad := i%4 == 0 || i%4 == 1
		switch {
		case bad && (err == nil || errors.Is(err, keystore.ErrUnavailable)):
			t.Errorf("op-%d with a bad string: %v, want a validation error", i, err)
		case !bad && err != nil:
			t.Errorf("op-%d: %v", i, err)
		}
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
