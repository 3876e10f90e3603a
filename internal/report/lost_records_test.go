package report

import (
	"context"
	"testing"

	pagpolar "github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// Effects of operations whose record the key store lost are counted as
// lost records, not as effects nobody asked for; a refund that follows a
// lost charge is expected only if its effect exists; and a run whose
// store detected the loss (settling stopped on amnesia) is incomplete,
// not failed, while the same count without a detected loss fails it.
func TestVerify_LostRecordsAreTheLossNotOrphans(t *testing.T) {
	srv := pagpolartest.NewServer(t)
	c, err := pagpolar.NewClient(srv.CredentialID, pagpolar.StaticToken(srv.Token), pagpolar.WithBaseURL(srv.URL), pagpolar.WithStore(keystore.NewMemory()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cust := pagpolar.Customer{Name: "Ana", Email: "ana@example.com", Document: "52998224725"}
	sale, err := c.Payments.Pix(ctx, pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: "o1", Customer: cust})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Pay(sale.Sale.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Refunds.Create(ctx, pagpolar.RefundParams{OperationID: "refund:o1", SaleID: sale.Sale.ID, Amount: 10}); err != nil {
		t.Fatal(err)
	}
	// The store lost both records; o2 was never charged, its refund never made.
	ops := []Expected{
		{OperationID: "pix:o1", Method: "pix", ExternalReference: "o1"},
		{OperationID: "refund:o1", Kind: "refund", IfEffect: true, Record: keystore.Record{Key: pagpolar.DerivedKey(srv.CredentialID, "refund:o1")}},
		{OperationID: "pix:o2", Method: "pix", ExternalReference: "o2"},
		{OperationID: "refund:o2", Kind: "refund", IfEffect: true, Record: keystore.Record{Key: pagpolar.DerivedKey(srv.CredentialID, "refund:o2")}},
	}
	ch := Verify(srv.CredentialID, srv.Ledger(), ops)
	if len(ch.LostRecords) != 2 || len(ch.Orphans) != 0 || len(ch.Duplicates) != 0 || len(ch.Unfinished) != 1 || ch.Operations != 3 {
		t.Fatalf("lost %q, orphans %q, duplicates %q, unfinished %q, operations %d; want 2 lost (o1's charge and refund), no orphan, o2's charge unfinished, 3 operations",
			ch.LostRecords, ch.Orphans, ch.Duplicates, ch.Unfinished, ch.Operations)
	}
	detected := &Report{Check: ch, Settling: Settling{Stopped: "the key store lost records", Amnesia: true}}
	if detected.OK() || !detected.Incomplete() {
		t.Fatal("a detected loss: want incomplete")
	}
	silent := &Report{Check: ch, Settling: Settling{Stopped: "the run's time ran out"}}
	if silent.Incomplete() {
		t.Fatal("lost records with no loss detected: want failed, not incomplete")
	}
}
