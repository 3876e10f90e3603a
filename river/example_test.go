package pagpolarriver_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	_ "modernc.org/sqlite"

	pagpolar "github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore/storeurl"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
	pagpolarriver "github.com/pagpolar/pagpolar-go/river"
)

// A checkout commits its order and PIX intent together; a River worker
// charges it, and OnSettled writes the sale into the order in the
// transaction that completes the job.
func Example() {
	ctx := context.Background()
	srv := pagpolartest.NewUnstartedServer()
	if err := srv.Start(); err != nil {
		panic(err)
	}
	defer srv.Close()
	dir, _ := os.MkdirTemp("", "pagpolarriver-example-")
	defer func() { _ = os.RemoveAll(dir) }()

	db, _ := sql.Open("sqlite", "file:"+filepath.Join(dir, "shop.db")+"?_pragma=busy_timeout(5000)&_txlock=immediate")
	db.SetMaxOpenConns(1)
	defer func() { _ = db.Close() }()
	m, _ := rivermigrate.New(riversqlite.New(db), nil)
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		panic(err)
	}
	_, _ = db.Exec(`CREATE TABLE orders (id TEXT PRIMARY KEY, name TEXT, email TEXT, sale_id TEXT, decision TEXT)`)

	keys, closeKeys, err := storeurl.Open(ctx, "sqlite:"+filepath.Join(dir, "keys.db")+"?declared_new=example")
	if err != nil {
		panic(err)
	}
	defer func() { _ = closeKeys() }()
	client, _ := pagpolar.NewClient(srv.CredentialID, pagpolar.StaticToken(srv.Token), pagpolar.WithBaseURL(srv.URL), pagpolar.WithStore(keys))

	settled := make(chan pagpolarriver.Result, 1)
	workers := river.NewWorkers()
	err = pagpolarriver.AddWorkers(workers, pagpolarriver.Config[*sql.Tx]{
		Client: client,
		Resolver: pagpolarriver.ResolverFunc(func(ctx context.Context, orderID string) (pagpolarriver.Payer, error) {
			var p pagpolarriver.Payer
			err := db.QueryRowContext(ctx, `SELECT name, email FROM orders WHERE id = ?`, orderID).Scan(&p.Customer.Name, &p.Customer.Email)
			return p, err
		}),
		OnSettled: func(ctx context.Context, tx *sql.Tx, r pagpolarriver.Result) error {
			_, err := tx.ExecContext(ctx, `UPDATE orders SET sale_id = ?, decision = ? WHERE id = ?`, r.EffectID, string(r.Decision), r.OrderID)
			settled <- r
			return err
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		panic(err)
	}
	rc, err := river.NewClient(riversqlite.New(db), &river.Config{
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 2}},
		Workers: workers, FetchPollInterval: 50 * time.Millisecond, FetchCooldown: 10 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		panic(err)
	}

	// The checkout: the order and its charge intent, one transaction.
	tx, _ := db.BeginTx(ctx, nil)
	_, _ = tx.ExecContext(ctx, `INSERT INTO orders (id, name, email) VALUES (?, ?, ?)`, "order-1001", "Maria da Silva", "maria@example.com")
	ins, err := pagpolarriver.InsertTx(ctx, rc, tx, pagpolarriver.PixIntent{
		OperationID: "pix:order-1001", OrderID: "order-1001", OfferID: "offer-basic", ExternalReference: "order-1001"}, nil)
	if err != nil {
		_ = tx.Rollback()
		panic(err)
	}
	if err := tx.Commit(); err != nil {
		panic(err)
	}
	fmt.Println("intent inserted, duplicate:", ins.Duplicate)

	if err := rc.Start(ctx); err != nil {
		panic(err)
	}
	r := <-settled
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_ = rc.Stop(sctx)

	var decision string
	_ = db.QueryRow(`SELECT decision FROM orders WHERE id = ?`, "order-1001").Scan(&decision)
	fmt.Println("operation:", r.OperationID)
	fmt.Println("order decision:", decision)
	fmt.Println("sales for the order:", len(srv.Ledger().Sales))
	// Output:
	// intent inserted, duplicate: false
	// operation: pix:order-1001
	// order decision: pending
	// sales for the order: 1
}
