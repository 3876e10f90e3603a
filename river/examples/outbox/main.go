package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/url"
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

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := run(ctx, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// api is the PagPolar API the example talks to: `pagpolar sim` (or any
// API) named by the environment, or an in-process fake.
type api struct {
	baseURL, credential, token, offer string
	fake                              *pagpolartest.Server
}

func apiFromEnv() (api, error) {
	a := api{baseURL: os.Getenv("PAGPOLAR_BASE_URL"), credential: os.Getenv("PAGPOLAR_CREDENTIAL_ID"),
		token: os.Getenv("PAGPOLAR_TOKEN"), offer: os.Getenv("PAGPOLAR_OFFER_ID")}
	if a.offer == "" {
		a.offer = "offer-basic"
	}
	if a.baseURL != "" || a.credential != "" || a.token != "" {
		if a.baseURL == "" || a.credential == "" || a.token == "" {
			return a, errors.New("set all of PAGPOLAR_BASE_URL, PAGPOLAR_CREDENTIAL_ID and PAGPOLAR_TOKEN, or none")
		}
		return a, nil
	}
	srv := pagpolartest.NewUnstartedServer()
	if err := srv.Start(); err != nil {
		return a, err
	}
	a.baseURL, a.credential, a.token, a.fake = srv.URL, srv.CredentialID, srv.Token, srv
	return a, nil
}

func run(ctx context.Context, out io.Writer) error {
	a, err := apiFromEnv()
	if err != nil {
		return err
	}
	if a.fake != nil {
		defer a.fake.Close()
		fmt.Fprintln(out, "API: an in-process fake (export the variables `pagpolar sim` prints to use it instead)")
	} else {
		fmt.Fprintln(out, "API:", a.baseURL)
	}
	dir, err := os.MkdirTemp("", "outbox")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()

	// The shop's database: orders, and River's tables beside them.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "shop.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		return err
	}
	db.SetMaxOpenConns(1)
	defer func() { _ = db.Close() }()
	m, err := rivermigrate.New(riversqlite.New(db), nil)
	if err != nil {
		return err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE orders (id TEXT PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL,
		status TEXT NOT NULL DEFAULT 'awaiting_charge', sale_id TEXT, decision TEXT)`); err != nil {
		return err
	}

	// The SDK's key store: durable and shared by every worker (here one
	// SQLite file, new for this run).
	keys, closeKeys, err := storeurl.Open(ctx, "sqlite:"+filepath.Join(dir, "keys.db")+"?declared_new="+url.QueryEscape("examples/outbox: a file made for this run"))
	if err != nil {
		return err
	}
	defer func() { _ = closeKeys() }()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	client, err := pagpolar.NewClient(a.credential, pagpolar.StaticToken(a.token), pagpolar.WithBaseURL(a.baseURL),
		pagpolar.WithStore(keys), pagpolar.WithLogger(quiet))
	if err != nil {
		return err
	}

	settled := make(chan pagpolarriver.Result, 1)
	workers := river.NewWorkers()
	if err := pagpolarriver.AddWorkers(workers, pagpolarriver.Config[*sql.Tx]{
		Client: client,
		Resolver: pagpolarriver.ResolverFunc(func(ctx context.Context, orderID string) (pagpolarriver.Payer, error) {
			var p pagpolarriver.Payer
			err := db.QueryRowContext(ctx, `SELECT name, email FROM orders WHERE id = ?`, orderID).Scan(&p.Customer.Name, &p.Customer.Email)
			if errors.Is(err, sql.ErrNoRows) {
				err = fmt.Errorf("order %s: %w", orderID, pagpolarriver.ErrUnresolvable)
			}
			return p, err
		}),
		OnSettled: func(ctx context.Context, tx *sql.Tx, r pagpolarriver.Result) error {
			_, err := tx.ExecContext(ctx, `UPDATE orders SET status = 'charged', sale_id = ?, decision = ? WHERE id = ?`,
				r.EffectID, string(r.Decision), r.OrderID)
			if err == nil {
				settled <- r
			}
			return err
		},
		Logger: quiet,
	}); err != nil {
		return err
	}
	rc, err := river.NewClient(riversqlite.New(db), &river.Config{
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 4}},
		Workers: workers, FetchPollInterval: 50 * time.Millisecond, FetchCooldown: 10 * time.Millisecond, Logger: quiet,
	})
	if err != nil {
		return err
	}

	suffix := time.Now().UTC().Format("150405.000")
	paid, aborted := "PEDIDO-"+suffix, "PEDIDO-"+suffix+"-aborted"
	if err := checkout(ctx, db, rc, paid, a.offer, false); err != nil {
		return err
	}
	if err := checkout(ctx, db, rc, aborted, a.offer, true); err != nil {
		return err
	}
	fmt.Fprintf(out, "checkout %s: order and intent committed\n", paid)
	fmt.Fprintf(out, "checkout %s: rolled back after InsertTx (no order, no intent)\n", aborted)

	if err := rc.Start(ctx); err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = rc.Stop(sctx)
	}()
	var r pagpolarriver.Result
	select {
	case r = <-settled:
	case <-ctx.Done():
		return fmt.Errorf("the intent was not settled: %w", ctx.Err())
	}
	var status, saleID, decision string
	if err := db.QueryRowContext(ctx, `SELECT status, sale_id, decision FROM orders WHERE id = ?`, paid).Scan(&status, &saleID, &decision); err != nil {
		return err
	}
	fmt.Fprintf(out, "worker: operation %s charged sale %s (decision %s, job %d)\n", r.OperationID, r.EffectID, r.Decision, r.JobID)
	fmt.Fprintf(out, "order %s: %s, sale %s, decision %s\n", paid, status, saleID, decision)
	for _, ref := range []string{paid, aborted} {
		sales, err := client.Payments.SalesByExternalReference(ctx, ref)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "sales the API holds for %s: %d\n", ref, len(sales))
	}
	return nil
}

// checkout writes the order and its PIX intent in one transaction, and
// rolls it back instead of committing when abort is set.
func checkout(ctx context.Context, db *sql.DB, rc *river.Client[*sql.Tx], orderID, offer string, abort bool) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id, name, email) VALUES (?, ?, ?)`, orderID, "Maria da Silva", "maria@example.com"); err != nil {
		return err
	}
	if _, err := pagpolarriver.InsertTx(ctx, rc, tx, pagpolarriver.PixIntent{
		OperationID: "pix:" + orderID, OrderID: orderID, OfferID: offer, ExternalReference: orderID}, nil); err != nil {
		return err
	}
	if abort {
		return tx.Rollback()
	}
	return tx.Commit()
}
