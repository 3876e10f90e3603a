// Regression tests from a review of the engine against SAFETY.md: each one
// failed before its fix (see the comment above it) and must keep passing.

package pagpolar

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// rewritingProxy puts an HTTP proxy in front of the fake that rewrites JSON
// bodies of 2xx responses matching (method, path part); method "" matches
// every method.
func rewritingProxy(t *testing.T, f *fixture, method, pathPrefix string, rewrite func(v any) any) string {
	t.Helper()
	u, _ := url.Parse(f.srv.URL)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(r *http.Response) error {
		if (method != "" && r.Request.Method != method) || !strings.Contains(r.Request.URL.Path, pathPrefix) || r.StatusCode >= 300 {
			return nil
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		var v any
		if json.Unmarshal(b, &v) == nil {
			v = rewrite(v)
			b, _ = json.Marshal(v)
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		r.ContentLength = int64(len(b))
		r.Header.Set("Content-Length", strconv.Itoa(len(b)))
		return nil
	}
	ps := httptest.NewServer(rp)
	t.Cleanup(ps.Close)
	return ps.URL
}

// F1: a 2xx whose body does not match the assumed shape (here: the API does
// not echo payment_method) is recorded as a terminal *failure* although the
// sale exists. The caller, told the operation failed, charges again under a
// new operation ID: two sales for one order.
func TestReviewRegression_2xxShapeMismatchRecordedAsFailed(t *testing.T) {
	f := newFixture(t, nil)
	proxy := rewritingProxy(t, f, http.MethodPost, "/payments/pix", func(v any) any {
		delete(v.(map[string]any), "payment_method")
		return v
	})
	c := f.client(t, WithStore(f.store), WithBaseURL(proxy))
	p := PixParams{OfferID: "offer-basic", ExternalReference: "order-shape", Customer: goodCustomer}
	_, err := c.Payments.Pix(f.ctx, p)
	t.Logf("first call: %v (unknown=%v)", err, isUnknown(err))
	rec, _ := f.store.Get(f.ctx, c.storeID("pix:order-shape"))
	t.Logf("record state %s; ledger successful sales %d", rec.State, f.successful("sale"))
	if rec.State == keystore.StateFailed && f.successful("sale") == 1 {
		t.Errorf("BUG: a created sale is recorded as a terminal failure (%s), not unknown/succeeded", rec.Error)
	}
	if err != nil && !isUnknown(err) {
		// What a caller does after a definite failure: a new operation.
		p.OperationID = "retry-order-shape-2"
		_, _ = c.Payments.Pix(f.ctx, p)
	}
	if n := f.successful("sale"); n != 1 {
		t.Errorf("BUG: %d successful sales for one order after the caller reacted to the 'failure'", n)
	}
}

// F2: a sale list whose created_at is not RFC 3339 makes every sale "older
// than the first send": the lookup says not-found, is trusted, and the
// engine resends; the original (committed, key released by its 500) and the
// resend both charge.
func TestReviewRegression_UnparseableCreatedAtIsNotFound(t *testing.T) {
	f := newFixture(t, nil)
	proxy := rewritingProxy(t, f, http.MethodGet, "/sales", func(v any) any {
		for _, s := range v.(map[string]any)["data"].([]any) {
			m := s.(map[string]any)
			if ts, err := time.Parse(time.RFC3339Nano, m["created_at"].(string)); err == nil {
				m["created_at"] = ts.Format("2006-01-02 15:04:05")
			}
		}
		return v
	})
	c := f.client(t, WithStore(f.store), WithBaseURL(proxy))
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThen500, Times: 1})
	ch, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-ts", Customer: goodCustomer})
	t.Logf("call: err=%v", err)
	if ch != nil {
		t.Logf("source %s", ch.Operation.Source)
	}
	if n := f.successful("sale"); n != 1 {
		t.Errorf("BUG: %d successful sales for one operation (unmatchable lookup taken as not-found)", n)
	}
}

// failingRenewStore fails Renew once armed (a flaky durable store).
type failingRenewStore struct {
	*keystore.Memory
	armed atomic.Bool
}

func (s *failingRenewStore) Renew(ctx context.Context, id string, tok int64, ttl time.Duration) (keystore.Record, error) {
	if s.armed.Load() {
		return keystore.Record{}, fmt.Errorf("%w: connection reset", keystore.ErrUnavailable)
	}
	return s.Memory.Renew(ctx, id, tok, ttl)
}

