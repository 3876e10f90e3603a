package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/examples/internal/exampleenv"
	"github.com/pagpolar/pagpolar-go/keystore/sqlstore"
)

func main() {
	ref := flag.String("ref", "", "order code (default: PEDIDO-1234 plus a suffix unique to this run)")
	flag.Parse()
	// Every call runs under a deadline of yours: an unreachable API or a
	// charge whose outcome stays unknown ends in an error, not a hang.
	ctx, cancel := context.WithTimeout(context.Background(), exampleenv.Deadline)
	defer cancel()
	// The key store: a SQLite file. Here in a temporary directory; in
	// production a path that survives restarts (or PostgreSQL, Redis).
	dir, err := os.MkdirTemp("", "checkout")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := run(ctx, os.Stdout, filepath.Join(dir, "keys.db"), *ref); err != nil {
		log.Fatal(err)
	}
}

var errCrash = errors.New("process crashed")

func run(ctx context.Context, out io.Writer, dbPath, ref string) error {
	api, closeAPI, err := exampleenv.Connect(out)
	if err != nil {
		return err
	}
	defer closeAPI()
	order := pagpolar.PixParams{
		OfferID:           api.OfferID,
		ExternalReference: exampleenv.Ref("PEDIDO-1234", ref),
		Customer:          pagpolar.Customer{Name: "Maria Silva", Email: "maria@exemplo.com", Document: "123.456.789-09"},
	}
	fmt.Fprintf(out, "order %s, offer %s\n", order.ExternalReference, order.OfferID)

	// First "process": the charge is sent, then the process dies before the
	// answer is stored (a hook stands in for kill -9 so the example can go on).
	err = func() (err error) {
		store, err := sqlstore.OpenSQLite(dbPath, sqlstore.DeclaredNew("example: the first run of this program on a new database file"))
		if err != nil {
			return err
		}
		defer store.Close()
		if err := store.Migrate(ctx); err != nil {
			return err
		}
		client, err := pagpolar.NewClient(api.CredentialID, api.Token, append(api.Options(), pagpolar.WithStore(store),
			pagpolar.WithHook(func(_ context.Context, e pagpolar.Event) {
				if e.Kind == pagpolar.EventSent {
					panic(errCrash)
				}
			}))...)
		if err != nil {
			return err
		}
		defer func() {
			if r := recover(); r == errCrash {
				fmt.Fprintln(out, "run 1: crashed after sending the charge, before storing the answer")
				err = nil
			} else if r != nil {
				panic(r)
			}
		}()
		_, err = client.Payments.Pix(ctx, order)
		return err
	}()
	if err != nil {
		return err
	}

	// Second process: same store, same order. The operation is found pending;
	// the SDK looks the sale up before it would ever send again. (A real
	// kill -9 would leave the first process's lease to expire first,
	// RetryPolicy.LeaseTTL; the simulated crash released it on the way out.)
	store, err := sqlstore.OpenSQLite(dbPath, sqlstore.DeclaredNew("example: the first run of this program on a new database file"))
	if err != nil {
		return err
	}
	defer store.Close()
	client, err := pagpolar.NewClient(api.CredentialID, api.Token, append(api.Options(), pagpolar.WithStore(store))...)
	if err != nil {
		return err
	}
	charge, err := client.Payments.Pix(ctx, order)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "run 2: order %s settled from %s: sale %s, status %s, %d centavos\n",
		order.ExternalReference, charge.Operation.Source, charge.Sale.ID, charge.Sale.Status, charge.Sale.Amount)
	if api.Fake != nil {
		fmt.Fprintf(out, "sales the fake recorded for the order: %d\n", len(api.Fake.Ledger().Sales))
	} else {
		sales, err := client.Payments.SalesByExternalReference(ctx, order.ExternalReference)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "sales the API lists for the order: %d\n", len(sales))
	}
	return nil
}
