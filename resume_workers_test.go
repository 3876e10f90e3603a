package pagpolar_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/internal/benchpair/cases"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

type giveUpKey struct{}

// Two ResumeAll runs (two processes' clients on one store) settle the same
// 200 unknown operations at once, each 32 at a time, with 20 ms per lookup
// so that their work overlaps: never two workers on one operation (SAFETY
// rule 9) — no operation is taken while another client works on it
// (cases.LeaseWatch), every operation is looked up exactly once, and every
// one ends settled. The outcome does not depend on which client gets
// which operation.
func TestResumeAll_TwoClientsNeverWorkOneOperation(t *testing.T) {
	const n = 200
	srv := pagpolartest.NewServer(t, pagpolartest.WithProcessingWindow(50*time.Millisecond))
	watch := cases.NewLeaseWatch(keystore.NewMemory())
	newClient := func(hook pagpolar.Hook) *pagpolar.Client {
		opts := []pagpolar.Option{pagpolar.WithBaseURL(srv.URL), pagpolar.WithStore(watch), pagpolar.WithHTTPClient(benchTransport()), pagpolar.WithRetryPolicy(fastBenchPolicy())}
		if hook != nil {
			opts = append(opts, pagpolar.WithHook(hook))
		}
		c, err := pagpolar.NewClient(srv.CredentialID, pagpolar.StaticToken(srv.Token), opts...)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	origin := newClient(func(ctx context.Context, e pagpolar.Event) {
		if f, ok := ctx.Value(giveUpKey{}).(context.CancelFunc); ok && e.Kind == pagpolar.EventSent {
			f() // the caller gives up right after the lost answer: the sale is made
		}
	})
	ctx := context.Background()
	if _, err := origin.Payments.Pix(ctx, pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: "warm", Customer: benchCustomer}); err != nil {
		t.Fatal(err)
	}
	srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThenDrop})
	srv.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.Fault500NoCommit})
	for k := range n {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := origin.Payments.Pix(context.WithValue(cctx, giveUpKey{}, cancel), pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: fmt.Sprintf("w-%d", k), Customer: benchCustomer})
		cancel()
		if err == nil {
			t.Fatalf("order %d: succeeded with its answer dropped", k)
		}
	}
	srv.ClearFaults()
	unf, err := watch.List(ctx, keystore.Filter{States: []keystore.State{keystore.StatePending, keystore.StateUnknown}, Limit: 2 * n})
	if err != nil || len(unf) != n {
		t.Fatalf("setup: %d unfinished operations (%v), want %d", len(unf), err, n)
	}
	time.Sleep(100 * time.Millisecond) // past the fast policy's trust delay (nothing here races it)
	srv.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.FaultLatency, Delay: 20 * time.Millisecond})
	readsBefore := reads(srv)

	a, b := newClient(nil), newClient(nil)
	var wg sync.WaitGroup
	var ra, rb []pagpolar.ResumeResult
	var ea, eb error
	wg.Go(func() { ra, ea = a.ResumeAll(ctx) })
	wg.Go(func() { rb, eb = b.ResumeAll(ctx) })
	wg.Wait()
	if ea != nil || eb != nil {
		t.Fatalf("ResumeAll: %v / %v", ea, eb)
	}
	if o := watch.Overlaps.Load(); o != 0 {
		t.Errorf("TWO WORKERS ON ONE OPERATION: %d times an operation was taken while another client worked on it", o)
	}
	if got := reads(srv) - readsBefore; got != n {
		t.Errorf("%d lookups for %d operations, want exactly one each", got, n)
	}
	if watch.Max > 2*pagpolar.DefaultRetryPolicy.ResumeConcurrency {
		t.Errorf("%d operations worked at once by two clients, want ≤ %d", watch.Max, 2*pagpolar.DefaultRetryPolicy.ResumeConcurrency)
	}
	for _, r := range append(ra, rb...) {
		if r.Err != nil && !errors.Is(r.Err, pagpolar.ErrInProgress) {
			t.Errorf("%s: %s %v", r.OperationID, r.State, r.Err)
		}
	}
	left, err := watch.List(ctx, keystore.Filter{States: []keystore.State{keystore.StatePending, keystore.StateUnknown}, Limit: 2 * n})
	if err != nil || len(left) != 0 {
		t.Errorf("%d operations left unsettled (%v)", len(left), err)
	}
	t.Logf("client A reported %d, client B %d; most worked at once %d", len(ra), len(rb), watch.Max)
}
