// Tests of answers and faults no earlier test covers (the "unseen" review):
// each drives the SDK against the fake behind a proxy that answers in a
// shape or with a clock the fake does not have, and checks the ledger: no
// two effects for one operation, no failure or "not executed" while the
// effect exists, no success without one, no failure concluded from a
// guess.

package pagpolar

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// unseenClient is a client of f's credential, with f's store, talking to
// base.
func unseenClient(t *testing.T, f *fixture, base string) *Client {
	t.Helper()
	return f.client(t, WithStore(f.store), WithBaseURL(base))
}

// The API's Date header jumps an hour ahead (its front servers' clock is
// stepped, a new load balancer writes its own) after the client validated
// its view of the API's clock, while creation times keep the database's
// clock. Reads move the estimator's median before any fresh charge answer
// can switch it off; the next charge's first send is placed an hour late
// on the API's clock, and its own sale, found by the lookup after a lost
// answer, must not be excluded as "created before the first send".
func TestUnseen_DateClockStepsAhead(t *testing.T) {
	f := newFixture(t, nil)
	var jump atomic.Bool
	base := advProxy(t, f, func(r *http.Request, status int, h http.Header, body []byte) []byte {
		if jump.Load() {
			if d, err := http.ParseTime(h.Get("Date")); err == nil {
				h.Set("Date", d.Add(time.Hour).UTC().Format(http.TimeFormat))
			}
		}
		return body
	})
	c := unseenClient(t, f, base)
	if _, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "warm-step", Customer: goodCustomer}); err != nil {
		t.Fatalf("warm-up charge: %v", err)
	}
	if !c.srvClock.usable() {
		t.Fatal("setup: the warm-up charge did not validate the client's view of the API's clock")
	}
	jump.Store(true)
	for range sampleCount {
		if _, err := c.Payments.SalesByExternalReference(f.ctx, "someone-else"); err != nil {
			t.Fatalf("read: %v", err)
		}
	}
	f.srv.Inject(pagpolartest.Fault{Route: "pix", ExternalReference: "order-step", Action: pagpolartest.FaultCommitDropRelease, Times: 1})
	ch, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-step", Customer: goodCustomer})
	id := ""
	if err == nil {
		id = ch.Sale.ID
	}
	report(t, f, c, "pix:order-step", id, err)
}

// The API writes creation times three hours ahead of its Date headers (a
// UTC wall clock labelled with São Paulo's offset the wrong way round), or
// its Date headers run three hours behind its database's clock. A
// declined try of an order, half a second before the retry, then looks
// created after the retry's first send; the retry is never processed (a
// gateway's 502 in front of the API), so the only sale a lookup finds is
// the earlier decline. The retry must not be reported declined on that
// guess: it was never tried.
func TestUnseen_CreatedAtAheadOfDate(t *testing.T) {
	shift := map[string]advRewrite{
		"created-3h-ahead": func(r *http.Request, status int, h http.Header, body []byte) []byte {
			return editObjects(body, func(m map[string]any) {
				if s, ok := m["created_at"].(string); ok {
					if ts, err := time.Parse(time.RFC3339Nano, s); err == nil {
						m["created_at"] = ts.Add(3 * time.Hour).Format(time.RFC3339Nano)
					}
				}
			})
		},
		"date-3h-behind": func(r *http.Request, status int, h http.Header, body []byte) []byte {
			if d, err := http.ParseTime(h.Get("Date")); err == nil {
				h.Set("Date", d.Add(-3*time.Hour).UTC().Format(http.TimeFormat))
			}
			return body
		},
	}
	for name, rw := range shift {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			c := unseenClient(t, f, advProxy(t, f, rw))
			if _, err := c.Payments.CreditCard(f.ctx, CreditCardParams{OfferID: "offer-basic", ExternalReference: "warm-ahead", Customer: goodCustomer, CardToken: "tok_w"}); err != nil {
				t.Fatalf("warm-up charge: %v", err)
			}
			p := CreditCardParams{OfferID: "offer-basic", ExternalReference: "order-ahead", Customer: goodCustomer, CardToken: "tok_a", OperationID: "order-ahead-try-1"}
			f.srv.Inject(pagpolartest.Fault{Route: "credit_card", ExternalReference: "order-ahead", Action: pagpolartest.FaultDecline, Times: 1})
			if _, err := c.Payments.CreditCard(f.ctx, p); !errors.Is(err, ErrDeclined) {
				t.Fatalf("try 1: %v, want declined", err)
			}
			f.srv.Clock.Advance(500 * time.Millisecond)
			f.srv.Inject(pagpolartest.Fault{Route: "credit_card", ExternalReference: "order-ahead", Action: pagpolartest.FaultGateway, Status: 502, Times: 1})
			p.CardToken, p.OperationID = "tok_b", "order-ahead-try-2"
			ch, err := c.Payments.CreditCard(f.ctx, p)
			id := ""
			if err == nil {
				id = ch.Sale.ID
			}
			if errors.Is(err, ErrDeclined) {
				t.Errorf("FAILED FROM A GUESS: try 2 reported declined (%v), but it was never processed: the decline is try 1's", err)
			}
			report(t, f, c, "order-ahead-try-2", id, err)
		})
	}
}

