package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// syncBuffer is a bytes.Buffer safe for the sim's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// startSim runs `pagpolar sim args...` until the test ends and returns the
// NAME=value lines it printed.
func startSim(t *testing.T, args ...string) (vars map[string]string, stderr *syncBuffer, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	stderr = &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		code := run(ctx, append([]string{"sim"}, args...), pw, stderr)
		pw.Close()
		done <- code
	}()
	vars = map[string]string{}
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		name, value, _ := strings.Cut(sc.Text(), "=")
		vars[name] = value
		if name == "PAGPOLAR_READY" {
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if vars["PAGPOLAR_READY"] != "1" {
		cancel()
		t.Fatalf("sim did not start: exit %d, stderr: %s", <-done, stderr.String())
	}
	var once sync.Once
	code := 0
	stop = func() int {
		once.Do(func() {
			cancel()
			code = <-done
		})
		return code
	}
	t.Cleanup(func() { stop() })
	return vars, stderr, stop
}

func post(t *testing.T, url, token, key, body string) (int, []byte, error) {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.GetBody = nil // the transport must not resend on its own
	req.Header.Set(wire.HeaderAuthorization, "Bearer "+token)
	req.Header.Set(wire.HeaderIdempotencyKey, key)
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	res, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

const simPix = `{"offer_identifier":"offer-basic","external_reference":"order-1","customer":{"name":"Ana","email":"ana@example.com","document":"","phone":""}}`

func TestSimServes(t *testing.T) {
	vars, stderr, stop := startSim(t, "-addr", "127.0.0.1:0", "-tokens", "2", "-credentials", "1", "-v")
	url := vars["PAGPOLAR_URL"]
	if vars["PAGPOLAR_BASE_URL"] != url || vars["PAGPOLAR_OFFERS"] == "" {
		t.Fatalf("sim must print PAGPOLAR_BASE_URL (= %q) and PAGPOLAR_OFFERS: %v", url, vars)
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/v1") || vars["PAGPOLAR_CREDENTIAL_ID"] == "" {
		t.Fatalf("printed %v", vars)
	}
	st, body, err := post(t, url+wire.RoutePix, vars["PAGPOLAR_TOKEN"], "k1", simPix)
	if err != nil || st != 201 {
		t.Fatalf("pix: %d %s %v", st, body, err)
	}
	// An extra token of the same credential shares the key: a replay.
	st, again, err := post(t, url+wire.RoutePix, vars["PAGPOLAR_TOKEN_2"], "k1", simPix)
	if err != nil || st != 201 || !bytes.Equal(again, body) {
		t.Fatalf("second token: %d %s %v", st, again, err)
	}
	// The extra credential does not.
	st, other, err := post(t, url+wire.RoutePix, vars["PAGPOLAR_CREDENTIAL_1_TOKEN"], "k1", simPix)
	if err != nil || st != 201 || bytes.Equal(other, body) {
		t.Fatalf("other credential: %d %s %v", st, other, err)
	}
	if code := stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if log := stderr.String(); strings.Count(log, "POST /v1/payments/pix") != 3 || !strings.Contains(log, "stopped") {
		t.Fatalf("stderr: %s", log)
	}
	if _, _, err := post(t, url+wire.RoutePix, vars["PAGPOLAR_TOKEN"], "k2", simPix); err == nil {
		t.Fatal("still serving after stop")
	}
}

// TestSimPrintsWhatTheExamplesRead: every variable the examples and the
// staging test read is one the sim prints, so that exporting the sim's
// output is enough to run them against it.
func TestSimPrintsWhatTheExamplesRead(t *testing.T) {
	vars, _, _ := startSim(t, "-addr", "127.0.0.1:0")
	read := map[string]bool{}
	for _, f := range []string{"../../examples/internal/exampleenv/env.go", "../../examples/staging/staging_test.go"} {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`"(PAGPOLAR_[A-Z_]+)"`).FindAllStringSubmatch(string(src), -1) {
			read[m[1]] = true
		}
	}
	if len(read) < 7 {
		t.Fatalf("found only %v in the examples' sources", read)
	}
	for name := range read {
		if vars[name] == "" {
			t.Errorf("the examples read %s, which the sim does not print (it prints %v)", name, vars)
		}
	}
}

