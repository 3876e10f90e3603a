// Command stripe is the peer comparison of BENCHMARKS.md: a PaymentIntent
// create through stripe-go (v85, its defaults but for the URL and the HTTP
// client) against a hand-written net/http PaymentIntent create, both against
// the same tiny local fake, in the paired rounds of internal/benchpair. It
// is its own module, so that the SDK's go.mod never depends on stripe-go.
//
//	cd bench/stripe && go run . -rounds 15
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/stripe/stripe-go/v85"

	"github.com/pagpolar/pagpolar-go/internal/benchpair"
)

// fake answers POST /v1/payment_intents as the API does (form-encoded
// params; a PaymentIntent object in JSON), for any key.
func fake() *httptest.Server {
	var n atomic.Int64
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/payment_intents" || !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
			http.Error(w, `{"error":{"type":"invalid_request_error","message":"unexpected request"}}`, http.StatusBadRequest)
			return
		}
		if err := r.ParseForm(); err != nil {
			http.Error(w, `{"error":{"type":"invalid_request_error","message":"bad form"}}`, http.StatusBadRequest)
			return
		}
		amount, err := strconv.ParseInt(r.PostForm.Get("amount"), 10, 64)
		if err != nil || r.PostForm.Get("currency") == "" {
			http.Error(w, `{"error":{"type":"invalid_request_error","message":"amount and currency are required"}}`, http.StatusBadRequest)
			return
		}
		id := fmt.Sprintf("pi_%024d", n.Add(1))
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Request-Id", "req_"+id[3:])
		if k := r.Header.Get("Idempotency-Key"); k != "" {
			w.Header().Set("Idempotency-Key", k)
		}
		fmt.Fprintf(w, `{"id":%q,"object":"payment_intent","amount":%d,"amount_capturable":0,"amount_received":0,"capture_method":"automatic_async",`+
			`"client_secret":"%s_secret_abcdefghijklmnopqrstuvwxyz","confirmation_method":"automatic","created":1764590400,"currency":%q,`+
			`"livemode":false,"metadata":{},"payment_method_options":{"card":{"request_three_d_secure":"automatic"}},`+
			`"payment_method_types":["card"],"status":"requires_payment_method"}`, id, amount, id, r.PostForm.Get("currency"))
	}))
}

// paymentIntent is what the hand-written client reads of the answer.
type paymentIntent struct {
	ID           string `json:"id"`
	Amount       int64  `json:"amount"`
	Currency     string `json:"currency"`
	Status       string `json:"status"`
	ClientSecret string `json:"client_secret"`
}

func idempotencyKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// handwritten creates a PaymentIntent as a careful hand-written client
// does: the same form params, an idempotency key, the API version, one
// POST, the answer decoded.
func handwritten(ctx context.Context, hc *http.Client, base, key string) (*paymentIntent, error) {
	form := url.Values{"amount": {"2000"}, "currency": {"brl"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/payment_intents", strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Stripe-Version", stripe.APIVersion)
	req.Header.Set("Idempotency-Key", idempotencyKey())
	req.Header.Set("User-Agent", "handwritten/1")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	var pi paymentIntent
	if err := json.Unmarshal(b, &pi); err != nil {
		return nil, err
	}
	if pi.ID == "" {
		return nil, fmt.Errorf("no id in %s", b)
	}
	return &pi, nil
}

func transport() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}}
}

const key = "sk_test_benchpair"

func handwrittenCase() benchpair.Case {
	return benchpair.Case{Name: "handwritten", New: func(context.Context) (benchpair.Op, func(), error) {
		srv, hc := fake(), transport()
		return func(ctx context.Context, _ int64) error {
				_, err := handwritten(ctx, hc, srv.URL, key)
				return err
			}, func() {
				hc.CloseIdleConnections()
				srv.Close()
			}, nil
	}}
}

