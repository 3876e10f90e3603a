package apicheck

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// rtFunc is a RoundTripper from a function.
type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// runThrough runs the check against a fake (with a card token) through
// wrap(the default transport).
func runThrough(t *testing.T, srv *pagpolartest.Server, wrap func(http.RoundTripper) http.RoundTripper) *Report {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := Run(ctx, Config{BaseURL: srv.URL, CredentialID: srv.CredentialID, Token: pagpolar.StaticToken(srv.Token),
		OfferID: "offer-basic", PlanID: "plan-basic", OtherPlanID: "plan-pro", CardToken: "tok_ok", Policy: testPolicy(),
		HTTPClient: &http.Client{Transport: wrap(tr)}})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func replaceBody(req *http.Request, b []byte) {
	req.Body = io.NopCloser(bytes.NewReader(b))
	req.ContentLength = int64(len(b))
	req.Header.Set("Content-Length", strconv.Itoa(len(b)))
}

// HIGH-1: an API that ignores Idempotency-Key (here: every POST reaches the
// fake under a fresh key) charges twice for one operation. The check says
// so (idempotency.one-effect differs, exit 3) and refunds every card sale it
// made, or names it in the notes.
//
// With lie, the API also marks the answer to a repeated key as a replay
// (Idempotent-Replayed: true) while making a new effect: the new sale is
// still listed as created, and refunded.
func TestReview_DoubleCharge(t *testing.T) {
	for _, lie := range []bool{false, true} {
		t.Run(fmt.Sprintf("lie=%v", lie), func(t *testing.T) { doubleCharge(t, lie) })
	}
}

func doubleCharge(t *testing.T, lie bool) {
	srv := pagpolartest.NewServer(t, pagpolartest.WithProcessingWindow(testWindow))
	var n atomic.Int64
	var mu sync.Mutex
	seen := map[string]bool{}
	rep := runThrough(t, srv, func(base http.RoundTripper) http.RoundTripper {
		return rtFunc(func(req *http.Request) (*http.Response, error) {
			key := req.Header.Get(wire.HeaderIdempotencyKey)
			if req.Method != http.MethodPost || key == "" {
				return base.RoundTrip(req)
			}
			req = req.Clone(req.Context())
			req.Header.Set(wire.HeaderIdempotencyKey, fmt.Sprintf("%s-fresh-%d", key, n.Add(1)))
			resp, err := base.RoundTrip(req)
			mu.Lock()
			again := seen[key]
			seen[key] = true
			mu.Unlock()
			if err == nil && lie && again {
				resp.Header.Set(wire.HeaderReplayed, "true")
			}
			return resp, err
		})
	})
	created := map[string]bool{}
	for _, c := range rep.Created {
		created[c.ID] = true
	}
	it, _ := rep.Item("idempotency.one-effect")
	if it.Status != Differs || !strings.Contains(it.Observed, "more than once") || !it.EndsUnknown {
		t.Errorf("idempotency.one-effect: %+v", it)
	}
	if got := rep.ExitCode(); got != ExitUnknown {
		t.Errorf("exit %d, want %d (%s)", got, ExitUnknown, pathsOf(rep))
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "idempotency.one-effect: differs") || !strings.Contains(table.String(), "double charge") ||
		!strings.Contains(table.String(), "note: the API made one operation more than once") {
		t.Errorf("table:\n%s", table.String())
	}
	cards := 0
	for _, s := range srv.Ledger().Sales {
		if s.PaymentMethod != wire.MethodCreditCard {
			continue
		}
		cards++
		if !created[s.Identifier] {
			t.Errorf("card sale %s is not in Created", s.Identifier)
		}
		if s.RefundedAmount == s.Amount {
			continue
		}
		named := false
		for _, note := range rep.Notes {
			named = named || strings.Contains(note, s.Identifier)
		}
		if !named {
			t.Errorf("card sale %s: %d of %d refunded, and no note names it; notes %q", s.Identifier, s.RefundedAmount, s.Amount, rep.Notes)
		}
	}
	if cards < 2 {
		t.Errorf("%d card sales on the ledger: the transport did not make the fake charge twice", cards)
	}
}

// HIGH-1 (exit): a replay without its header, or with another body, is a
// path the SDK cannot keep safe: exit 3, not 1.
func TestReview_ReplayItemsExitUnknown(t *testing.T) {
	for _, id := range []string{"replay.header", "replay.body", "idempotency.one-effect"} {
		for _, st := range []Status{Differs, Absent} {
			rep := &Report{Items: []Item{{ID: id, Status: st}}}
			if got := rep.ExitCode(); got != ExitUnknown {
				t.Errorf("%s %s: exit %d, want %d", id, st, got, ExitUnknown)
			}
		}
	}
}

// MED-1: when the over-refund is accepted, the rest is not sent (it could
// refund what the over-refund already took), and a note says why.
func TestReview_RefundRestOnlyAfterRefusal(t *testing.T) {
	srv := pagpolartest.NewServer(t, pagpolartest.WithProcessingWindow(testWindow))
	var mu sync.Mutex
	over := int64(0) // the over-refund's amount, once seen
	var after []int64
	rep := runThrough(t, srv, func(base http.RoundTripper) http.RoundTripper {
		return rtFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, wire.RouteRefunds) {
				b, _ := io.ReadAll(req.Body)
				var body map[string]any
				_ = json.Unmarshal(b, &body)
				amount, _ := body["amount"].(float64)
				mu.Lock()
				switch {
				case over == 0 && amount > 1: // the over-refund: make the fake accept it (1 less)
					over = int64(amount)
					body["amount"] = amount - 1
					b, _ = json.Marshal(body)
				case over != 0 && int64(amount) != over:
					after = append(after, int64(amount))
				}
				mu.Unlock()
				req = req.Clone(req.Context())
				replaceBody(req, b)
			}
			return base.RoundTrip(req)
		})
	})
	mu.Lock()
	defer mu.Unlock()
	if over == 0 {
		t.Fatal("no over-refund was sent")
	}
	if len(after) > 0 {
		t.Errorf("refunds sent after the over-refund was accepted: %v centavos", after)
	}
	noted := false
	for _, n := range rep.Notes {
		noted = noted || strings.Contains(n, "was not refused") && strings.Contains(n, "no more refunds")
	}
	if !noted {
		t.Errorf("notes %q", rep.Notes)
	}
	if p := pathNamed(rep, "refund/refused"); p == nil || p.Outcome == OutcomeSettled {
		t.Errorf("refund/refused: %+v", p)
	}
	if rep.ExitCode() != ExitUnknown {
		t.Errorf("exit %d", rep.ExitCode())
	}
}

