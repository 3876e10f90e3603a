package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/examples/internal/exampleenv"
	"github.com/pagpolar/pagpolar-go/keystore/sqlstore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

func main() {
	ref := flag.String("ref", "", "order code (default: PEDIDO-55 plus a suffix unique to this run)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), exampleenv.Deadline)
	defer cancel()
	dir, err := os.MkdirTemp("", "refund")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := run(ctx, os.Stdout, filepath.Join(dir, "keys.db"), *ref); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, out io.Writer, dbPath, ref string) error {
	api, closeAPI, err := exampleenv.Connect(out)
	if err != nil {
		return err
	}
	defer closeAPI()
	// The key store: a SQLite file (here in a temporary directory; in
	// production a path that survives restarts, or PostgreSQL, Redis).
	store, err := sqlstore.OpenSQLite(dbPath, sqlstore.DeclaredNew("example: the first run of this program on a new database file"))
	if err != nil {
		return err
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		return err
	}
	client, err := pagpolar.NewClient(api.CredentialID, api.Token, append(api.Options(), pagpolar.WithStore(store))...)
	if err != nil {
		return err
	}
	order := exampleenv.Ref("PEDIDO-55", ref)
	charge, err := client.Payments.CreditCard(ctx, pagpolar.CreditCardParams{
		OfferID: api.OfferID, ExternalReference: order, CardToken: envOr("PAGPOLAR_CARD_TOKEN", "tok_ok"),
		Customer: pagpolar.Customer{Name: "João Souza", Email: "joao@exemplo.com", Document: "11.222.333/0001-81"},
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "order %s: charged %d centavos (%s)\n", order, charge.Sale.Amount, charge.Sale.Status)

	for i, amount := range []int64{charge.Sale.Amount / 2, charge.Sale.Amount / 4} {
		if i == 1 && api.Fake != nil {
			api.Fake.Inject(pagpolartest.Fault{Route: "refund", Action: pagpolartest.FaultCommitThenDrop, Times: 1})
			fmt.Fprintln(out, "(the fake will lose the answer to the next refund)")
		}
		r, err := client.Refunds.Create(ctx, pagpolar.RefundParams{
			OperationID: fmt.Sprintf("refund-%s-%d", order, i+1), // e.g. your refunds table's row ID
			SaleID:      charge.Sale.ID,
			Amount:      amount,
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "refund %d: %d centavos %s (from %s)\n", i+1, r.Refund.Amount, r.Refund.Status, r.Operation.Source)
	}
	refunds, err := client.Refunds.ListBySale(ctx, charge.Sale.ID)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "the sale has %d refunds\n", len(refunds))
	return nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