func TestSimFaultFlags(t *testing.T) {
	vars, _, _ := startSim(t, "-addr", "127.0.0.1:0", "-unavailable", "1")
	for range 3 {
		st, body, err := post(t, vars["PAGPOLAR_URL"]+wire.RoutePix, vars["PAGPOLAR_TOKEN"], "k1", simPix)
		var e wire.Error
		if err != nil || st != 503 || json.Unmarshal(body, &e) != nil || e.Code != wire.CodeUnavailable {
			t.Fatalf("want the API's 503: %d %s %v", st, body, err)
		}
	}
}

func TestSimDropAfterCommit(t *testing.T) {
	vars, _, _ := startSim(t, "-addr", "127.0.0.1:0", "-drop-after-commit", "1")
	if _, _, err := post(t, vars["PAGPOLAR_URL"]+wire.RoutePix, vars["PAGPOLAR_TOKEN"], "k1", simPix); err == nil {
		t.Fatal("want a transport error")
	}
}

func TestSimRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-addr", "0.0.0.0:0"},
		{"-addr", ":0"},
		{"-addr", "192.0.2.1:0"},
		{"-addr", "nonsense"},
		{"-commit-500", "1.5"},
		{"-fault-rate", "2"},
		{"-unavailable", "0.6", "-gateway", "0.6"},
		{"-gateway-status", "500"},
		{"-processing-window", "0s"},
		{"extra"},
		{"-no-such-flag"},
	} {
		var out, errOut syncBuffer
		if code := run(context.Background(), append([]string{"sim"}, args...), &out, &errOut); code != 2 {
			t.Errorf("sim %v: exit %d, want 2 (stderr %s)", args, code, errOut.String())
		}
		if out.String() != "" {
			t.Errorf("sim %v printed %q", args, out.String())
		}
	}
}

