package pagpolar_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// BenchmarkResumeAll1000 measures recovery: ResumeAll
// settling 1,000 operations left unknown by answers lost after the commit,
// against a fake with 20 ms of latency per request. Goal: ≤ 1 s per 1,000.
// Each op/iteration is one ResumeAll over 1,000 records.
func BenchmarkResumeAll1000(b *testing.B) {
	const n = 1000
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		srv := pagpolartest.NewServer(b, pagpolartest.WithProcessingWindow(50*time.Millisecond))
		store := keystore.NewMemory()
		pol := fastBenchPolicy()
		pol.ResumeConcurrency = 0 // the default
		c, err := pagpolar.NewClient(srv.CredentialID, pagpolar.StaticToken(srv.Token), pagpolar.WithBaseURL(srv.URL),
			pagpolar.WithStore(store), pagpolar.WithHTTPClient(benchTransport()), pagpolar.WithRetryPolicy(pol))
		if err != nil {
			b.Fatal(err)
		}
		// Leave n operations unknown: the sale is made, the answer lost, and
		// the caller gives up at once.
		if _, err := c.Payments.Pix(context.Background(), pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: fmt.Sprintf("warm-%d", i), Customer: benchCustomer}); err != nil {
			b.Fatal(err) // a first success validates the client's view of the API's clock
		}
		srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThenDrop})
		srv.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.Fault500NoCommit})
		for k := range n {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
			_, _ = c.Payments.Pix(ctx, pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: fmt.Sprintf("r%d-%d", i, k), Customer: benchCustomer})
			cancel()
		}
		srv.ClearFaults()
		time.Sleep(100 * time.Millisecond) // past the trust delay of the fast policy
		srv.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.FaultLatency, Delay: 20 * time.Millisecond})
		b.StartTimer()
		start := time.Now()
		rs, err := c.ResumeAll(context.Background())
		el := time.Since(start)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		settled := 0
		for _, r := range rs {
			if r.State == keystore.StateSucceeded {
				settled++
			}
		}
		if settled < n {
			b.Fatalf("%d of %d settled", settled, n)
		}
		b.ReportMetric(el.Seconds(), "s/1000ops")
		srv.Close()
	}
}
