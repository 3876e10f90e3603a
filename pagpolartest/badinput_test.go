package pagpolartest

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// docsPix is the body of the PIX example in the idempotency page, with an
// offer of the fake in place of its empty placeholder.
const docsPix = `{
  "offer_identifier": "offer-basic",
  "external_reference": "PEDIDO-1234",
  "customer": {
    "name": "Maria Silva",
    "email": "cliente@exemplo.com",
    "document": "",
    "phone": ""
  }
}`

// bodyWith returns the JSON object body with member set to v.
func bodyWith(body, member string, v any) string {
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		panic(err)
	}
	m[member] = v
	return string(mustJSON(m))
}

// bodyWithout returns the JSON object body without member.
func bodyWithout(body, member string) string {
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		panic(err)
	}
	delete(m, member)
	return string(mustJSON(m))
}

// routerPage marks the cases answered by the router, not the API.
const routerPage = "(router page)"

// TestBadInput: what a real API answers to bad requests, never a panic.
func TestBadInput(t *testing.T) {
	s := NewServer(t)
	c := newClient(t, s)
	anon := c.withToken("")
	huge := `{"offer_identifier":"offer-basic","external_reference":"` + strings.Repeat("x", maxBodyBytes) + `"}`
	pix := pixBody("offer-basic", "o")
	tests := []struct {
		name         string
		c            *tclient
		method, path string
		key, body    string
		status       int
		code         string
		field        string // the message must name it
	}{
		{"no token", anon, "POST", wire.RoutePix, "k", pixBody("offer-basic", "o"), 401, wire.CodeUnauthorized, "Authorization"},
		{"unknown token", c.withToken("ppt_nope"), "GET", "/sales/x", noKey, "", 401, wire.CodeUnauthorized, ""},
		{"unknown route", c, "GET", "/nope", noKey, "", 404, routerPage, ""},
		{"no /v1", c, "GET", "/../sales", noKey, "", 404, routerPage, ""},
		{"trailing slash", c, "POST", "/payments/pix/", "k", pixBody("offer-basic", "o"), 404, routerPage, ""},
		{"unknown route, no token", anon, "POST", "/payments/bitcoin", "k", "{}", 404, routerPage, ""},
		{"wrong method", c, "GET", wire.RoutePix, noKey, "", 405, routerPage, ""},
		{"wrong method on refunds", c, "DELETE", wire.RouteRefunds, noKey, "", 405, routerPage, ""},
		{"huge body", c, "POST", wire.RoutePix, "k", huge, 413, wire.CodePayloadTooLarge, "body"},
		{"empty body", c, "POST", wire.RoutePix, "k", "", 400, wire.CodeValidation, "body"},
		{"malformed JSON", c, "POST", wire.RoutePix, "k", `{"offer_identifier": `, 400, wire.CodeValidation, "body"},
		{"JSON null", c, "POST", wire.RoutePix, "k", `null`, 400, wire.CodeValidation, "body"},
		{"JSON array", c, "POST", wire.RoutePix, "k", `[{"offer_identifier":"offer-basic"}]`, 400, wire.CodeValidation, "body"},
		{"trailing data", c, "POST", wire.RoutePix, "k", `{"offer_identifier":"offer-basic"} {}`, 400, wire.CodeValidation, "body"},
		{"number for string", c, "POST", wire.RoutePix, "k", bodyWith(pix, "offer_identifier", 1), 400, wire.CodeValidation, "offer_identifier"},
		{"string for object", c, "POST", wire.RoutePix, "k", bodyWith(pix, "customer", "Ana"), 400, wire.CodeValidation, "customer"},
		{"float amount (reais, not centavos)", c, "POST", wire.RouteRefunds, "k", `{"sale_identifier":"s","amount":99.90}`, 400, wire.CodeValidation, "amount"},
		{"string amount", c, "POST", wire.RouteRefunds, "k", `{"sale_identifier":"s","amount":"100"}`, 400, wire.CodeValidation, "amount"},
		{"negative amount", c, "POST", wire.RouteRefunds, "k", `{"sale_identifier":"s","amount":-1}`, 400, wire.CodeValidation, "amount"},
		{"refund without amount", c, "POST", wire.RouteRefunds, "k", `{"sale_identifier":"s"}`, 400, wire.CodeValidation, "amount: required"},
		{"missing offer", c, "POST", wire.RoutePix, "k", bodyWithout(pix, "offer_identifier"), 400, wire.CodeValidation, "offer_identifier: required"},
		{"empty offer", c, "POST", wire.RoutePix, "k", bodyWith(pix, "offer_identifier", ""), 400, wire.CodeValidation, "offer_identifier"},
		{"long reference", c, "POST", wire.RoutePix, "k", pixBody("offer-basic", strings.Repeat("r", 256)), 400, wire.CodeValidation, "external_reference"},
		{"card without token", c, "POST", wire.RouteCreditCard, "k", bodyWith(cardBody("offer-basic", "o", "t"), "card", map[string]any{}), 400, wire.CodeValidation, "card.token"},
		{"subscribe without method", c, "POST", "/plans/offer/plan-basic/subscribe", "k", bodyWithout(subscribeBody("o", "pix", ""), "payment_method"), 400, wire.CodeValidation, "payment_method"},
		{"subscribe bad method", c, "POST", "/plans/offer/plan-basic/subscribe", "k", subscribeBody("o", "cash", ""), 400, wire.CodeValidation, "payment_method"},
		{"plan change without offer", c, "POST", "/subscriptions/sub_x/plan-change", "k", `{}`, 400, wire.CodeValidation, "offer_identifier"},
		{"boleto bad due date", c, "POST", wire.RouteBoleto, "k", bodyWith(pix, "due_date", "tomorrow"), 400, wire.CodeValidation, "due_date"},
		// As strict as the documented request (the docs' PIX example sends
		// offer_identifier, external_reference and a customer with name,
		// email, document and phone, the last two ""):
		{"PIX without customer", c, "POST", wire.RoutePix, "k", bodyWithout(pix, "customer"), 400, wire.CodeValidation, "customer: required"},
		{"only offer_identifier", c, "POST", wire.RoutePix, "k", `{"offer_identifier":"offer-basic"}`, 400, wire.CodeValidation, "external_reference: required"},
		{"empty reference", c, "POST", wire.RoutePix, "k", bodyWith(pix, "external_reference", ""), 400, wire.CodeValidation, "external_reference"},
		{"customer without phone", c, "POST", wire.RoutePix, "k", bodyWith(pix, "customer", map[string]any{"name": "Ana", "email": "a@b.c", "document": ""}), 400, wire.CodeValidation, "customer.phone: required"},
		{"customer without email", c, "POST", wire.RoutePix, "k", bodyWith(pix, "customer", map[string]any{"name": "Ana", "email": "", "document": "", "phone": ""}), 400, wire.CodeValidation, "customer.email"},
		{"null document", c, "POST", wire.RoutePix, "k", bodyWith(pix, "customer", map[string]any{"name": "Ana", "email": "a@b.c", "document": nil, "phone": ""}), 400, wire.CodeValidation, "customer.document"},
		{"unknown field", c, "POST", wire.RoutePix, "k", bodyWith(pix, "amount", 1), 400, wire.CodeValidation, "amount: unknown field"},
		{"unknown customer field", c, "POST", wire.RoutePix, "k", bodyWith(pix, "customer", map[string]any{"name": "Ana", "email": "a@b.c", "document": "", "phone": "", "cpf": "1"}), 400, wire.CodeValidation, "customer.cpf: unknown field"},
		{"the docs' own example", c, "POST", wire.RoutePix, "k-docs", docsPix, 201, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.c.do(tt.method, tt.path, tt.key, tt.body)
			if tt.code == routerPage {
				// A path or method with no route gets the router's page, not
				// the API's JSON error: a client must not mistake a wrong
				// base URL for the API's "not found".
				want(t, r, tt.status)
				if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") || json.Valid(r.body) {
					t.Fatalf("router page %q with Content-Type %q, want plain text", r.body, ct)
				}
				if tt.status == 405 && r.header.Get("Allow") == "" {
					t.Fatal("405 without Allow")
				}
				return
			}
			if tt.code == "" {
				want(t, r, tt.status)
				return
			}
			e := wantError(t, r, tt.status, tt.code)
			if !strings.Contains(e.Message, tt.field) {
				t.Fatalf("message %q does not name %q", e.Message, tt.field)
			}
			if tt.status == 405 && r.header.Get("Allow") == "" {
				t.Fatal("405 without Allow")
			}
		})
	}
	if n := len(s.Ledger().Sales); n != 1 {
		t.Fatalf("%d sales, want only the valid one", n)
	}
	for _, rl := range s.Ledger().Requests {
		if rl.Panic != "" {
			t.Fatalf("panic: %s", rl.Panic)
		}
	}
	// After all that, the server still works and no key was registered.
	want(t, c.pix("k", "o"), 201)
}