func TestFaultRatesAreAbsolute(t *testing.T) {
	var errOut syncBuffer
	cfg, err := parseSimFlags([]string{"-fault-rate", "0.28", "-decline", "0"}, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	// 13 kinds share 0.28; the decline was set to 0 on its own.
	faults := cfg.faultsToInject()
	if len(faults) != 13 {
		t.Fatalf("%d faults injected, want 13", len(faults))
	}
	// The conditional coins of one stage reproduce the absolute rates:
	// P(fault i) = p_i * prod_{j<i} (1 - p_j) = 0.28/13.
	left := map[bool]float64{true: 1, false: 1}
	for _, f := range faults {
		front := isFront(f.Action)
		got := left[front] * f.Probability
		if math.Abs(got-0.28/13) > 1e-9 {
			t.Fatalf("%v applies to %.6f of the requests, want %.6f", f.Action, got, 0.28/13)
		}
		left[front] *= 1 - f.Probability
	}
}

// TestSimSeededFaultMix: a seeded mix through the real sim applies about
// the configured share of faults, and every one is logged.
func TestSimSeededFaultMix(t *testing.T) {
	cfg, err := parseSimFlags([]string{"-unavailable", "0.2", "-commit-500", "0.2", "-seed", "3"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	s := pagpolartest.NewServer(t, pagpolartest.WithSeed(cfg.seed))
	for _, f := range cfg.faultsToInject() {
		s.Inject(f)
	}
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	const n = 200
	for i := range n {
		req, _ := http.NewRequest("POST", s.URL+wire.RoutePix, strings.NewReader(simPix))
		req.GetBody = nil
		req.Header.Set(wire.HeaderAuthorization, "Bearer "+s.Token)
		req.Header.Set(wire.HeaderIdempotencyKey, "k"+strconv.Itoa(i))
		res, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	counts := map[string]int{}
	for _, r := range s.Ledger().Requests {
		counts[r.Fault]++
	}
	// 20% each, with a wide margin: the point is that both apply at their
	// rate, not the exact draw (which the seed fixes anyway).
	if u, c := counts["unavailable"], counts["commit_then_500"]; u < n/10 || u > 3*n/10 || c < n/10 || c > 3*n/10 {
		t.Fatalf("fault counts %v over %d requests", counts, n)
	}
}

func TestHelpAndUnknownCommand(t *testing.T) {
	var out, errOut syncBuffer
	if code := run(context.Background(), []string{"help"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "sim") {
		t.Fatalf("help: %d %q", code, out.String())
	}
	if code := run(context.Background(), []string{"nope"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "unknown command") {
		t.Fatalf("unknown: %d %q", code, errOut.String())
	}
	if code := run(context.Background(), nil, &out, &errOut); code != 2 {
		t.Fatalf("no command: %d", code)
	}
	if code := run(context.Background(), []string{"sim", "-h"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "-drop-after-commit") {
		t.Fatalf("sim -h: %d", code)
	}
}

// The sim answers in the shapes it is given (and refuses unknown ones).
func TestSimShapesFlag(t *testing.T) {
	cfg, err := parseSimFlags([]string{"-shapes", "method-hyphen,paged-cursor"}, io.Discard)
	if err != nil || len(cfg.shapes) != 2 {
		t.Fatalf("%+v %v", cfg, err)
	}
	if _, err := parseSimFlags([]string{"-shapes", "nope"}, io.Discard); err == nil {
		t.Fatal("an unknown shape was accepted")
	}
}

// TestSimDeliversWebhooks: with -webhook-url the sim posts each business
// event to that URL with the webhook token of PAGPOLAR_WEBHOOK_TOKEN (never
// a flag: it would show in ps), or with a fresh one it prints when unset.
func TestSimDeliversWebhooks(t *testing.T) {
	type delivery struct{ auth, event string }
	got := make(chan delivery, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var env wire.WebhookEnvelope
		_ = json.NewDecoder(r.Body).Decode(&env)
		got <- delivery{r.Header.Get(wire.HeaderAuthorization), env.Event}
	}))
	defer hook.Close()
	for _, c := range []struct{ env, want string }{{"whk_from_env", "whk_from_env"}, {"", ""}} {
		t.Setenv("PAGPOLAR_WEBHOOK_TOKEN", c.env)
		vars, stderr, stop := startSim(t, "-addr", "127.0.0.1:0", "-webhook-url", hook.URL+"/webhooks/pagpolar")
		want := c.want
		if c.env == "" {
			want = vars["PAGPOLAR_WEBHOOK_TOKEN"]
			if !strings.HasPrefix(want, "whk_") {
				t.Fatalf("no token in the environment: want a fresh one printed, got %v", vars)
			}
		} else if _, printed := vars["PAGPOLAR_WEBHOOK_TOKEN"]; printed {
			t.Fatal("the token from the environment was printed")
		}
		if st, body, err := post(t, vars["PAGPOLAR_URL"]+wire.RoutePix, vars["PAGPOLAR_TOKEN"], "k1", simPix); err != nil || st != 201 {
			t.Fatalf("pix: %d %s %v", st, body, err)
		}
		select {
		case d := <-got:
			if d.auth != "Bearer "+want || d.event != wire.EventTransactionCreated {
				t.Fatalf("delivery %+v, want TRANSACTION_CREATED with Bearer %s", d, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no webhook delivered")
		}
		if code := stop(); code != 0 {
			t.Fatalf("exit %d", code)
		}
		if !strings.Contains(stderr.String(), "webhook TRANSACTION_CREATED sale_") || strings.Contains(stderr.String(), want) {
			t.Errorf("stderr must log the delivery, never the token: %s", stderr.String())
		}
	}
	for _, bad := range []string{"localhost:3000/x", "ftp://h/x", "http://"} {
		if code := run(context.Background(), []string{"sim", "-webhook-url", bad}, &syncBuffer{}, &syncBuffer{}); code != 2 {
			t.Errorf("-webhook-url %q: exit %d, want 2", bad, code)
		}
	}
}