// unseenRewrite edits one answer of the fake: its status and headers in
// resp (modifiable), its body returned.
type unseenRewrite func(req *http.Request, resp *http.Response, body []byte) []byte

// unseenProxy is advProxy with the status modifiable too.
func unseenProxy(t *testing.T, f *fixture, rw unseenRewrite) string {
	t.Helper()
	u, _ := url.Parse(f.srv.URL)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0)
	rp.ModifyResponse = func(resp *http.Response) error {
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		b = rw(resp.Request, resp, b)
		resp.Body = io.NopCloser(bytes.NewReader(b))
		resp.ContentLength = int64(len(b))
		resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
		return nil
	}
	ps := httptest.NewServer(rp)
	t.Cleanup(ps.Close)
	return ps.URL
}

func isPost(r *http.Request, suffix string) bool {
	return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, suffix)
}

// listItems returns the items of the fake's {"data": [...]} list answer.
func listItems(body []byte) ([]json.RawMessage, bool) {
	var l struct {
		Data []json.RawMessage `json:"data"`
	}
	if json.Unmarshal(body, &l) != nil || l.Data == nil {
		return nil, false
	}
	return l.Data, true
}

// onSales rewrites the sale list answers (GET /sales) with fn.
func onSales(fn func(items []json.RawMessage, resp *http.Response) []byte) unseenRewrite {
	return func(req *http.Request, resp *http.Response, body []byte) []byte {
		if !isGet(req, "/sales") || resp.StatusCode != 200 {
			return body
		}
		items, ok := listItems(body)
		if !ok {
			return body
		}
		return fn(items, resp)
	}
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// editSales applies fn to every sale object of POST /payments/pix answers
// and of GET /sales lists.
func editSales(fn func(m map[string]any)) unseenRewrite {
	return func(req *http.Request, resp *http.Response, body []byte) []byte {
		if isPost(req, "/payments/pix") && resp.StatusCode < 300 || isGet(req, "/sales") && resp.StatusCode == 200 {
			return editObjects(body, fn)
		}
		return body
	}
}

// onPixAnswer rewrites the 2xx answers of POST /payments/pix.
func onPixAnswer(fn func(resp *http.Response, body []byte) []byte) unseenRewrite {
	return func(req *http.Request, resp *http.Response, body []byte) []byte {
		if !isPost(req, "/payments/pix") || resp.StatusCode >= 300 {
			return body
		}
		return fn(resp, body)
	}
}

// Shapes of answers nobody documented, each driven through a PIX charge,
// cold (a pre-send snapshot) and warm (none), with no fault (the 2xx is
// checked) and with faults that commit, release the key and lose the
// answer (so any resend on a guess creates a second sale).
func TestUnseen_Shapes(t *testing.T) {
	cases := []struct {
		name string
		rw   unseenRewrite
	}{
		// 2xx answers to the charge.
		{"202-processing", onPixAnswer(func(resp *http.Response, b []byte) []byte {
			resp.StatusCode = http.StatusAccepted
			return editObjects(b, func(m map[string]any) { m["status"] = "processing" })
		})},
		{"200-empty-object", onPixAnswer(func(resp *http.Response, b []byte) []byte { resp.StatusCode = 200; return []byte("{}") })},
		{"204-no-content", onPixAnswer(func(resp *http.Response, b []byte) []byte { resp.StatusCode = 204; return nil })},
		{"201-location-only", onPixAnswer(func(resp *http.Response, b []byte) []byte {
			var s struct{ Identifier string }
			_ = json.Unmarshal(b, &s)
			resp.Header.Set("Location", "/sales/"+s.Identifier)
			return nil
		})},
		{"200-html", onPixAnswer(func(resp *http.Response, b []byte) []byte {
			resp.StatusCode = 200
			resp.Header.Set("Content-Type", "text/html")
			return []byte("<html><body>OK</body></html>")
		})},
		{"wrapped-in-data", onPixAnswer(func(resp *http.Response, b []byte) []byte { return mustMarshal(map[string]json.RawMessage{"data": b}) })},
		{"303-after-commit", onPixAnswer(func(resp *http.Response, b []byte) []byte {
			resp.StatusCode = http.StatusSeeOther
			resp.Header.Set("Location", "/sales?external_reference=x")
			return nil
		})},
		{"huge-answer", onPixAnswer(func(resp *http.Response, b []byte) []byte {
			return editObjects(b, func(m map[string]any) { m["receipt_pdf"] = strings.Repeat("A", 5<<20) })
		})},
		// Statuses in another language or case, in the answer and the lists.
		{"status-PAGO", editSales(func(m map[string]any) { m["status"] = "PAGO" })},
		{"status-pendente", editSales(func(m map[string]any) { m["status"] = "pendente" })},
		{"status-Aprovado", editSales(func(m map[string]any) { m["status"] = "Aprovado" })},
		{"status-SUCCEEDED", editSales(func(m map[string]any) { m["status"] = "SUCCEEDED" })},
		// Times and identifiers in other forms.
		{"created-epoch-millis", editSales(func(m map[string]any) {
			if s, ok := m["created_at"].(string); ok {
				if ts, err := time.Parse(time.RFC3339Nano, s); err == nil {
					m["created_at"] = ts.UnixMilli()
				}
			}
		})},
		{"created-without-zone", editSales(func(m map[string]any) {
			if s, ok := m["created_at"].(string); ok {
				if ts, err := time.Parse(time.RFC3339Nano, s); err == nil {
					m["created_at"] = ts.Format("2006-01-02 15:04:05")
				}
			}
		})},
		{"amount-object", editSales(func(m map[string]any) { m["amount"] = map[string]any{"value": m["amount"], "currency": "BRL"} })},
		// Lists wrapped or paged otherwise.
		{"list-data-items", onSales(func(items []json.RawMessage, _ *http.Response) []byte {
			return mustMarshal(map[string]any{"data": map[string]any{"items": items}})
		})},
		{"list-bare-array", onSales(func(items []json.RawMessage, _ *http.Response) []byte { return mustMarshal(items) })},
		{"list-has-more-no-cursor", onSales(func(items []json.RawMessage, _ *http.Response) []byte {
			return mustMarshal(map[string]any{"results": items, "next": nil, "has_more": true})
		})},
		{"list-total-mismatch", onSales(func(items []json.RawMessage, _ *http.Response) []byte {
			return mustMarshal(map[string]any{"data": items, "total": len(items) + 1})
		})},
		{"list-filter-ignored", onSales(func(items []json.RawMessage, _ *http.Response) []byte {
			other := json.RawMessage(`{"identifier":"sale_other","status":"paid","external_reference":"someone-else","payment_method":"pix","amount":4990,"offer_identifier":"offer-basic","created_at":"2020-01-01T00:00:00Z"}`)
			return mustMarshal(map[string]any{"data": append([]json.RawMessage{other}, items...)})
		})},
		{"list-404-when-empty", onSales(func(items []json.RawMessage, resp *http.Response) []byte {
			if len(items) > 0 {
				return mustMarshal(map[string]any{"data": items})
			}
			resp.StatusCode = http.StatusNotFound
			return []byte(`{"code":"not_found","message":"Nenhuma venda encontrada"}`)
		})},
		{"list-null-when-empty", onSales(func(items []json.RawMessage, _ *http.Response) []byte {
			if len(items) > 0 {
				return mustMarshal(map[string]any{"data": items})
			}
			return []byte(`{"data":null}`)
		})},
		{"list-next-repeats-page", onSales(func(items []json.RawMessage, resp *http.Response) []byte {
			return mustMarshal(map[string]any{"data": items, "links": map[string]any{"next": "/v1/sales?external_reference=x&page=2"}})
		})},
		{"list-huge", onSales(func(items []json.RawMessage, _ *http.Response) []byte {
			return mustMarshal(map[string]any{"data": items, "debug": strings.Repeat("x", 5<<20)})
		})},
	}
	faults := []struct {
		name  string
		fault *pagpolartest.Fault
	}{
		{"none", nil},
		{"CommitDropRelease", &pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitDropRelease, Times: 1}},
		{"Gateway504AfterCommit", &pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultGatewayAfterCommit, Status: 504, Times: 1}},
		{"CommitThen500", &pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThen500, Times: 1}},
	}
	n := 0
	for _, tc := range cases {
		for _, fc := range faults {
			n++
			for _, warm := range coldOrWarm(n) {
				t.Run(fmt.Sprintf("%s/%s/warm=%v", tc.name, fc.name, warm), func(t *testing.T) {
					t.Parallel()
					f := newFixture(t, nil)
					c := unseenClient(t, f, unseenProxy(t, f, tc.rw))
					if warm {
						warmClock(f, c)
					}
					if fc.fault != nil {
						f.srv.Inject(*fc.fault)
					}
					ch, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-unseen", Customer: goodCustomer})
					id := ""
					if err == nil {
						id = ch.Sale.ID
					}
					report(t, f, c, "pix:order-unseen", id, err)
				})
			}
		}
	}
}

