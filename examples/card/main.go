package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/examples/internal/exampleenv"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

func main() {
	ref := flag.String("ref", "", "order code (default: PEDIDO-CARD plus a suffix unique to this run)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), exampleenv.Deadline)
	defer cancel()
	if err := run(ctx, os.Stdout, *ref); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, out io.Writer, ref string) error {
	api, closeAPI, err := exampleenv.ConnectWith(out, pagpolartest.WithAsync(pagpolartest.Async{Cards: true, DecideAfter: 300 * time.Millisecond}))
	if err != nil {
		return err
	}
	defer closeAPI()
	// A memory store keeps the example self-contained; a checkout uses a
	// durable one (sqlstore, redisstore).
	client, err := pagpolar.NewClient(api.CredentialID, api.Token, append(api.Options(), pagpolar.WithStore(keystore.NewMemory()))...)
	if err != nil {
		return err
	}
	order := exampleenv.Ref("PEDIDO-CARD", ref)
	customer := pagpolar.Customer{Name: "Maria Silva", Email: "maria@exemplo.com", Document: "123.456.789-09"}
	// The first card is one the fake declines after answering pending; the
	// second one it approves.
	cards := []string{"tok_decline_first_card", "tok_second_card"}
	for attempt, token := range cards {
		opID := fmt.Sprintf("card:%s:%d", order, attempt+1) // one operation per card tried
		charge, err := client.Payments.CreditCard(ctx, pagpolar.CreditCardParams{
			OfferID: api.OfferID, ExternalReference: order, Customer: customer, CardToken: token, OperationID: opID})
		switch {
		case err == nil:
			fmt.Fprintf(out, "%s: sale %s answered %q (decision %s)\n", opID, charge.Sale.ID, charge.Sale.Status, charge.Decision())
		case errors.Is(err, pagpolar.ErrFailed):
			fmt.Fprintf(out, "%s: declined at once; trying the next card\n", opID)
			continue
		default: // ErrNotExecuted or ErrOutcomeUnknown: call again later with the SAME operation ID
			return err
		}
		decision := charge.Decision()
		if !decision.Decided() {
			rep, err := client.AwaitDecision(ctx, opID, pagpolar.AwaitParams{Poll: 100 * time.Millisecond, MaxPoll: time.Second})
			switch {
			case errors.Is(err, pagpolar.ErrDeclined):
				fmt.Fprintf(out, "%s: declined after it was answered pending: safe to try another card under a new operation ID\n", opID)
				continue
			case err != nil:
				return err
			}
			decision = rep.Decision
		}
		if decision.Paid() {
			fmt.Fprintf(out, "%s: paid: ship order %s\n", opID, order)
			break
		}
		fmt.Fprintf(out, "%s: decided %s: not shipping\n", opID, decision)
		break
	}
	if api.Fake != nil {
		paid := 0
		for _, s := range api.Fake.Ledger().Sales {
			if s.Status == "paid" {
				paid++
			}
		}
		fmt.Fprintf(out, "sales the fake recorded for the order: %d, paid: %d\n", len(api.Fake.Ledger().Sales), paid)
	}
	return nil
}