func stripeCase() benchpair.Case {
	return benchpair.Case{Name: "stripe-go", New: func(context.Context) (benchpair.Op, func(), error) {
		srv, hc := fake(), transport()
		sc := stripe.NewClient(key, stripe.WithBackends(stripe.NewBackendsWithConfig(&stripe.BackendConfig{
			URL: stripe.String(srv.URL), HTTPClient: hc, LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
		})))
		return func(ctx context.Context, _ int64) error {
				pi, err := sc.V1PaymentIntents.Create(ctx, &stripe.PaymentIntentCreateParams{Amount: stripe.Int64(2000), Currency: stripe.String("brl")})
				if err == nil && pi.ID == "" {
					err = fmt.Errorf("no id")
				}
				return err
			}, func() {
				hc.CloseIdleConnections()
				srv.Close()
			}, nil
	}}
}

func main() {
	rounds := flag.Int("rounds", 10, "rounds")
	ops := flag.Int("ops", 3000, "operations per case and round")
	pars := flag.String("p", "1,64", "parallelism levels")
	seed := flag.Int64("seed", 1, "shuffle seed")
	mdPath := flag.String("md", "", "also write the Markdown table to this file")
	flag.Parse()
	var md io.Writer = io.Discard
	if *mdPath != "" {
		f, err := os.Create(*mdPath)
		if err != nil {
			log.Fatal(err)
		}
		defer f.Close()
		md = f
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	cmdline := "cd bench/stripe && go run . " + strings.Join(os.Args[1:], " ")
	fmt.Fprintf(out, "goos: %s\ngoarch: %s\npkg: github.com/pagpolar/pagpolar-go/bench/stripe\n# %s\n# stripe-go v85 (API version %s), %s, GOMAXPROCS=%d, load average %v\n",
		runtime.GOOS, runtime.GOARCH, cmdline, stripe.APIVersion, runtime.Version(), runtime.GOMAXPROCS(0), benchpair.LoadAvg())
	fmt.Fprintf(md, "Command: `%s` (stripe-go v85.0.0, %s, GOMAXPROCS=%d; load average at the start %v).\n\n"+
		"| parallelism | hand-written µs/op (wall) | stripe-go µs/op (wall) | stripe-go ÷ hand-written, wall | CPU | allocs/op hand-written → stripe-go | load average (1 min) |\n| --- | --- | --- | --- | --- | --- | --- |\n",
		cmdline, runtime.Version(), runtime.GOMAXPROCS(0), benchpair.LoadAvg())
	for _, f := range strings.Split(*pars, ",") {
		p, err := strconv.Atoi(f)
		if err != nil || p < 1 {
			log.Fatalf("-p: %q", f)
		}
		cfg := benchpair.Config{Rounds: *rounds, Ops: *ops, Warmup: 200, Parallel: p, Seed: *seed}
		samples, err := benchpair.Run(context.Background(), cfg, []benchpair.Case{handwrittenCase(), stripeCase()})
		if err != nil {
			out.Flush()
			log.Fatal(err)
		}
		prefix := fmt.Sprintf("PaymentIntentCreate/p%d", p)
		benchpair.WriteBench(out, prefix, samples)
		benchpair.WriteRatios(out, prefix, "handwritten", samples)
		benchpair.WriteSummary(out, fmt.Sprintf("%s: %d rounds × %d ops per case", prefix, *rounds, *ops), "handwritten", samples)
		out.Flush()
		us := func(name string) string {
			return benchpair.Summarize(benchpair.Of(samples, name, func(s benchpair.Sample) float64 { return benchpair.WallPerOp(s) / 1e3 })).Fmt("%.1f")
		}
		fmt.Fprintf(md, "| p%d (%d rounds × %d ops) | %s | %s | **%s** | **%s** | %.0f → %.0f | %s |\n", p, *rounds, *ops, us("handwritten"), us("stripe-go"),
			benchpair.Summarize(benchpair.PerRound(samples, "stripe-go", "handwritten", benchpair.WallPerOp)).FmtIQR("%.2f×"),
			benchpair.Summarize(benchpair.PerRound(samples, "stripe-go", "handwritten", benchpair.CPUPerOp)).FmtIQR("%.2f×"),
			benchpair.Median(benchpair.Of(samples, "handwritten", benchpair.AllocsPerOp)), benchpair.Median(benchpair.Of(samples, "stripe-go", benchpair.AllocsPerOp)),
			benchpair.Summarize(benchpair.All(samples, benchpair.Load1)).Fmt("%.1f"))
	}
	fmt.Fprintln(md)
}