// A server that answers a finished key's repeat with a 4xx instead of the
// documented replay ("Idempotency-Key já utilizada"). Host A charged the
// operation; host B, with a store of its own, derives the same key and
// sends it: its effect exists (A's), so B must not report the operation
// failed or not executed.
func TestUnseen_KeyReuseAnswered4xx(t *testing.T) {
	answers := []struct {
		name   string
		status int
		body   string
	}{
		{"422-own-code", 422, `{"code":"unprocessable_entity","message":"Idempotency-Key já utilizada"}`},
		{"400-own-code", 400, `{"code":"validation_error","message":"Idempotency-Key already used"}`},
		{"400-other-code", 400, `{"code":"idempotency_key_reused","message":"Idempotency key reused"}`},
		{"409-other-message", 409, `{"error":{"message":"Idempotency key already used"}}`},
	}
	for _, a := range answers {
		for _, warm := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/warm=%v", a.name, warm), func(t *testing.T) {
				t.Parallel()
				f := newFixture(t, nil)
				p := PixParams{OfferID: "offer-basic", ExternalReference: "order-two-hosts", Customer: goodCustomer}
				if _, err := f.c.Payments.Pix(f.ctx, p); err != nil {
					t.Fatalf("host A: %v", err)
				}
				f.srv.Clock.Advance(5 * time.Second)
				base := unseenProxy(t, f, func(req *http.Request, resp *http.Response, body []byte) []byte {
					if resp.Header.Get("Idempotency-Replayed") != "true" {
						return body
					}
					resp.Header.Del("Idempotency-Replayed")
					resp.StatusCode = a.status
					resp.Header.Set("Content-Type", "application/json")
					return []byte(a.body)
				})
				b := f.client(t, WithBaseURL(base)) // its own store
				if warm {
					warmClock(f, b)
				}
				ch, err := b.Payments.Pix(f.ctx, p)
				id := ""
				if err == nil {
					id = ch.Sale.ID
				}
				for _, pr := range ledgerCheckStore(f, b, "pix:order-two-hosts", id, err) {
					t.Error(pr)
				}
				t.Logf("host B: id=%q err=%v; POSTs %d", id, err, f.posts("pix"))
			})
		}
	}
}

