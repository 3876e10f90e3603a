package pagpolar_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/google/uuid"
	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// The SDK's overhead is measured against what a careful hand-written client
// does for the same charge: marshal the same params, send the same headers,
// decode the same answer, against the same in-process fake. Compare
// BenchmarkPix/sdk with BenchmarkPix/handwritten at the same parallelism.

var benchCustomer = pagpolar.Customer{Name: "Maria Silva", Email: "maria@example.com", Document: "12345678909", Phone: "11912345678"}

func benchTransport() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}}
}

// handwritten is the baseline: one POST, no store, no retries.
type handwritten struct {
	hc    *http.Client
	url   string
	token string
	cred  string
}

var ns = uuid.MustParse("5d0c6f0e-9a43-4b7e-8f5e-2b7f3f6f0a11")

func (h *handwritten) pix(ctx context.Context, ref string) (*wire.Sale, error) {
	body, err := json.Marshal(wire.PixRequest{OfferIdentifier: "offer-basic", ExternalReference: ref, Customer: wire.Customer{
		Name: benchCustomer.Name, Email: benchCustomer.Email, Document: benchCustomer.Document, Phone: benchCustomer.Phone}})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url+wire.RoutePix, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "handwritten/1")
	req.Header.Set("Authorization", "Bearer "+h.token)
	req.Header.Set("Idempotency-Key", uuid.NewSHA1(ns, []byte(h.cred+"\x00pix:"+ref)).String())
	resp, err := h.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusCreated {
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	var s wire.Sale
	return &s, json.Unmarshal(b, &s)
}

func BenchmarkPix(b *testing.B) {
	for _, par := range []int{1, 64} {
		b.Run(fmt.Sprintf("handwritten/p%d", par), func(b *testing.B) {
			srv := pagpolartest.NewServer(b)
			h := &handwritten{hc: benchTransport(), url: srv.URL, token: srv.Token, cred: srv.CredentialID}
			runParallel(b, par, func(ctx context.Context, ref string) error { _, err := h.pix(ctx, ref); return err })
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