func pathNamed(rep *Report, name string) *Path {
	for _, p := range rep.Paths {
		if p.Name == name {
			return p
		}
	}
	return nil
}

func TestReview_OverRefused(t *testing.T) {
	x := func(status int) exchange {
		return exchange{step: "refund/over", method: http.MethodPost, status: status}
	}
	for _, c := range []struct {
		name    string
		xs      []exchange
		refused bool
	}{
		{"422", []exchange{x(422)}, true},
		{"409 then 400", []exchange{x(409), x(400)}, true},
		{"accepted", []exchange{x(201)}, false},
		{"no answer", []exchange{x(0)}, false},
		{"503 then 400", []exchange{x(503), x(400)}, false},
		{"only 429", []exchange{x(429)}, false},
		{"nothing sent", nil, false},
		{"other step's 201", []exchange{{step: "refund/rest", method: http.MethodPost, status: 201}, x(400)}, true},
	} {
		if why := overRefused(c.xs, "refund/over"); (why == "") != c.refused {
			t.Errorf("%s: %q, want refused %v", c.name, why, c.refused)
		}
	}
}

// MED-2: a gateway page echoing the token, the card token and the e-mail
// (in a 404 and in the keyless POST's 400) leaves none of them in the
// table, the JSON or the progress lines.
func TestReview_Redaction(t *testing.T) {
	srv := pagpolartest.NewServer(t, pagpolartest.WithProcessingWindow(testWindow))
	page := func(req *http.Request, status int) *http.Response {
		tok := strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ")
		body := fmt.Sprintf("<html>%d: token %s (json %q, url %s) card tok_ok for sdk-check@example.com, SDK-CHECK@EXAMPLE.COM, PagPolar SDK Check, CPF 12345678909, phone 11 98765-4321; "+
			"another.person@example.org %s</html>", status, tok, tok, url.QueryEscape(tok), strings.Repeat("x", 100)+tok)
		return &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {"text/html"}}, Body: io.NopCloser(strings.NewReader(body)), Request: req}
	}
	var lines []string
	var mu sync.Mutex
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	rep, err := Run(context.Background(), Config{BaseURL: srv.URL, CredentialID: srv.CredentialID, Token: pagpolar.StaticToken(srv.Token),
		OfferID: "offer-basic", PlanID: "plan-basic", OtherPlanID: "plan-pro", CardToken: "tok_ok", Policy: testPolicy(),
		Progress: func(l string) { mu.Lock(); lines = append(lines, l); mu.Unlock() },
		HTTPClient: &http.Client{Transport: rtFunc(func(req *http.Request) (*http.Response, error) {
			switch {
			case req.Method == http.MethodGet && strings.Contains(req.URL.Path, "no-such-sale"):
				return page(req, http.StatusNotFound), nil
			case req.Method == http.MethodPost && req.Header.Get(wire.HeaderIdempotencyKey) == "":
				return page(req, http.StatusBadRequest), nil
			}
			return tr.RoundTrip(req)
		})}})
	if err != nil {
		t.Fatal(err)
	}
	var js, table bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	progress := strings.Join(lines, "\n")
	mu.Unlock()
	it, _ := rep.Item("error.shape")
	if it.Status != Differs || !strings.Contains(it.Observed, "[redacted]") {
		t.Fatalf("error.shape %+v: the echo was not reported", it)
	}
	tokJSON, _ := json.Marshal(srv.Token)
	for name, out := range map[string]string{"json": js.String(), "table": table.String(), "progress": progress} {
		for _, secret := range []string{srv.Token, string(tokJSON[1 : len(tokJSON)-1]), url.QueryEscape(srv.Token), "tok_ok",
			"sdk-check@example.com", "SDK-CHECK@EXAMPLE.COM", "PagPolar SDK Check", "12345678909", "98765", "another.person@example.org"} {
			if strings.Contains(out, secret) {
				t.Errorf("%s holds %q", name, secret)
			}
		}
	}
}

