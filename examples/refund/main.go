// Command refund charges a card and refunds it in two parts. Each refund's
// operation ID comes from your own records (a sale can have several partial
// refunds); the second refund's answer is lost on purpose against the fake,
// and the SDK tells it from the first by the snapshot it took before sending.
//
//	go run ./examples/refund
package main

import (
	"context"
	"fmt"
	"github.com/pagpolar/pagpolar-go/keystore"
	"io"
	"log"
	"os"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/examples/internal/exampleenv"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, out io.Writer) error {
	api, closeAPI, err := exampleenv.Connect()
	if err != nil {
		return err
	}
	defer closeAPI()
	client, err := pagpolar.NewClient(api.CredentialID, api.Token, pagpolar.WithBaseURL(api.BaseURL), pagpolar.WithRetryPolicy(api.Policy),
		pagpolar.WithStore(keystore.NewMemory()) /* an example: use keystore/sqlstore or keystore/redisstore in production */)
	if err != nil {
		return err
	}
	charge, err := client.Payments.CreditCard(ctx, pagpolar.CreditCardParams{
		OfferID: api.OfferID, ExternalReference: "PEDIDO-55", CardToken: envOr("PAGPOLAR_CARD_TOKEN", "tok_ok"),
		Customer: pagpolar.Customer{Name: "João Souza", Email: "joao@exemplo.com", Document: "11.222.333/0001-81"},
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "charged %d centavos (%s)\n", charge.Sale.Amount, charge.Sale.Status)

	for i, amount := range []int64{5000, 2500} {
		if i == 1 && api.Fake != nil {
			api.Fake.Inject(pagpolartest.Fault{Route: "refund", Action: pagpolartest.FaultCommitThenDrop, Times: 1})
		}
		r, err := client.Refunds.Create(ctx, pagpolar.RefundParams{
			OperationID: fmt.Sprintf("refund-PEDIDO-55-%d", i+1), // e.g. your refunds table's row ID
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
