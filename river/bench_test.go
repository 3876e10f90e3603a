package pagpolarriver

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"

	pagpolar "github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore/storeurl"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// BenchmarkOutboxVsDirect charges batches of orders at 20 ms of API
// latency, 8 at a time, by two paths paired in each iteration: direct
// Payments.Pix calls, and the outbox (each order's transaction inserts its
// intent; River workers charge it and OnSettled completes it in a
// transaction). Both share the fake, the SQLite key store and the
// database. It reports outbox/direct, the outbox's throughput as a share
// of the direct calls'.
//
//	go test -run '^$' -bench OutboxVsDirect -benchtime 5x ./
func BenchmarkOutboxVsDirect(b *testing.B) {
	const batch, conc = 48, 8
	dir := b.TempDir()
	db, err := sql.Open("sqlite", sqliteDSN(filepath.Join(dir, "app.db")))
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	defer func() { _ = db.Close() }()
	migrateSQLite(b, db)
	srv := pagpolartest.NewServer(b, pagpolartest.WithLatency(20*time.Millisecond))
	keys, closeKeys, err := storeurl.Open(context.Background(), keyStoreURL(dir))
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = closeKeys() }()
	client, err := pagpolar.NewClient(srv.CredentialID, pagpolar.StaticToken(srv.Token), pagpolar.WithBaseURL(srv.URL),
		pagpolar.WithStore(keys), pagpolar.WithLogger(quiet()))
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{}, batch)
	workers := river.NewWorkers()
	if err := AddWorkers(workers, Config[*sql.Tx]{Client: client, Logger: quiet(),
		Resolver: ResolverFunc(func(context.Context, string) (Payer, error) { return Payer{Customer: customer(0)}, nil }),
		OnSettled: func(ctx context.Context, tx *sql.Tx, r Result) error {
			_, err := tx.ExecContext(ctx, `UPDATE orders SET status = 'settled', effect_id = ? WHERE id = ?`, r.EffectID, r.OrderID)
			done <- struct{}{}
			return err
		}}); err != nil {
		b.Fatal(err)
	}
	rc, err := river.NewClient(riversqlite.New(db), &river.Config{Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: conc}},
		Workers: workers, FetchPollInterval: 20 * time.Millisecond, FetchCooldown: 5 * time.Millisecond, Logger: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := rc.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = rc.Stop(sctx)
	}()
	c := customer(0)
	insertOrder := func(tx *sql.Tx, id string) {
		if _, err := tx.Exec(`INSERT INTO orders (id, name, email, document, phone) VALUES (?, ?, ?, ?, ?)`, id, c.Name, c.Email, c.Document, c.Phone); err != nil {
			b.Fatal(err)
		}
	}
	var direct, outbox time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Direct: the order commits, then the checkout calls the SDK.
		t0 := time.Now()
		var wg sync.WaitGroup
		sem := make(chan struct{}, conc)
		for k := range batch {
			id := fmt.Sprintf("direct-%d-%d", i, k)
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				tx, err := db.Begin()
				if err != nil {
					b.Error(err)
					return
				}
				insertOrder(tx, id)
				if err := tx.Commit(); err != nil {
					b.Error(err)
					return
				}
				if _, err := client.Payments.Pix(ctx, pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: id, Customer: c, OperationID: "pix:" + id}); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
		direct += time.Since(t0)

		// Outbox: the order and its intent commit together; River charges.
		t0 = time.Now()
		for k := range batch {
			id := fmt.Sprintf("outbox-%d-%d", i, k)
			tx, err := db.Begin()
			if err != nil {
				b.Fatal(err)
			}
			insertOrder(tx, id)
			if _, err := InsertTx(ctx, rc, tx, pix(id), nil); err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
		}
		for range batch {
			select {
			case <-done:
			case <-time.After(time.Minute):
				b.Fatal("outbox batch not settled within a minute")
			}
		}
		outbox += time.Since(t0)
	}
	b.StopTimer()
	b.ReportMetric(float64(direct)/float64(outbox), "outbox/direct")
	b.ReportMetric(float64(b.N*batch)/direct.Seconds(), "direct_orders/s")
	b.ReportMetric(float64(b.N*batch)/outbox.Seconds(), "outbox_orders/s")
}
