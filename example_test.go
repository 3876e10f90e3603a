package pagpolar_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// fakeAPI starts the in-process fake PagPolar for an example.
func fakeAPI() *pagpolartest.Server {
	srv := pagpolartest.NewUnstartedServer(pagpolartest.WithProcessingWindow(200 * time.Millisecond))
	if err := srv.Start(); err != nil {
		log.Fatal(err)
	}
	return srv
}

// fastPolicy matches the fake's shortened in-processing window, so the
// examples settle in milliseconds. Production code keeps the defaults.
var fastPolicy = pagpolar.RetryPolicy{
	ProcessingWindow: 200 * time.Millisecond,
	WindowMargin:     20 * time.Millisecond,
	SettleDelay:      20 * time.Millisecond,
	LookupInterval:   10 * time.Millisecond,
	MaxRetryAfter:    10 * time.Millisecond,
}

// A PIX charge. The operation ID defaults to "pix:" + the order reference, so
// calling Pix again for the same order never charges twice.
func ExamplePaymentsService_Pix() {
	srv := fakeAPI()
	defer srv.Close()

	client, err := pagpolar.NewClient(srv.CredentialID, pagpolar.StaticToken(srv.Token),
		pagpolar.WithBaseURL(srv.URL),
		pagpolar.WithStore(keystore.NewMemory()), // production: keystore/sqlstore or keystore/redisstore
	)
	if err != nil {
		log.Fatal(err)
	}
	params := pagpolar.PixParams{
		OfferID:           "offer-basic",
		ExternalReference: "PEDIDO-1234",
		Customer:          pagpolar.Customer{Name: "Maria Silva", Email: "cliente@exemplo.com", Document: "123.456.789-09"},
	}
	charge, err := client.Payments.Pix(context.Background(), params)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(charge.Sale.Status, charge.Sale.Amount, charge.Operation.ID, charge.Operation.Source)

	// The same order again: answered from the key store, nothing sent.
	again, _ := client.Payments.Pix(context.Background(), params)
	fmt.Println(again.Sale.ID == charge.Sale.ID, again.Operation.Source)
	// Output:
	// pending 9990 pix:PEDIDO-1234 response
	// true local_record
}

// Handling ErrOutcomeUnknown: the answer was lost and the caller's deadline
// ended before the SDK could confirm whether the sale exists. Never retry
// with a new operation ID; call again with the same params (or Resume).
func ExampleErrOutcomeUnknown() {
	srv := fakeAPI()
	defer srv.Close()
	client, err := pagpolar.NewClient(srv.CredentialID, pagpolar.StaticToken(srv.Token), pagpolar.WithStore(keystore.NewMemory()),
		pagpolar.WithBaseURL(srv.URL), pagpolar.WithRetryPolicy(fastPolicy))
	if err != nil {
		log.Fatal(err)
	}
	customer := pagpolar.Customer{Name: "Ana", Email: "ana@exemplo.com", Document: "12345678909"}
	// An earlier order went through: the client now knows the API's clock.
	if _, err := client.Payments.Pix(context.Background(), pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: "PEDIDO-76", Customer: customer}); err != nil {
		log.Fatal(err)
	}
	// This sale is created, but the connection drops before the answer, and
	// the lookups fail until the caller's deadline.
	srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThenDrop, Times: 1})
	srv.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.Fault500NoCommit})
	params := pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: "PEDIDO-77", Customer: customer}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = client.Payments.Pix(ctx, params)
	var unknown *pagpolar.OutcomeUnknownError
	if errors.As(err, &unknown) {
		fmt.Println("unknown:", unknown.OperationID)
		// Later (a retry job, the next request for this order): the same call
		// settles the operation by lookup before it would ever resend.
		srv.ClearFaults()
		charge, err := client.Payments.Pix(context.Background(), params)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("settled:", charge.Operation.Source, charge.Sale.Status)
	}
	n := 0
	for _, s := range srv.Ledger().Sales {
		if s.ExternalReference == "PEDIDO-77" {
			n++
		}
	}
	fmt.Println("sales for the order:", n)
	// Output:
	// unknown: pix:PEDIDO-77
	// settled: lookup pending
	// sales for the order: 1
}

// A partial refund. Refunds need an operation ID from your own records: a
// sale can have several partial refunds.
func ExampleRefundsService_Create() {
	srv := fakeAPI()
	defer srv.Close()
	client, err := pagpolar.NewClient(srv.CredentialID, pagpolar.StaticToken(srv.Token), pagpolar.WithBaseURL(srv.URL), pagpolar.WithStore(keystore.NewMemory()))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	charge, err := client.Payments.CreditCard(ctx, pagpolar.CreditCardParams{
		OfferID: "offer-premium", ExternalReference: "PEDIDO-9", CardToken: "tok_ok",
		Customer: pagpolar.Customer{Name: "João", Email: "joao@exemplo.com", Document: "11.222.333/0001-81"},
	})
	if err != nil {
		log.Fatal(err)
	}
	for i, amount := range []int64{5000, 2500} {
		r, err := client.Refunds.Create(ctx, pagpolar.RefundParams{
			OperationID: fmt.Sprintf("refund-PEDIDO-9-%d", i+1), SaleID: charge.Sale.ID, Amount: amount,
		})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(r.Refund.Amount, r.Refund.Status)
	}
	sale, _ := client.Payments.GetSale(ctx, charge.Sale.ID)
	fmt.Println(sale.Amount, sale.RefundedAmount, sale.Status)
	// Output:
	// 5000 completed
	// 2500 completed
	// 19990 7500 partially_refunded
}
