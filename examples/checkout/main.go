// Command checkout charges an order by PIX and survives a crash between
// sending the charge and storing its answer: the next run settles the order
// from the SQLite key store and a lookup, without charging it twice.
//
//	go run ./examples/checkout
//
// Against a real API set PAGPOLAR_BASE_URL, PAGPOLAR_CREDENTIAL_ID,
// PAGPOLAR_TOKEN and PAGPOLAR_OFFER_ID; otherwise it runs against the fake.
package main

import (
	"context"
	"errors"
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
	dir, err := os.MkdirTemp("", "checkout")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := run(context.Background(), os.Stdout, filepath.Join(dir, "keys.db")); err != nil {
		log.Fatal(err)
	}
}

var errCrash = errors.New("process crashed")

func run(ctx context.Context, out io.Writer, dbPath string) error {
	api, closeAPI, err := exampleenv.Connect()
	if err != nil {
		return err
	}
	defer closeAPI()
	order := pagpolar.PixParams{
		OfferID:           api.OfferID,
		ExternalReference: "PEDIDO-1234",
		Customer:          pagpolar.Customer{Name: "Maria Silva", Email: "maria@exemplo.com", Document: "123.456.789-09"},
	}

	// First "process": the charge is sent, then the process dies before the
	// answer is stored (a hook stands in for kill -9 so the example can go on).
	err = func() (err error) {
		store, err := sqlstore.OpenSQLite(dbPath)
		if err != nil {
			return err
		}
		defer store.Close()
		if err := store.Migrate(ctx); err != nil {
			return err
		}
		client, err := pagpolar.NewClient(api.CredentialID, api.Token, pagpolar.WithBaseURL(api.BaseURL), pagpolar.WithStore(store),
			pagpolar.WithRetryPolicy(api.Policy), pagpolar.WithHook(func(_ context.Context, e pagpolar.Event) {
				if e.Kind == pagpolar.EventSent {
					panic(errCrash)
				}
			}))
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
	store, err := sqlstore.OpenSQLite(dbPath)
	if err != nil {
		return err
	}
	defer store.Close()
	client, err := pagpolar.NewClient(api.CredentialID, api.Token, pagpolar.WithBaseURL(api.BaseURL), pagpolar.WithStore(store),
		pagpolar.WithRetryPolicy(api.Policy))
	if err != nil {
		return err
	}
	charge, err := client.Payments.Pix(ctx, order)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "run 2: order %s settled from %s: sale status %s, %d centavos\n", order.ExternalReference, charge.Operation.Source, charge.Sale.Status, charge.Sale.Amount)
	if api.Fake != nil {
		fmt.Fprintf(out, "sales the fake recorded for the order: %d\n", len(api.Fake.Ledger().Sales))
	}
	return nil
}
