// Package staging is an integration test against a real PagPolar API
// (staging). It runs only when PAGPOLAR_TOKEN, PAGPOLAR_CREDENTIAL_ID and
// PAGPOLAR_BASE_URL are set, plus PAGPOLAR_OFFER_ID (an offer of that
// account). It charges one PIX (pending until paid: nothing is captured) and
// checks the replay and lookup behaviour CONTRACT.md marks as documented.
package staging

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore"
)

func TestStagingPixIsIdempotent(t *testing.T) {
	base, cred, tok, offer := os.Getenv("PAGPOLAR_BASE_URL"), os.Getenv("PAGPOLAR_CREDENTIAL_ID"), os.Getenv("PAGPOLAR_TOKEN"), os.Getenv("PAGPOLAR_OFFER_ID")
	if base == "" || cred == "" || tok == "" || offer == "" {
		t.Skip("set PAGPOLAR_BASE_URL, PAGPOLAR_CREDENTIAL_ID, PAGPOLAR_TOKEN and PAGPOLAR_OFFER_ID to run against staging")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ref := fmt.Sprintf("sdk-it-%d", time.Now().UnixNano())
	params := pagpolar.PixParams{OfferID: offer, ExternalReference: ref,
		Customer: pagpolar.Customer{Name: "Teste SDK", Email: "sdk@example.com", Document: "12345678909"}}

	// Two clients with separate stores send the same derived key: the second
	// must get the server's replay, not a second sale.
	a, err := pagpolar.NewClient(cred, pagpolar.StaticToken(tok), pagpolar.WithBaseURL(base), pagpolar.WithStore(keystore.NewMemory()))
	if err != nil {
		t.Fatal(err)
	}
	b, err := pagpolar.NewClient(cred, pagpolar.StaticToken(tok), pagpolar.WithBaseURL(base), pagpolar.WithStore(keystore.NewMemory()))
	if err != nil {
		t.Fatal(err)
	}
	first, err := a.Payments.Pix(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.Payments.Pix(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if second.Sale.ID != first.Sale.ID || second.Operation.Source != pagpolar.SourceReplay {
		t.Fatalf("second host: sale %s from %s; want %s replayed", second.Sale.ID, second.Operation.Source, first.Sale.ID)
	}
	sales, err := a.Payments.SalesByExternalReference(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if len(sales) != 1 {
		t.Fatalf("%d sales for %s, want 1", len(sales), ref)
	}
}
