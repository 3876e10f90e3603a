package storetest

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// engineCustomer is a valid customer for the engine tests (no real data).
var engineCustomer = pagpolar.Customer{Name: "Ana Souza", Email: "ana@example.com", Document: "529.982.247-25"}

// AmnesiaEngineRun is the end-to-end half of the amnesia proof, through
// the SDK's public API against the fake PagPolar: a PIX charge is
// committed and answered 500 (the API releases its key), then the store is
// emptied, then the same charge is called again. It returns the second
// call's error and how many sales and money requests the fake saw for the
// charge. With a store that detects the loss the second call sends nothing
// (1 sale, 1 request); with one that does not, the API takes the resend as
// a new charge (2 sales).
func AmnesiaEngineRun(t *testing.T, store keystore.Store, wipe func(t *testing.T)) (sales, posts int, second error) {
	t.Helper()
	const ref = "amnesia-order-1"
	srv := pagpolartest.NewServer(t, pagpolartest.WithProcessingWindow(time.Second))
	srv.Inject(pagpolartest.Fault{Route: "pix", ExternalReference: ref, Action: pagpolartest.FaultCommitThen500, Times: 1})
	c, err := pagpolar.NewClient(srv.CredentialID, pagpolar.StaticToken(srv.Token),
		pagpolar.WithBaseURL(srv.URL), pagpolar.WithStore(store),
		pagpolar.WithRetryPolicy(pagpolar.RetryPolicy{
			ProcessingWindow: time.Second, WindowMargin: 200 * time.Millisecond,
			SettleDelay: 200 * time.Millisecond, LookupInterval: 50 * time.Millisecond,
		}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if hp, ok := store.(keystore.HistoryProver); ok {
		// A fresh store: what this run proves is the loss after it.
		if err := hp.DeclareNew(ctx, "storetest: a fresh store"); err != nil {
			t.Fatal(err)
		}
	}
	pix := func() (*pagpolar.Charge, error) {
		return c.Payments.Pix(ctx, pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: ref, Customer: engineCustomer})
	}
	ch, err := pix()
	if err != nil {
		t.Fatalf("first call (commit, then 500): %v", err)
	}
	if ch.Operation.Source != pagpolar.SourceLookup {
		t.Fatalf("first call settled from %s, want lookup (the fault did not apply?)", ch.Operation.Source)
	}
	wipe(t)
	_, second = pix()
	l := srv.Ledger()
	for _, s := range l.Sales {
		if s.ExternalReference == ref {
			sales++
		}
	}
	for _, r := range l.Requests {
		if r.Method == http.MethodPost {
			posts++
		}
	}
	return sales, posts, second
}

// testAmnesiaEngine: the store emptied between a commit-then-500 and the
// next call gives 0 double effects, because Create refuses and the SDK
// sends nothing.
func testAmnesiaEngine(t *testing.T, b AmnesiaBackend) {
	sales, posts, err := AmnesiaEngineRun(t, b.Store, b.Wipe)
	if !errors.Is(err, pagpolar.ErrStoreUnavailable) || !errors.Is(err, keystore.ErrAmnesia) {
		t.Fatalf("second call after the wipe: %v; want ErrStoreUnavailable wrapping keystore.ErrAmnesia", err)
	}
	if sales != 1 || posts != 1 {
		t.Fatalf("the fake saw %d sales and %d money requests for the order, want 1 and 1 (nothing sent after the wipe)", sales, posts)
	}
}