// ledgerCheckStore is ledgerCheck for a client with a store of its own.
func ledgerCheckStore(f *fixture, c *Client, opID, id string, err error) []string {
	g := *f
	if m, ok := c.Store().(*keystore.Memory); ok {
		g.store = m
	}
	return ledgerCheck(&g, c, opID, id, err)
}

// An API that sends no Date header, and an operation sent by two hosts
// with stores of their own (one key, derived). A's request commits and
// stays in processing; B's snapshot already lists A's sale, B's send gets
// the documented 409, and A's request then ends in a 500 that releases the
// key. Without a clock reference for the 409, B must still not take the
// snapshot as proof that A's sale is another operation's: a trusted
// not-found would resend the released key and charge twice.
func TestUnseen_SharedKeyWithoutDate(t *testing.T) {
	f := newFixture(t, []pagpolartest.Option{pagpolartest.WithShapes(pagpolartest.ShapeNoDate)})
	p := PixParams{OfferID: "offer-basic", ExternalReference: "order-nodate", Customer: goodCustomer}
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThen500After, Delay: 250 * time.Millisecond, Times: 1})
	type out struct {
		id  string
		err error
	}
	aDone := make(chan out, 1)
	go func() {
		ch, err := f.c.Payments.Pix(f.ctx, p)
		if err != nil {
			aDone <- out{"", err}
			return
		}
		aDone <- out{ch.Sale.ID, nil}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for f.successful("sale") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("host A's sale never committed")
		}
		time.Sleep(time.Millisecond)
	}
	b := f.client(t) // its own store, cold
	ch, err := b.Payments.Pix(f.ctx, p)
	bID := ""
	if err == nil {
		bID = ch.Sale.ID
	}
	a := <-aDone
	t.Logf("host A: %q %v; host B: %q %v; POSTs %d", a.id, a.err, bID, err, f.posts("pix"))
	saw409 := false
	for _, r := range f.srv.Ledger().Requests {
		saw409 = saw409 || r.Method == http.MethodPost && r.Status == http.StatusConflict
	}
	if !saw409 {
		t.Fatal("setup: host B's send was not answered 409 (it came after host A's request ended)")
	}
	if n := f.successful("sale"); n != 1 {
		t.Errorf("DOUBLE: %d sales for one operation", n)
	}
	for _, pr := range ledgerCheckStore(f, b, "pix:order-nodate", bID, err) {
		t.Error("host B: " + pr)
	}
}

