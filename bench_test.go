package pagpolar_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/internal/benchpair/cases"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// The SDK's overhead is measured against what a careful hand-written client
// does for the same charge (cases.Handwritten: the same params, headers and
// decoding), against the same in-process fake. Compare BenchmarkPix/sdk
// with BenchmarkPix/handwritten at the same parallelism. These sequential
// benchmarks are for profiling; the figures of BENCHMARKS.md come from the
// paired harness (go run ./internal/benchpair/cmd/benchpair), which runs the
// same clients in interleaved rounds.

var benchCustomer = cases.Customer

func benchTransport() *http.Client { return cases.Transport() }

func BenchmarkPix(b *testing.B) {
	for _, par := range []int{1, 64} {
		b.Run(fmt.Sprintf("handwritten/p%d", par), func(b *testing.B) {
			srv := pagpolartest.NewServer(b)
			h := &cases.Handwritten{HC: benchTransport(), URL: srv.URL, Token: srv.Token, Cred: srv.CredentialID}
			runParallel(b, par, func(ctx context.Context, ref string) error { _, err := h.Pix(ctx, ref); return err })
		})
		b.Run(fmt.Sprintf("sdk/p%d", par), func(b *testing.B) {
			srv := pagpolartest.NewServer(b)
			c, err := pagpolar.NewClient(srv.CredentialID, pagpolar.StaticToken(srv.Token), pagpolar.WithBaseURL(srv.URL), pagpolar.WithStore(keystore.NewMemory()),
				pagpolar.WithHTTPClient(benchTransport()), pagpolar.WithStore(keystore.NewMemory()))
			if err != nil {
				b.Fatal(err)
			}
			runParallel(b, par, func(ctx context.Context, ref string) error {
				_, err := c.Payments.Pix(ctx, pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: ref, Customer: benchCustomer})
				return err
			})
		})
	}
}

var benchSeq atomic.Int64

// runParallel runs fn b.N times with par concurrent callers, each call a new
// order (a fresh operation: the realistic hot path).
func runParallel(b *testing.B, par int, fn func(ctx context.Context, ref string) error) {
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	if par == 1 {
		for i := 0; i < b.N; i++ {
			if err := fn(ctx, fmt.Sprintf("bench-%d", benchSeq.Add(1))); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	b.SetParallelism((par + 1) / 2) // GOMAXPROCS=2 here: 2×32 = 64 goroutines
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := fn(ctx, fmt.Sprintf("bench-%d", benchSeq.Add(1))); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// fastBenchPolicy shortens waits so the behaviour benchmarks measure
// requests, not sleeping.
func fastBenchPolicy() pagpolar.RetryPolicy {
	return pagpolar.RetryPolicy{
		MaxRetryAfter: time.Millisecond, ProcessingWindow: 50 * time.Millisecond, WindowMargin: 5 * time.Millisecond,
		SettleDelay: 5 * time.Millisecond, LookupInterval: 5 * time.Millisecond,
		NewBackOff: func() pagpolar.BackOff { return &backoff.ConstantBackOff{Interval: time.Millisecond} },
	}
}

func posts(srv *pagpolartest.Server) int {
	n := 0
	for _, r := range srv.Ledger().Requests {
		if r.Method == http.MethodPost {
			n++
		}
	}
	return n
}

func reads(srv *pagpolartest.Server) int {
	n := 0
	for _, r := range srv.Ledger().Requests {
		if r.Method == http.MethodGet {
			n++
		}
	}
	return n
}

// BenchmarkRequestsPerOrder measures requests per PIX order while the API
// sheds a share p of requests with its own 503. The ideal, retrying until
// success, is 1/(1-p); the retry budget may refuse some retries at high p
// (reported as not-executed/order).
func BenchmarkRequestsPerOrder(b *testing.B) {
	for _, p := range []float64{0.10, 0.50} {
		b.Run(fmt.Sprintf("unavailable=%d%%", int(p*100)), func(b *testing.B) {
			srv := pagpolartest.NewServer(b, pagpolartest.WithProcessingWindow(50*time.Millisecond))
			srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultUnavailable, Probability: p, Delay: time.Millisecond})
			c, err := pagpolar.NewClient(srv.CredentialID, pagpolar.StaticToken(srv.Token), pagpolar.WithBaseURL(srv.URL), pagpolar.WithStore(keystore.NewMemory()),
				pagpolar.WithHTTPClient(benchTransport()), pagpolar.WithRetryPolicy(fastBenchPolicy()))
			if err != nil {
				b.Fatal(err)
			}
			notExecuted := 0
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_, err := c.Payments.Pix(context.Background(), pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: fmt.Sprintf("rpo-%d", benchSeq.Add(1)), Customer: benchCustomer})
				if err != nil {
					if errors.Is(err, pagpolar.ErrOutcomeUnknown) {
						b.Fatalf("503 must never end unknown: %v", err)
					}
					notExecuted++
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(posts(srv))/float64(b.N), "requests/order")
			b.ReportMetric(float64(reads(srv))/float64(b.N), "reads/order")
			b.ReportMetric(1/(1-p), "ideal-requests/order")
			b.ReportMetric(float64(notExecuted)/float64(b.N), "not-executed/order")
		})
	}
}

// BenchmarkOutage measures extra attempts per first attempt once the retry
// budget has drained during a full outage (every request shed). Goal: ≤ 0.10.
func BenchmarkOutage(b *testing.B) {
	srv := pagpolartest.NewServer(b)
	srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultUnavailable, Delay: time.Millisecond})
	c, err := pagpolar.NewClient(srv.CredentialID, pagpolar.StaticToken(srv.Token), pagpolar.WithBaseURL(srv.URL), pagpolar.WithStore(keystore.NewMemory()),
		pagpolar.WithHTTPClient(benchTransport()), pagpolar.WithRetryPolicy(fastBenchPolicy()))
	if err != nil {
		b.Fatal(err)
	}
	// Drain the budget first: the figure is about the steady outage.
	for i := 0; c.Budget().Tokens() >= 1; i++ {
		_, _ = c.Payments.Pix(context.Background(), pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: fmt.Sprintf("drain-%d", benchSeq.Add(1)), Customer: benchCustomer})
	}
	before := posts(srv)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, _ = c.Payments.Pix(context.Background(), pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: fmt.Sprintf("outage-%d", benchSeq.Add(1)), Customer: benchCustomer})
	}
	b.StopTimer()
	b.ReportMetric(float64(posts(srv)-before-b.N)/float64(b.N), "extra-attempts/order")
}
