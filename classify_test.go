package pagpolar

import (
	"bytes"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// The classification table (SAFETY rules 3–5): every status class, with
// and without the API's own body, and transport failures before and after
// the request was written.
func TestClassify(t *testing.T) {
	cases := []struct {
		name string
		a    answer
		want verdict
	}{
		{"201", answer{status: 201}, vSuccess},
		{"200 replay", answer{status: 200}, vSuccess},
		{"dial failed", answer{err: errors.New("refused"), sent: false}, vRetry},
		{"connection lost after writing", answer{err: errors.New("EOF"), sent: true}, vAmbiguous},
		{"409 any body", answer{status: 409}, vInProgress},
		{"409 API", answer{status: 409, apiOwn: true}, vInProgress},
		{"429 API", answer{status: 429, apiOwn: true}, vRetry},
		{"429 gateway", answer{status: 429}, vRetry},
		{"503 API (shed before processing)", answer{status: 503, apiOwn: true}, vRetry},
		{"503 gateway", answer{status: 503}, vAmbiguous},
		{"401 API", answer{status: 401, apiOwn: true}, vNotExecuted},
		{"403 gateway", answer{status: 403}, vNotExecuted},
		{"402 any body (a decline)", answer{status: 402}, vFailed},
		{"400 API", answer{status: 400, apiOwn: true}, vFailed},
		{"422 API", answer{status: 422, apiOwn: true}, vFailed},
		{"404 API (resource not found)", answer{status: 404, apiOwn: true}, vFailed},
		{"404 router page (wrong base URL)", answer{status: 404}, vNotExecuted},
		{"405 router page", answer{status: 405}, vNotExecuted},
		{"400 proxy page", answer{status: 400}, vNotExecuted},
		{"500 API (the request ended)", answer{status: 500, apiOwn: true}, vAmbiguousEnd},
		{"500 not the API's", answer{status: 500}, vAmbiguous},
		{"502 gateway", answer{status: 502}, vAmbiguous},
		{"502 with a known code", answer{status: 502, apiOwn: true}, vAmbiguous},
		{"504 gateway", answer{status: 504}, vAmbiguous},
		{"504 with a known code", answer{status: 504, apiOwn: true}, vAmbiguous},
		{"501", answer{status: 501, apiOwn: true}, vAmbiguous},
		{"302 (never followed)", answer{status: 302}, vAmbiguous},
		{"100", answer{status: 100}, vAmbiguous},
		{"422 API naming the key", answer{status: 422, apiOwn: true, keyUsed: true}, vKeyUsed},
		{"400 naming the key, unknown code", answer{status: 400, keyUsed: true}, vKeyUsed},
		{"409 naming the key", answer{status: 409, keyUsed: true}, vInProgress},
		{"429 naming the key", answer{status: 429, keyUsed: true}, vRetry},
		{"401 naming the key", answer{status: 401, keyUsed: true}, vNotExecuted},
		{"500 API naming the key", answer{status: 500, apiOwn: true, keyUsed: true}, vAmbiguousEnd},
	}
	for _, c := range cases {
		if got, _ := classify(c.a); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func TestNamesKey(t *testing.T) {
	cases := []struct {
		code, message string
		want          bool
	}{
		{"unprocessable_entity", "Idempotency-Key já utilizada", true},
		{"idempotency_key_reused", "", true},
		{"", "Chave de idempotência já usada", true},
		{"IDEMPOTENCY_CONFLICT", "", true},
		{"validation_error", "customer.email: invalid", false},
		// Naming the key for another reason: no key was registered.
		{"validation_error", "customer.email é obrigatório; cabeçalhos exigidos: Authorization, Idempotency-Key", false},
		{"validation_error", "Idempotency-Key: header required", false},
		{"", "Idempotency-Key must be at most 255 characters", false},
		{"invalid_idempotency_key", "", false},
		{"", "Idempotency key already used with other parameters", true},
		{"", "A chave de idempotência já existe", true},
		{"", "", false},
		{"declined", "Cartão recusado", false},
	}
	for _, c := range cases {
		if got := namesKey(c.code, c.message); got != c.want {
			t.Errorf("namesKey(%q, %q) = %v, want %v", c.code, c.message, got, c.want)
		}
	}
}

// The other sender's earliest start after a 409: placed on the API's clock
// only for the documented 409 with a clock bound; otherwise the earliest
// time there is (shared, nothing excluded by time).
func TestInProgressFrom(t *testing.T) {
	now := t0
	cases := []struct {
		name           string
		ok, documented bool
		want           time.Time
	}{
		{"documented, bound", true, true, now.Add(-65 * time.Second)},
		{"documented, no bound", false, true, sharedAnyTime},
		{"other body, bound", true, false, sharedAnyTime},
		{"other body, no bound", false, false, sharedAnyTime},
	}
	for _, c := range cases {
		if got := inProgressFrom(now, c.ok, c.documented, 65*time.Second); !got.Equal(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// An answer a cache served (Age) is no proof of the API's current state.
func TestServedByCache(t *testing.T) {
	now := t0.Add(time.Hour)
	trust := now.Add(-5 * time.Second)
	cases := []struct {
		h         http.Header
		notBefore time.Time
		want      bool
	}{
		{http.Header{}, time.Time{}, false},
		{http.Header{"Age": {"0"}}, time.Time{}, false}, // a snapshot: under a second old, as good as concurrent
		{http.Header{"Age": {"1"}}, time.Time{}, true},
		{http.Header{"Age": {"0"}}, trust, false}, // CDNs stamp Age: 0 on what they pass through
		{http.Header{"Age": {"1"}}, trust, false},
		{http.Header{"Age": {"1"}}, now.Add(-time.Second), true}, // made before the trust moment, maybe
		{http.Header{"Age": {"1"}}, now.Add(time.Second), false}, // before the trust moment: a not-found counts for nothing yet
		{http.Header{"Age": {"60"}}, now.Add(time.Second), true},
		{http.Header{"Age": {"4"}}, trust, true}, // within the window, but older than a lookup may take
		{http.Header{"Age": {"3600"}}, trust, true},
		{http.Header{"Age": {"-1"}}, trust, true},
		{http.Header{"Age": {"soon"}}, trust, true},
		{http.Header{"Cache-Control": {"max-age=60"}}, trust, false},
	}
	for _, c := range cases {
		if _, got := servedByCache(c.h, now, c.notBefore); got != c.want {
			t.Errorf("servedByCache(%v, notBefore %v) = %v, want %v", c.h, c.notBefore.Sub(now), got, c.want)
		}
	}
}

// A 504 whose body is JSON with a code (a gateway's) was taken for the
// API's own answer: "the original has ended", so a not-found was trusted
// after SettleDelay instead of the window, while the lookup lagged. Two
// sales.
func TestClassify_Gateway504WithJSONBodyDoesNotEndTheWindow(t *testing.T) {
	f := newFixture(t, []pagpolartest.Option{pagpolartest.WithShapes(pagpolartest.ShapeGatewayJSON)})
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultGatewayAfterCommit, Status: 504, LookupLag: 150 * time.Millisecond, Times: 1})
	if _, err := f.c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-gw", Customer: goodCustomer}); err != nil {
		t.Fatal(err)
	}
	if n := f.successful("sale"); n != 1 {
		t.Fatalf("%d sales, want 1", n)
	}
	// The classification itself: no 502/504 ends the window, whatever its
	// body; a 503 that is not the API's is not "not processed".
	for _, st := range []int{502, 504} {
		for _, own := range []bool{false, true} {
			if v, _ := classify(answer{status: st, apiOwn: own}); v != vAmbiguous {
				t.Errorf("%d (API body %v): %s, want ambiguous", st, own, v)
			}
		}
	}
	if v, _ := classify(answer{status: 503}); v != vAmbiguous {
		t.Errorf("503 without the API's body: %s, want ambiguous", v)
	}
}

// An intermediary's 504 (upstream still running) is classified
// vAmbiguousEnd: "the original has ended", so a not-found is trusted after
// SettleDelay instead of after the processing window. Lookup lag shorter
// than SettleDelay (harmless after a real API 500) now charges twice.
func TestClassify_Gateway504KeepsTheWindowOpen(t *testing.T) {
	pol := testPolicy()
	pol.SettleDelay = 200 * time.Millisecond
	f := newFixture(t, nil, WithRetryPolicy(pol))
	u, _ := url.Parse(f.srv.URL)
	rp := httputil.NewSingleHostReverseProxy(u)
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/payments/pix") {
			rp.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		out, _ := http.NewRequest(http.MethodPost, f.srv.URL+r.URL.Path, bytes.NewReader(body))
		out.Header = r.Header.Clone()
		done := make(chan *http.Response, 1)
		go func() {
			resp, err := http.DefaultClient.Do(out)
			if err != nil {
				done <- nil
				return
			}
			done <- resp
		}()
		select {
		case resp := <-done:
			if resp == nil {
				w.WriteHeader(502)
				return
			}
			defer resp.Body.Close()
			maps.Copy(w.Header(), resp.Header)
			w.WriteHeader(resp.StatusCode)
			_, _ = io.Copy(w, resp.Body)
		case <-time.After(20 * time.Millisecond): // gateway upstream timeout
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusGatewayTimeout)
			_, _ = io.WriteString(w, "<html>504 Gateway Time-out</html>")
		}
	}))
	defer gw.Close()
	c := f.client(t, WithStore(f.store), WithBaseURL(gw.URL), WithRetryPolicy(pol))
	// Upstream: queued 150 ms, then commits, fails with 500 (key released),
	// and the sale shows in lookups 150 ms later (< SettleDelay 200 ms).
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultLatency, Delay: 150 * time.Millisecond, Times: 1})
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThen500, LookupLag: 150 * time.Millisecond, Times: 1})
	_, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-gw", Customer: goodCustomer})
	t.Logf("err=%v posts=%d", err, f.posts("pix"))
	time.Sleep(300 * time.Millisecond)
	if n := f.successful("sale"); n != 1 {
		t.Errorf("BUG: %d sales: a gateway 504 was taken as the end of the original", n)
	}
}