func TestReview_Scrub(t *testing.T) {
	rd := newRedactor()
	rd.addSecret("abc")
	rd.addSecret("s3cr3t/Token+long")
	rd.addPrivate("Jo Customer")
	for in, want := range map[string]string{
		"abc":                                  "[redacted]",
		"token abc.":                           "token [redacted].",
		"abcdef tabc":                          "abcdef tabc", // a short token only as a whole value
		`{"t":"s3cr3t\/Token+long"}`:           `{"t":"[redacted]"}`,
		"t=s3cr3t%2FToken%2Blong":              "t=[redacted]",
		"JO CUSTOMER wrote":                    "[redacted] wrote",
		"mail a.b@c.io;":                       "mail [e-mail];",
		"amount 1234567, at 1764590000":        "amount 1234567, at 1764590000", // shape evidence stays
		"created_at 2026-12-01T12:00:00+03:00": "created_at 2026-12-01T12:00:00+03:00",
	} {
		if got := rd.scrub(in); got != want {
			t.Errorf("scrub(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"phone +55 11 98765-4321, card 4111 1111 1111 1111": "phone +[number], card [number]",
		"amount: 9990 exceeds the 9988 centavos left":       "amount: 9990 exceeds the 9988 centavos left",
	} {
		if got := scrubDigits(in); got != want {
			t.Errorf("scrubDigits(%q) = %q, want %q", in, got, want)
		}
	}
}

// MED-3: a base URL with user information or a query is refused, and the
// refusal does not print the secret.
func TestReview_BaseURLUserinfo(t *testing.T) {
	for _, base := range []string{"http://user:hunter2secret@127.0.0.1:1/v1", "http://127.0.0.1:1/v1?token=hunter2secret", "http://127.0.0.1:1/v1#hunter2secret"} {
		var sent atomic.Int64
		_, err := Run(context.Background(), Config{BaseURL: base, CredentialID: "c", Token: pagpolar.StaticToken("t"), OfferID: "o", PlanID: "p", OtherPlanID: "q",
			HTTPClient: &http.Client{Transport: rtFunc(func(*http.Request) (*http.Response, error) { sent.Add(1); return nil, io.EOF })}})
		if err == nil || strings.Contains(err.Error(), "hunter2secret") || !strings.Contains(err.Error(), "Config.BaseURL") {
			t.Errorf("%s: %v", base, err)
		}
		if sent.Load() != 0 {
			t.Errorf("%s: %d requests sent", base, sent.Load())
		}
	}
	u, _ := url.Parse("https://u:p@staging.example.com/v1?q=1#f")
	if got := displayURL(u); got != "https://staging.example.com/v1" {
		t.Errorf("displayURL = %q", got)
	}
}

// MED-4: an API that creates the sale and then answers 400 to a POST
// without a key: missing-key.400 differs and the sale is in Created.
func TestReview_KeylessCreated(t *testing.T) {
	srv := pagpolartest.NewServer(t, pagpolartest.WithProcessingWindow(testWindow))
	rep := runThrough(t, srv, func(base http.RoundTripper) http.RoundTripper {
		return rtFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method != http.MethodPost || req.Header.Get(wire.HeaderIdempotencyKey) != "" {
				return base.RoundTrip(req)
			}
			req = req.Clone(req.Context())
			req.Header.Set(wire.HeaderIdempotencyKey, "keyless-made-one")
			resp, err := base.RoundTrip(req)
			if err != nil {
				return nil, err
			}
			resp.Body.Close()
			b := `{"code":"missing_idempotency_key","message":"Idempotency-Key required"}`
			return &http.Response{StatusCode: http.StatusBadRequest, Header: http.Header{"Content-Type": {"application/json"}, "Date": {time.Now().UTC().Format(http.TimeFormat)}},
				Body: io.NopCloser(strings.NewReader(b)), Request: req}, nil
		})
	})
	var made string
	for _, s := range srv.Ledger().Sales {
		if s.ExternalReference == "pagpolar-check-"+rep.RunID+"-no-key" {
			made = s.Identifier
		}
	}
	if made == "" {
		t.Fatal("the transport did not make the fake create the keyless sale")
	}
	if it, _ := rep.Item("missing-key.400"); it.Status != Differs || !strings.Contains(it.Observed, made) {
		t.Errorf("missing-key.400: %+v", it)
	}
	found := false
	for _, c := range rep.Created {
		found = found || c.ID == made && c.Step == "missing-key"
	}
	if !found {
		t.Errorf("Created %+v does not list %s", rep.Created, made)
	}
}

