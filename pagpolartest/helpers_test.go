package pagpolartest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// tclient is a plain net/http client for the fake. Every request goes on a
// fresh connection and its body cannot be rewound, so that Go's transport
// can never resend a POST on its own (SAFETY.md rule 2): each request the
// test makes reaches the server exactly once, which the tests check against
// the request log.
type tclient struct {
	t     testing.TB
	s     *Server
	hc    *http.Client
	token string

	mu   sync.Mutex
	sent int // requests handed to the transport
}

func newClient(t testing.TB, s *Server) *tclient {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &tclient{t: t, s: s, hc: &http.Client{Transport: tr}, token: s.Token}
}

// withToken returns a client of the same server sending another token.
func (c *tclient) withToken(tok string) *tclient {
	return &tclient{t: c.t, s: c.s, hc: c.hc, token: tok}
}

// resp is what the client saw: an answer or a transport error.
type resp struct {
	status int
	header http.Header
	body   []byte
	err    error
}

func (r resp) replayed() bool { return r.header.Get(wire.HeaderReplayed) == "true" }

// onlyReader hides the concrete type of a body so that net/http cannot set
// GetBody for it.
type onlyReader struct{ io.Reader }

// noKey as a key sends no Idempotency-Key header at all.
const noKey = "\x00none"

// do sends method path with body (if not empty) and key (noKey: no header).
func (c *tclient) do(method, path, key, body string) resp {
	return c.doCtx(context.Background(), method, path, key, body)
}

func (c *tclient) doCtx(ctx context.Context, method, path, key, body string) resp {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = onlyReader{strings.NewReader(body)}
	}
	req, err := http.NewRequestWithContext(ctx, method, c.s.URL+path, rd)
	if err != nil {
		c.t.Fatalf("NewRequest: %v", err)
	}
	req.GetBody = nil
	if body != "" {
		req.ContentLength = int64(len(body))
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set(wire.HeaderAuthorization, "Bearer "+c.token)
	}
	if key != noKey {
		req.Header[wire.HeaderIdempotencyKey] = []string{key}
	}
	c.mu.Lock()
	c.sent++
	c.mu.Unlock()
	res, err := c.hc.Do(req)
	if err != nil {
		return resp{err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return resp{status: res.StatusCode, header: res.Header, body: b, err: err}
}

func (c *tclient) pix(key, ref string) resp {
	return c.do("POST", wire.RoutePix, key, pixBody("offer-basic", ref))
}

func pixBody(offer, ref string) string {
	return string(mustJSON(wire.PixRequest{OfferIdentifier: offer, ExternalReference: ref,
		Customer: wire.Customer{Name: "Ana", Email: "ana@example.com", Document: "12345678909", Phone: "+5511999999999"}}))
}

func cardBody(offer, ref, token string) string {
	return string(mustJSON(wire.CreditCardRequest{OfferIdentifier: offer, ExternalReference: ref,
		Customer: wire.Customer{Name: "Ana", Email: "ana@example.com"}, Card: wire.Card{Token: token}}))
}

func subscribeBody(ref, method, cardToken string) string {
	r := wire.SubscribeRequest{ExternalReference: ref, PaymentMethod: method,
		Customer: wire.Customer{Name: "Ana", Email: "ana@example.com"}}
	if cardToken != "" {
		r.Card = &wire.Card{Token: cardToken}
	}
	return string(mustJSON(r))
}

func refundBody(saleID string, amount int64) string {
	return string(mustJSON(wire.RefundRequest{SaleIdentifier: saleID, Amount: amount}))
}

// want fails the test unless r is an answer with status.
func want(t testing.TB, r resp, status int) {
	t.Helper()
	if r.err != nil {
		t.Fatalf("want %d, got transport error %v", status, r.err)
	}
	if r.status != status {
		t.Fatalf("want %d, got %d %s", status, r.status, r.body)
	}
	if r.header.Get(wire.HeaderRequestID) == "" {
		t.Fatalf("answer %d without %s", r.status, wire.HeaderRequestID)
	}
}

// wantError fails unless r is status with the API's JSON error of code.
func wantError(t testing.TB, r resp, status int, code string) wire.Error {
	t.Helper()
	want(t, r, status)
	var e wire.Error
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("%d body is not a wire.Error: %v: %s", status, err, r.body)
	}
	if e.Code != code {
		t.Fatalf("want code %q, got %q (%s)", code, e.Code, e.Message)
	}
	return e
}

// wantDropped fails unless the client saw a transport error.
func wantDropped(t testing.TB, r resp) {
	t.Helper()
	if r.err == nil {
		t.Fatalf("want a transport error, got %d %s", r.status, r.body)
	}
}

func decode[T any](t testing.TB, r resp) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("decode %T: %v: %s", v, err, r.body)
	}
	return v
}

// salesByRef is GET /sales?external_reference=ref.
func (c *tclient) salesByRef(ref string) []wire.Sale {
	c.t.Helper()
	r := c.do("GET", wire.RouteSales+"?external_reference="+ref, noKey, "")
	want(c.t, r, 200)
	return decode[wire.List[wire.Sale]](c.t, r).Data
}

// async runs f on a goroutine and returns a channel with its answer.
func async(f func() resp) <-chan resp {
	ch := make(chan resp, 1)
	go func() { ch <- f() }()
	return ch
}

// waitHolds waits until n requests wait on the server's clock.
func waitHolds(t testing.TB, s *Server, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.WaitHolds(ctx, n); err != nil {
		t.Fatal(err)
	}
}

// checkLog fails unless the server logged exactly as many requests as the
// clients sent, and none of them panicked.
func checkLog(t testing.TB, s *Server, clients ...*tclient) {
	t.Helper()
	sent := 0
	for _, c := range clients {
		c.mu.Lock()
		sent += c.sent
		c.mu.Unlock()
	}
	reqs := s.Ledger().Requests
	if len(reqs) != sent {
		t.Errorf("server logged %d requests, clients sent %d", len(reqs), sent)
	}
	for _, r := range reqs {
		if r.Panic != "" {
			t.Errorf("request %s %s panicked: %s", r.Method, r.Path, r.Panic)
		}
	}
}