// Answers cut or encoded in ways a real network produces, to a charge the
// fake committed: the SDK must settle by lookup (one sale), never resend on
// a guess, never report failure.
func TestUnseen_TransportShapes(t *testing.T) {
	cases := []struct {
		name  string
		serve func(w http.ResponseWriter, status int, h http.Header, body []byte)
	}{
		{"half-body-content-length", func(w http.ResponseWriter, status int, h http.Header, body []byte) {
			maps.Copy(w.Header(), h)
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.WriteHeader(status)
			_, _ = w.Write(body[:len(body)/2])
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}},
		{"half-body-chunked", func(w http.ResponseWriter, status int, h http.Header, body []byte) {
			maps.Copy(w.Header(), h)
			w.Header().Del("Content-Length")
			w.WriteHeader(status)
			_, _ = w.Write(body[:len(body)/2])
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}},
		{"headers-then-reset", func(w http.ResponseWriter, status int, h http.Header, body []byte) {
			maps.Copy(w.Header(), h)
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.WriteHeader(status)
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}},
		{"close-delimited-half-body", func(w http.ResponseWriter, status int, h http.Header, body []byte) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				panic(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nDate: %s\r\nConnection: close\r\n\r\n", status, http.StatusText(status), h.Get("Date"))
			_, _ = conn.Write(body[:len(body)/2])
		}},
		{"gzip-body", func(w http.ResponseWriter, status int, h http.Header, body []byte) {
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			_, _ = zw.Write(body)
			_ = zw.Close()
			maps.Copy(w.Header(), h)
			w.Header().Set("Content-Encoding", "gzip")
			w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
			w.WriteHeader(status)
			_, _ = w.Write(buf.Bytes())
		}},
		{"brotli-labelled-garbage", func(w http.ResponseWriter, status int, h http.Header, body []byte) {
			maps.Copy(w.Header(), h)
			w.Header().Set("Content-Encoding", "br")
			w.Header().Set("Content-Length", "16")
			w.WriteHeader(status)
			_, _ = w.Write([]byte("\x1b\x0f\x00\xf8\xa5\x40\x62\x8c\x2d\x9b\x00\x01\x02\x03\x04\x05"))
		}},
	}
	faults := []struct {
		name  string
		fault *pagpolartest.Fault
	}{
		{"201", nil},
		{"CommitThen500", &pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThen500, Times: 1}},
	}
	for _, tc := range cases {
		for _, fc := range faults {
			t.Run(tc.name+"/"+fc.name, func(t *testing.T) {
				t.Parallel()
				f := newFixture(t, nil)
				u, _ := url.Parse(f.srv.URL)
				rp := httputil.NewSingleHostReverseProxy(u)
				rp.ErrorLog = log.New(io.Discard, "", 0)
				gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if !isPost(r, "/payments/pix") {
						rp.ServeHTTP(w, r)
						return
					}
					body, _ := io.ReadAll(r.Body)
					out, _ := http.NewRequest(http.MethodPost, f.srv.URL+r.URL.Path, bytes.NewReader(body))
					out.Header = r.Header.Clone()
					out.Header.Del("Accept-Encoding")
					resp, err := http.DefaultTransport.RoundTrip(out)
					if err != nil {
						panic(http.ErrAbortHandler)
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					tc.serve(w, resp.StatusCode, resp.Header, b)
				}))
				gw.Config.ErrorLog = log.New(io.Discard, "", 0)
				t.Cleanup(gw.Close)
				c := unseenClient(t, f, gw.URL)
				if fc.fault != nil {
					f.srv.Inject(*fc.fault)
				}
				ch, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-wire", Customer: goodCustomer})
				id := ""
				if err == nil {
					id = ch.Sale.ID
				}
				report(t, f, c, "pix:order-wire", id, err)
			})
		}
	}
}

