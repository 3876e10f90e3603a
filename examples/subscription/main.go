// Command subscription subscribes a customer to a plan and changes the plan
// twice. Plan changes take operation IDs from your records: a subscription
// can change plans many times.
//
//	go run ./examples/subscription
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
	sub, err := client.Subscriptions.Subscribe(ctx, pagpolar.SubscribeParams{
		OfferID: api.PlanID, ExternalReference: "ASSINATURA-42", PaymentMethod: "pix",
		Customer: pagpolar.Customer{Name: "Carla Dias", Email: "carla@exemplo.com", Document: "987.654.321-00"},
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "subscribed to %s: %s\n", sub.Subscription.OfferID, sub.Subscription.Status)
	for i, offer := range []string{api.OtherPlanID, api.PlanID} {
		pc, err := client.Subscriptions.ChangePlan(ctx, pagpolar.ChangePlanParams{
			OperationID:    fmt.Sprintf("plan-change-ASSINATURA-42-%d", i+1),
			SubscriptionID: sub.Subscription.ID,
			NewOfferID:     offer,
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "plan change %d: %s -> %s\n", i+1, pc.PlanChange.FromOfferID, pc.PlanChange.OfferID)
	}
	now, err := client.Subscriptions.Get(ctx, sub.Subscription.ID)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "now on %s after %d plan changes\n", now.OfferID, len(now.PlanChanges))
	return nil
}