// fuzzRoutes are the method and path FuzzDecodeRequest sends to, by index.
var fuzzRoutes = []struct{ method, path string }{
	{"POST", "/v1/payments/pix"},
	{"POST", "/v1/payments/boleto"},
	{"POST", "/v1/payments/credit-card"},
	{"POST", "/v1/plans/offer/plan-basic/subscribe"},
	{"POST", "/v1/plans/offer/offer-basic/subscribe"},
	{"POST", "/v1/subscriptions/SUB/plan-change"},
	{"POST", "/v1/refunds"},
	{"GET", "/v1/refunds"},
	{"GET", "/v1/sales"},
	{"GET", "/v1/sales/SALE"},
	{"GET", "/v1/subscriptions"},
	{"GET", "/v1/subscriptions/SUB"},
	{"PUT", "/v1/payments/pix"},
	{"POST", "/v1/nope"},
}

// FuzzDecodeRequest drives request decoding through the whole handler:
// any body, query and key on any route gets one of the API's statuses with
// a JSON body, never a panic, and a refused request registers nothing.
func FuzzDecodeRequest(f *testing.F) {
	f.Add(uint8(0), []byte(pixBody("offer-basic", "order-1")), "k1", "")
	f.Add(uint8(1), []byte(`{"offer_identifier":"offer-basic","due_date":"2026-01-31"}`), "k2", "")
	f.Add(uint8(2), []byte(cardBody("offer-basic", "o", "tok_decline_x")), "k3", "")
	f.Add(uint8(3), []byte(subscribeBody("s", "credit_card", "tok")), "k4", "")
	f.Add(uint8(5), []byte(`{"offer_identifier":"plan-pro"}`), "k5", "")
	f.Add(uint8(6), []byte(`{"sale_identifier":"SALE","amount":100}`), "k6", "")
	f.Add(uint8(6), []byte(`{"sale_identifier":"SALE","amount":1e30}`), "k6", "")
	f.Add(uint8(8), []byte(nil), "", "external_reference=o%20x")
	f.Add(uint8(7), []byte(nil), "", "sale_identifier=SALE")
	f.Add(uint8(0), []byte(`{"customer":{"name":["x"]}}`), "", "")
	f.Fuzz(func(t *testing.T, ri uint8, body []byte, key, query string) {
		s := NewUnstartedServer()
		defer s.Close()
		// A paid sale and a subscription for the routes that name one.
		setup := func(method, path, key, body string) *httptest.ResponseRecorder {
			req := httptest.NewRequest(method, "/", strings.NewReader(body))
			req.URL.Path = path
			req.Header.Set(wire.HeaderAuthorization, "Bearer "+s.Token)
			req.Header.Set(wire.HeaderIdempotencyKey, key)
			rec := httptest.NewRecorder()
			s.serveHTTP(rec, req)
			return rec
		}
		var sale wire.Sale
		var sub wire.Subscription
		_ = json.Unmarshal(setup("POST", "/v1/payments/credit-card", "setup-1", cardBody("offer-basic", "o", "tok")).Body.Bytes(), &sale)
		_ = json.Unmarshal(setup("POST", "/v1/plans/offer/plan-basic/subscribe", "setup-2", subscribeBody("s", "pix", "")).Body.Bytes(), &sub)
		before := len(s.Ledger().Effects())

		rt := fuzzRoutes[int(ri)%len(fuzzRoutes)]
		path := strings.NewReplacer("SALE", sale.Identifier, "SUB", sub.ID).Replace(rt.path)
		req := httptest.NewRequest(rt.method, "/", strings.NewReader(string(body)))
		req.URL.Path = path
		req.URL.RawQuery = strings.NewReplacer("SALE", sale.Identifier).Replace(query)
		req.Header.Set(wire.HeaderAuthorization, "Bearer "+s.Token)
		req.Header[wire.HeaderIdempotencyKey] = []string{key}
		rec := httptest.NewRecorder()
		s.serveHTTP(rec, req)

		l := s.Ledger()
		for _, r := range l.Requests {
			if r.Panic != "" {
				t.Fatalf("panic: %s", r.Panic)
			}
		}
		switch rec.Code {
		case 200, 201, 400, 402, 404, 405, 413, 422:
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body.Bytes())
		}
		if rec.Header().Get(wire.HeaderRequestID) == "" {
			t.Fatal("no X-Request-Id")
		}
		router := (rec.Code == 404 || rec.Code == 405) && strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain")
		if !router && !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("body is not JSON: %q", rec.Body.Bytes())
		}
		if rec.Code/100 != 2 && !router {
			var e wire.Error
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Code == "" || e.Message == "" {
				t.Fatalf("%d body is not an API error: %s", rec.Code, rec.Body.Bytes())
			}
		}
		after := l.Effects()
		if rec.Code == 400 || rec.Code == 404 || rec.Code == 405 || rec.Code == 413 {
			if len(after) != before {
				t.Fatalf("a %d created something", rec.Code)
			}
		}
		for _, e := range after {
			if e.Amount < 0 || (e.Kind == "sale" && e.Amount == 0) {
				t.Fatalf("effect with amount %d: %+v", e.Amount, e)
			}
		}
		for _, sl := range l.Sales {
			if sl.RefundedAmount > sl.Amount {
				t.Fatalf("refunded %d of %d", sl.RefundedAmount, sl.Amount)
			}
		}
		if rec.Code/100 == 2 && rt.method == "POST" {
			// A repeat with the same key is a byte-identical replay.
			req2 := httptest.NewRequest(rt.method, "/", strings.NewReader(string(body)))
			req2.URL.Path = path
			req2.Header.Set(wire.HeaderAuthorization, "Bearer "+s.Token)
			req2.Header[wire.HeaderIdempotencyKey] = []string{key}
			rec2 := httptest.NewRecorder()
			s.serveHTTP(rec2, req2)
			if rec2.Code != rec.Code || rec2.Body.String() != rec.Body.String() || rec2.Header().Get(wire.HeaderReplayed) != "true" {
				t.Fatalf("repeat: %d %s, want a replay of %d %s", rec2.Code, rec2.Body.Bytes(), rec.Code, rec.Body.Bytes())
			}
		}
	})
}