// Retry-After in forms a server or gateway may send on a 429: negative,
// huge, an HTTP date long past or far ahead, garbage. The charge must go
// through once, within the policy's bounds.
func TestUnseen_RetryAfterForms(t *testing.T) {
	for _, ra := range []string{"-5", "99999999999", "Wed, 21 Oct 2015 07:28:00 GMT", "Fri, 01 Jan 2100 00:00:00 GMT", "soon", "1.5"} {
		t.Run(ra, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			base := unseenProxy(t, f, func(req *http.Request, resp *http.Response, body []byte) []byte {
				if resp.StatusCode == http.StatusTooManyRequests {
					resp.Header.Set("Retry-After", ra)
				}
				return body
			})
			c := unseenClient(t, f, base)
			f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultRateLimit, Times: 2})
			start := time.Now()
			ch, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-ra", Customer: goodCustomer})
			id := ""
			if err == nil {
				id = ch.Sale.ID
			}
			if err != nil {
				t.Errorf("not charged after two 429s: %v", err)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("took %s: Retry-After %q was not clamped", d, ra)
			}
			report(t, f, c, "pix:order-ra", id, err)
		})
	}
}

// A refund object whose "amount" is the refunded sale's amount, the
// refund's own under another name ({"amount": 9990, "refund_amount":
// 1500}). The first answer is lost after the refund was made; the lookup
// lists it. Its "amount" is no proof that it is another refund: the SDK
// never saw this API echo a refund's amount.
func TestUnseen_RefundAmountIsTheSales(t *testing.T) {
	f := newFixture(t, nil)
	sale, err := f.c.Payments.CreditCard(f.ctx, CreditCardParams{OfferID: "offer-premium", ExternalReference: "order-rf-amount", Customer: goodCustomer, CardToken: "tok_ok"})
	if err != nil {
		t.Fatal(err)
	}
	saleAmount := sale.Sale.Amount
	base := unseenProxy(t, f, func(req *http.Request, resp *http.Response, body []byte) []byte {
		if !strings.HasSuffix(req.URL.Path, "/refunds") || resp.StatusCode >= 300 {
			return body
		}
		return editObjects(body, func(m map[string]any) {
			m["refund_amount"], m["amount"] = m["amount"], saleAmount
		})
	})
	c := unseenClient(t, f, base)
	f.srv.Inject(pagpolartest.Fault{Route: "refund", Action: pagpolartest.FaultCommitDropRelease, Times: 1})
	r, err := c.Refunds.Create(f.ctx, RefundParams{OperationID: "rf-amount-1", SaleID: sale.Sale.ID, Amount: 1500})
	id := ""
	if err == nil {
		id = r.Refund.ID
	}
	report(t, f, c, "rf-amount-1", id, err)
}