func TestClassify_API500AfterCommitChargesOnce(t *testing.T) {
	pol := testPolicy()
	pol.SettleDelay = 200 * time.Millisecond
	f := newFixture(t, nil, WithRetryPolicy(pol))
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultLatency, Delay: 150 * time.Millisecond, Times: 1})
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThen500, LookupLag: 150 * time.Millisecond, Times: 1})
	_, err := f.c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-gw", Customer: goodCustomer})
	if n := f.successful("sale"); n != 1 || err != nil {
		t.Errorf("control: %d sales, %v", n, err)
	}
}

// A 400 the API answers for a missing required field, whose message lists
// the accepted headers (the key among them): documented as "invalid body:
// key not registered".
func TestClassify_ValidationMessageNamingHeadersIsARefusal(t *testing.T) {
	f := newFixture(t, nil)
	u, _ := url.Parse(f.srv.URL)
	rp := httputil.NewSingleHostReverseProxy(u)
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			_, _ = w.Write([]byte(`{"code":"validation_error","message":"customer.email é obrigatório; cabeçalhos exigidos: Authorization, Idempotency-Key"}`))
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(gw.Close)
	c := proxiedClient(t, f, gw.URL)
	start := time.Now()
	_, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-400", Customer: goodCustomer})
	var ae *APIError
	var ue *OutcomeUnknownError
	t.Logf("err=%v (APIError=%v unknown=%v) after %v", err, errors.As(err, &ae), errors.As(err, &ue), time.Since(start))
	rec, _ := f.store.Get(f.ctx, c.storeID("pix:order-400"))
	t.Logf("record: state=%s error=%q", rec.State, rec.Error)
	if !errors.As(err, &ae) {
		t.Errorf("a documented 400 (invalid body, key not registered) ended %v, not as the API's refusal", err)
	}
}