// F3: after an ambiguous send, a store hiccup in the settle loop's renew
// returns ErrStoreUnavailable ("nothing was sent") instead of an
// OutcomeUnknownError, though the sale exists.
func TestReviewRegression_SettleStoreErrorIsNotOutcomeUnknown(t *testing.T) {
	f := newFixture(t, nil)
	st := &failingRenewStore{Memory: keystore.NewMemoryWithClock(f.srv.Clock)}
	// A lease short enough that the settle loop must renew it while the
	// lookups keep failing; the renewal then meets the broken store.
	pol := testPolicy()
	pol.AttemptTimeout, pol.LeaseTTL = 500*time.Millisecond, 2100*time.Millisecond
	c := f.client(t, WithStore(st), WithRetryPolicy(pol), WithHook(func(ctx context.Context, e Event) {
		if e.Kind == EventSent {
			st.armed.Store(true)
		}
	}))
	f.warm(t, c)
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThenDrop, Times: 1})
	f.srv.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.Fault500NoCommit})
	_, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-renew", Customer: goodCustomer})
	t.Logf("err: %v", err)
	if !isUnknown(err) {
		t.Errorf("BUG: ambiguous send ended with %v (ErrStoreUnavailable=%v), not ErrOutcomeUnknown; sales in ledger: %d",
			err, errors.Is(err, ErrStoreUnavailable), f.successful("sale"))
	}
}

// F3b: lookups that take longer than LeaseTTL (read route timing out) make
// the settle loop return ErrLeaseLost, not ErrOutcomeUnknown, though nobody
// else took the operation.
func TestReviewRegression_SlowLookupsLoseLease(t *testing.T) {
	pol := testPolicy()
	pol.AttemptTimeout = 80 * time.Millisecond
	pol.LeaseTTL = 300 * time.Millisecond
	f := newFixture(t, nil, WithRetryPolicy(pol))
	f.warm(t, f.c)
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThenDrop, Times: 1})
	f.srv.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.FaultHold, Delay: 150 * time.Millisecond})
	_, err := f.c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-slowlk", Customer: goodCustomer})
	t.Logf("err: %v", err)
	if !isUnknown(err) {
		t.Errorf("BUG: got %v (ErrLeaseLost=%v), want ErrOutcomeUnknown", err, errors.Is(err, ErrLeaseLost))
	}
}