// A cache between the SDK and the API (a CDN rule caching GETs) answers
// the lookup with the list as it was before the charge: "not found" on a
// stale read. A cache that honours the request's no-cache must be told to
// revalidate; one that does not, but says it served the answer (Age),
// must not be read as the API's current list.
func TestUnseen_CachedLookup(t *testing.T) {
	for _, honours := range []bool{true, false} {
		for _, warm := range []bool{false, true} {
			t.Run(fmt.Sprintf("honours-no-cache=%v/warm=%v", honours, warm), func(t *testing.T) {
				t.Parallel()
				f := newFixture(t, nil)
				u, _ := url.Parse(f.srv.URL)
				rp := httputil.NewSingleHostReverseProxy(u)
				rp.ErrorLog = log.New(io.Discard, "", 0)
				type entry struct {
					status int
					h      http.Header
					body   []byte
					at     time.Time
				}
				var mu sync.Mutex
				cache := map[string]entry{}
				gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Method != http.MethodGet || honours && strings.Contains(r.Header.Get("Cache-Control"), "no-cache") {
						rp.ServeHTTP(w, r)
						return
					}
					mu.Lock()
					e, hit := cache[r.URL.String()]
					mu.Unlock()
					if !hit {
						rec := httptest.NewRecorder()
						rp.ServeHTTP(rec, r)
						e = entry{rec.Code, rec.Header().Clone(), rec.Body.Bytes(), time.Now()}
						mu.Lock()
						cache[r.URL.String()] = e
						mu.Unlock()
						maps.Copy(w.Header(), e.h)
						w.WriteHeader(e.status)
						_, _ = w.Write(e.body)
						return
					}
					maps.Copy(w.Header(), e.h)
					w.Header().Set("Age", strconv.Itoa(int(time.Since(e.at)/time.Second)))
					w.WriteHeader(e.status)
					_, _ = w.Write(e.body)
				}))
				t.Cleanup(gw.Close)
				c := unseenClient(t, f, gw.URL)
				if warm {
					warmClock(f, c)
				}
				// The application checks whether the order was paid already.
				if sales, err := c.Payments.SalesByExternalReference(f.ctx, "order-cached"); err != nil || len(sales) != 0 {
					t.Fatalf("setup read: %v %v", sales, err)
				}
				f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitDropRelease, Times: 1})
				ch, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-cached", Customer: goodCustomer})
				id := ""
				if err == nil {
					id = ch.Sale.ID
				}
				report(t, f, c, "pix:order-cached", id, err)
			})
		}
	}
}

// A sale list that ignores its filter (or matches it by prefix) and sales
// that carry no external reference: while an order's charge is ambiguous
// (a gateway's 502 in front of the API: never processed), another order's
// sale for the same offer appears in its lookup. Nothing shows it is under
// this order's reference: it must not be taken for this charge's success.
func TestUnseen_FilterIgnoredNoReference(t *testing.T) {
	f := newFixture(t, nil)
	refs := []string{"order-fa", "order-fb"}
	base := unseenProxy(t, f, func(req *http.Request, resp *http.Response, body []byte) []byte {
		strip := func(b []byte) []byte {
			return editObjects(b, func(m map[string]any) { delete(m, "external_reference") })
		}
		if isPost(req, "/payments/pix") && resp.StatusCode < 300 {
			return strip(body)
		}
		if !isGet(req, "/sales") || resp.StatusCode != 200 {
			return body
		}
		var all []json.RawMessage
		for _, ref := range refs {
			u := f.srv.URL + "/sales?" + url.Values{"external_reference": {ref}}.Encode()
			r2, _ := http.NewRequest(http.MethodGet, u, nil)
			r2.Header = req.Header.Clone()
			resp2, err := http.DefaultClient.Do(r2)
			if err != nil {
				continue
			}
			var l struct{ Data []json.RawMessage }
			_ = json.NewDecoder(resp2.Body).Decode(&l)
			resp2.Body.Close()
			all = append(all, l.Data...)
		}
		return strip(mustMarshal(map[string]any{"data": all}))
	})
	c := unseenClient(t, f, base)
	warmClock(f, c)
	f.srv.Inject(pagpolartest.Fault{Route: "pix", ExternalReference: "order-fa", Action: pagpolartest.FaultGateway, Status: 502, Times: 1})
	type out struct {
		id  string
		err error
	}
	done := make(chan out, 1)
	go func() {
		ch, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-fa", Customer: goodCustomer})
		if err != nil {
			done <- out{"", err}
			return
		}
		done <- out{ch.Sale.ID, nil}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for f.posts("pix") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first charge was never sent")
		}
		time.Sleep(time.Millisecond)
	}
	other := f.client(t, WithStore(f.store))
	if _, err := other.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-fb", Customer: goodCustomer}); err != nil {
		t.Fatal(err)
	}
	a := <-done
	report(t, f, c, "pix:order-fa", a.id, a.err)
}