// LOW-1: only DNS labels say staging/sandbox; IP literals count only if
// loopback; zones are refused; a trailing dot is still production.
func TestReview_IsProductionURL(t *testing.T) {
	for _, c := range []struct {
		url  string
		prod bool
		why  string
	}{
		{"http://[::ffff:192.0.2.2%25sandbox]:8080/v1", true, "zone"},
		{"http://[fe80::1%25staging]:8080/v1", true, "zone"},
		{"http://[::1%25lo]:8080/v1", true, "zone"},
		{"http://192.0.2.2:8080/v1", true, "not loopback"},
		{"http://10.0.0.5/v1", true, "not loopback"},
		{"http://[::ffff:127.0.0.1]:8080/v1", false, ""},
		{"http://127.0.0.1:8080/v1", false, ""},
		{"http://[::1]:8080/v1", false, ""},
		{"https://api.pagpolar.com./v1", true, "production host"},
		{"https://API.PAGPOLAR.COM./v1", true, "production host"},
		{"https://staging.api.pagpolar.com/v1", true, "production host"},
		{"https://api-staging.pagpolar.com/v1", false, ""},
		{"https://sandbox.example.com/v1", false, ""},
		{"https://staging2.example.com/v1", false, ""},
		{"https://payments.example.com/v1", true, "does not say"},
		{"https://notstaging.example.com/v1", true, "does not say"},
		{"https://localhost./v1", false, ""},
		{"https://u:secret@payments.example.com/v1", true, "does not say"},
		{"::", true, "not a URL"},
	} {
		got, why := IsProductionURL(c.url)
		if got != c.prod || !strings.Contains(why, c.why) || strings.Contains(why, "secret") {
			t.Errorf("IsProductionURL(%q) = %v, %q; want %v, %q", c.url, got, why, c.prod, c.why)
		}
	}
}

// LOW-3: the exit code is the strongest verdict: unknown (3) over an
// incomplete run (2) over not all confirmed (1); not exercised counts
// against 0 unless the item is optional.
func TestReview_ExitCodeOrder(t *testing.T) {
	settled := []*Path{{Name: "pix/replay", Outcome: OutcomeSettled}}
	unknown := []*Path{{Name: "pix/replay", Outcome: OutcomeUnknown}}
	conf := Item{ID: "sale.status", Status: Confirmed}
	for _, c := range []struct {
		name string
		rep  Report
		want int
	}{
		{"all confirmed", Report{Paths: settled, Items: []Item{conf}}, ExitConfirmed},
		{"optional not exercised", Report{Paths: settled, Items: []Item{conf, {ID: "webhooks", Status: NotExercised}, {ID: "in-progress.409", Status: NotExercised}}}, ExitConfirmed},
		{"not exercised", Report{Paths: settled, Items: []Item{conf, {ID: "refund.amount", Status: NotExercised}}}, ExitDiffers},
		{"differs", Report{Paths: settled, Items: []Item{{ID: "sale.status", Status: Differs}}}, ExitDiffers},
		{"no answer", Report{Paths: settled, NoAnswer: 1, Items: []Item{{ID: "sale.status", Status: Differs}}}, ExitUsage},
		{"unknown and no answer", Report{Paths: unknown, NoAnswer: 3, Items: []Item{conf}}, ExitUnknown},
		{"replay absent and no answer", Report{Paths: settled, NoAnswer: 1, Items: []Item{{ID: "replay.header", Status: Absent}}}, ExitUnknown},
	} {
		if got := c.rep.ExitCode(); got != c.want {
			t.Errorf("%s: exit %d, want %d", c.name, got, c.want)
		}
	}
}
