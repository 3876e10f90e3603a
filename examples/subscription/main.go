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
)

func main() {
	ref := flag.String("ref", "", "subscription reference (default: ASSINATURA-42 plus a suffix unique to this run)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), exampleenv.Deadline)
	defer cancel()
	dir, err := os.MkdirTemp("", "subscription")
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
	reference := exampleenv.Ref("ASSINATURA-42", ref)
	sub, err := client.Subscriptions.Subscribe(ctx, pagpolar.SubscribeParams{
		OfferID: api.PlanID, ExternalReference: reference, PaymentMethod: "pix",
		Customer: pagpolar.Customer{Name: "Carla Dias", Email: "carla@exemplo.com", Document: "987.654.321-00"},
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "subscription %s: subscribed to %s: %s\n", reference, sub.Subscription.OfferID, sub.Subscription.Status)
	for i, offer := range []string{api.OtherPlanID, api.PlanID} {
		pc, err := client.Subscriptions.ChangePlan(ctx, pagpolar.ChangePlanParams{
			OperationID:    fmt.Sprintf("plan-change-%s-%d", reference, i+1), // e.g. your plan changes table's row ID
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
