// Redaction in the check's output: echoed tokens, card tokens and e-mails
// never reach the table, the JSON or the progress lines.

package apicheck

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// A gateway page echoing the token, the card token and the e-mail
// (in a 404 and in the keyless POST's 400) leaves none of them in the
// table, the JSON or the progress lines.
func TestCheck_EchoedSecretsLeaveNoTrace(t *testing.T) {
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

func TestRedactor_Scrub(t *testing.T) {
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