// F4: ResumeAll only ever sees the 500 oldest unfinished records; when they
// stay unsettled (e.g. subscribes without a lookup route), newer crashed
// operations are never settled.
func TestReviewRegression_ResumeAllStarvesPast500(t *testing.T) {
	f := newFixture(t, []pagpolartest.Option{pagpolartest.WithoutSubscriptionLookup()})
	ctx := f.ctx
	old := f.srv.Clock.Now().Add(-time.Hour)
	for i := range 500 {
		meta, _ := json.Marshal(opMeta{Path: "/plans/offer/plan-basic/subscribe", ExternalReference: fmt.Sprintf("s-%d", i), OfferID: "plan-basic", Method: "pix", TrustAfter: old})
		op := fmt.Sprintf("subscribe:s-%d", i)
		_, err := f.store.Create(ctx, keystore.Record{OperationID: f.c.storeID(op), Key: f.c.idempotencyKey(op), Kind: kindSubscribe,
			State: keystore.StateUnknown, Attempts: 1, FirstSentAt: old, LastSentAt: old, Meta: meta}, "dead", time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
	}
	f.srv.Clock.Advance(time.Second)
	meta, _ := json.Marshal(opMeta{Path: "/payments/pix", ExternalReference: "late", OfferID: "offer-basic", Method: "pix", TrustAfter: old})
	if _, err := f.store.Create(ctx, keystore.Record{OperationID: f.c.storeID("pix:late"), Key: f.c.idempotencyKey("pix:late"), Kind: kindPix,
		State: keystore.StateUnknown, Attempts: 1, FirstSentAt: old, LastSentAt: old, Meta: meta}, "dead", time.Millisecond); err != nil {
		t.Fatal(err)
	}
	f.srv.Clock.Advance(time.Second)
	for run := range 3 {
		res, err := f.c.ResumeAll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("run %d: %d results", run, len(res))
	}
	if rec, _ := f.store.Get(ctx, f.c.storeID("pix:late")); rec.State != keystore.StateNotExecuted {
		t.Errorf("BUG: pix:late is still %s after 3 ResumeAll runs (never visited)", rec.State)
	}
}

// F5: a declined attempt of the same order within ClockSkew (2 s default)
// before the retry's first send is taken as the retry's own outcome, while
// the retry's sale (not yet visible to lookups) is paid. The caller, told
// "declined", tries a third time: two paid sales for one order.
func TestReviewRegression_EarlierDeclineWithinSkewSettlesRetry(t *testing.T) {
	pol := testPolicy()
	f := newFixture(t, nil, WithRetryPolicy(pol))
	p := CreditCardParams{OfferID: "offer-basic", ExternalReference: "order-skew", Customer: goodCustomer, CardToken: "tok_a", OperationID: "order-skew-try-1"}
	f.srv.Inject(pagpolartest.Fault{Route: "credit_card", Action: pagpolartest.FaultDecline, Times: 1})
	if _, err := f.c.Payments.CreditCard(f.ctx, p); !errors.Is(err, ErrDeclined) {
		t.Fatalf("try 1: %v", err)
	}
	f.srv.Clock.Advance(500 * time.Millisecond) // customer re-enters a card half a second later
	f.srv.Inject(pagpolartest.Fault{Route: "credit_card", Action: pagpolartest.FaultCommitThenDrop, LookupLag: 200 * time.Millisecond, Times: 1})
	p.CardToken, p.OperationID = "tok_b", "order-skew-try-2"
	_, err := f.c.Payments.CreditCard(f.ctx, p)
	t.Logf("try 2: %v; paid sales now %d", err, f.successful("sale"))
	if errors.Is(err, ErrDeclined) && f.successful("sale") == 1 {
		t.Errorf("BUG: try 2 reported declined (try 1's sale), but try 2's sale is paid")
	}
	if errors.Is(err, ErrDeclined) {
		p.CardToken, p.OperationID = "tok_c", "order-skew-try-3"
		_, _ = f.c.Payments.CreditCard(f.ctx, p)
		if n := f.successful("sale"); n > 1 {
			t.Errorf("BUG: %d paid sales for one order", n)
		}
	}
}

// F6: a plan change found by lookup is taken as success whatever its status.
func TestReviewRegression_PlanChangeLookupIgnoresStatus(t *testing.T) {
	f := newFixture(t, nil)
	sub, err := f.c.Subscriptions.Subscribe(f.ctx, SubscribeParams{OfferID: "plan-basic", ExternalReference: "sub-st", Customer: goodCustomer, PaymentMethod: "pix"})
	if err != nil {
		t.Fatal(err)
	}
	proxy := rewritingProxy(t, f, http.MethodGet, "/subscriptions/", func(v any) any {
		if pcs, ok := v.(map[string]any)["plan_changes"].([]any); ok {
			for _, pc := range pcs {
				pc.(map[string]any)["status"] = "rejected"
			}
		}
		return v
	})
	c := f.client(t, WithStore(f.store), WithBaseURL(proxy))
	f.srv.Inject(pagpolartest.Fault{Route: "plan_change", Action: pagpolartest.FaultCommitThen500, Times: 1})
	r, err := c.Subscriptions.ChangePlan(f.ctx, ChangePlanParams{OperationID: "pc-st", SubscriptionID: sub.Subscription.ID, NewOfferID: "plan-pro"})
	if err == nil {
		t.Errorf("BUG: plan change with status %q settled as success (source %s)", r.PlanChange.Status, r.Operation.Source)
	}
}

// F7: `written` is set by the transport's write goroutine (httptrace) and
// read by the caller without synchronisation.
func TestReviewRegression_WrittenFlagRace(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // accept, never read: the client's body write blocks
		}
	}()
	pol := testPolicy()
	pol.AttemptTimeout = 100 * time.Millisecond
	pol.MaxSettleWait = 50 * time.Millisecond
	c, err := NewClient("cred", StaticToken("tok"), WithBaseURL("http://"+ln.Addr().String()), WithRetryPolicy(pol), WithStore(keystore.NewMemory()))
	if err != nil {
		t.Fatal(err)
	}
	cust := goodCustomer
	cust.Name = strings.Repeat("x", 16<<20) // no length limit on Customer.Name
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = c.Payments.Pix(ctx, PixParams{OfferID: "o", ExternalReference: "r", Customer: cust})
	t.Logf("err: %v", err)
}

// F8: an intermediary's 504 (upstream still running) is classified
// vAmbiguousEnd: "the original has ended", so a not-found is trusted after
// SettleDelay instead of after the processing window. Lookup lag shorter
// than SettleDelay (harmless after a real API 500) now charges twice.
func TestReviewRegression_Gateway504IsNotTheEnd(t *testing.T) {
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

func TestReviewRegression_Gateway504Control(t *testing.T) {
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
