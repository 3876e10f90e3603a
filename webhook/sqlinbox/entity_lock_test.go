package sqlinbox_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/webhook"
	"github.com/pagpolar/pagpolar-go/webhook/sqlinbox"
)

// On a database whose default isolation is REPEATABLE READ, two waiters
// for one sale's advisory lock must not both claim (a snapshot taken before
// the wait would let them): two events of one sale never run at once.
func TestPostgresEntityExclusionUnderRepeatableRead(t *testing.T) {
	dsn := os.Getenv("PAGPOLAR_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Skip("PAGPOLAR_TEST_POSTGRES_DSN is not set")
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	table := "inbox_rr_" + hex.EncodeToString(b)
	sep := "?"
	for _, c := range dsn {
		if c == '?' {
			sep = "&"
		}
	}
	s, err := sqlinbox.OpenPostgres(dsn+sep+"default_transaction_isolation=repeatable%20read", sqlinbox.WithTable(table))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t.Cleanup(func() {
		if db, err := sqlinboxDB(dsn); err == nil {
			_, _ = db.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+table)
			_ = db.Close()
		}
		_ = s.Close()
	})
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"A", "B"} {
		if _, _, err := s.Insert(ctx, webhook.Record{Key: k, Event: "TRANSACTION_" + k, Entity: "sale:E", Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	// Hold the entity's advisory lock so both claims queue behind it.
	db, err := sqlinboxDB(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock(hashtext($1), hashtext('sale:E'))", table); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	for _, k := range []string{"A", "B"} {
		go func() {
			_, err := s.Claim(ctx, k, "owner-"+k, time.Minute)
			errs <- err
		}()
	}
	// Let both claims reach the lock wait (real time: PostgreSQL's queue is the subject).
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'advisory'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n >= 2 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_unlock(hashtext($1), hashtext('sale:E'))", table); err != nil {
		t.Fatal(err)
	}
	e1, e2 := <-errs, <-errs
	claimed := 0
	for _, e := range []error{e1, e2} {
		switch {
		case e == nil:
			claimed++
		case errors.Is(e, webhook.ErrEntityBusy):
		default:
			t.Fatalf("claim: %v", e)
		}
	}
	if claimed != 1 {
		t.Fatalf("%d events of one sale claimed at once (errors %v, %v)", claimed, e1, e2)
	}
}
