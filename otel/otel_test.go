package pagpolarotel_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore"
	pagpolarotel "github.com/pagpolar/pagpolar-go/otel"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

var customer = pagpolar.Customer{Name: "Maria Silva", Email: "maria@exemplo.com", Document: "123.456.789-09"}

const cardToken = "tok_card_4242secret"

type rig struct {
	srv     *pagpolartest.Server
	client  *pagpolar.Client
	spans   *tracetest.SpanRecorder
	metrics *sdkmetric.ManualReader
	mu      sync.Mutex
	parents []string // traceparent headers the API received
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{spans: tracetest.NewSpanRecorder(), metrics: sdkmetric.NewManualReader()}
	r.srv = pagpolartest.NewServer(t, pagpolartest.WithProcessingWindow(300*time.Millisecond))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.metrics))
	tap := roundTripper(func(req *http.Request) (*http.Response, error) {
		r.mu.Lock()
		r.parents = append(r.parents, req.Header.Get("traceparent"))
		r.mu.Unlock()
		return http.DefaultTransport.RoundTrip(req)
	})
	c, err := pagpolar.NewClient(r.srv.CredentialID, pagpolar.StaticToken(r.srv.Token),
		pagpolar.WithBaseURL(r.srv.URL), pagpolar.WithStore(keystore.NewMemory()),
		pagpolar.WithHTTPClient(&http.Client{Transport: tap}),
		pagpolar.WithRetryPolicy(pagpolar.RetryPolicy{
			AttemptTimeout: 2 * time.Second, ProcessingWindow: 300 * time.Millisecond, WindowMargin: 50 * time.Millisecond,
			SettleDelay: 60 * time.Millisecond, LookupInterval: 20 * time.Millisecond, MaxSettleWait: 5 * time.Second,
			NewBackOff: pagpolar.Exponential(5*time.Millisecond, 40*time.Millisecond), MaxRetryAfter: 20 * time.Millisecond,
		}),
		pagpolarotel.Option(pagpolarotel.WithTracerProvider(tp), pagpolarotel.WithMeterProvider(mp)))
	if err != nil {
		t.Fatal(err)
	}
	r.client = c
	return r
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// tree returns the ended spans as "parent name > child name" edges, and
// the one operation span.
func (r *rig) tree(t *testing.T) (map[string]sdktrace.ReadOnlySpan, []sdktrace.ReadOnlySpan) {
	byID := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range r.spans.Ended() {
		byID[s.SpanContext().SpanID().String()] = s
	}
	var ops []sdktrace.ReadOnlySpan
	for _, s := range byID {
		if s.Name() == "pagpolar.operation" {
			ops = append(ops, s)
		}
	}
	if len(ops) != 1 {
		t.Fatalf("%d operation spans, want 1", len(ops))
	}
	return byID, ops
}

func children(all map[string]sdktrace.ReadOnlySpan, parent sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range all {
		if s.Parent().SpanID() == parent.SpanContext().SpanID() {
			out = append(out, s)
		}
	}
	return out
}

func attr(s sdktrace.ReadOnlySpan, k string) (attribute.Value, bool) {
	for _, a := range s.Attributes() {
		if string(a.Key) == k {
			return a.Value, true
		}
	}
	return attribute.Value{}, false
}

// noSecrets fails if any attribute of any span or metric data point holds
// the token, the card token, the customer's name, e-mail or document, or an
// Idempotency-Key in the clear.
func (r *rig) noSecrets(t *testing.T, keys ...string) {
	t.Helper()
	banned := append([]string{r.srv.Token, cardToken, customer.Name, customer.Email, customer.Document, "12345678909"}, keys...)
	check := func(where string, kvs []attribute.KeyValue) {
		for _, kv := range kvs {
			v := kv.Value.String()
			for _, b := range banned {
				if b != "" && strings.Contains(v, b) {
					t.Errorf("%s: attribute %s = %q holds %q", where, kv.Key, v, b)
				}
			}
		}
	}
	for _, s := range r.spans.Ended() {
		check("span "+s.Name(), s.Attributes())
		for _, e := range s.Events() {
			check("span event "+e.Name, e.Attributes)
		}
	}
	var rm metricdata.ResourceMetrics
	if err := r.metrics.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			for _, set := range metricSets(m) {
				check("metric "+m.Name, set.ToSlice())
			}
		}
	}
}

func metricSets(m metricdata.Metrics) []attribute.Set {
	var out []attribute.Set
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes)
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			out = append(out, p.Attributes)
		}
	}
	return out
}

// counter returns the sum of metric name's points whose attributes include want.
func (r *rig) counter(t *testing.T, name string, want ...attribute.KeyValue) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.metrics.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if has(p.Attributes, want) {
						n += p.Value
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if has(p.Attributes, want) {
						n += int64(p.Count)
					}
				}
			}
		}
	}
	return n
}

func has(set attribute.Set, want []attribute.KeyValue) bool {
	for _, w := range want {
		v, ok := set.Value(w.Key)
		if !ok || v != w.Value {
			return false
		}
	}
	return true
}

func TestLostAnswerThenLookup_TreeAttributesAndMetrics(t *testing.T) {
	r := newRig(t)
	r.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitDropRelease, Times: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ch, err := r.client.Payments.Pix(ctx, pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: "order-lost", Customer: customer})
	if err != nil {
		t.Fatalf("charge: %v", err)
	}
	all, ops := r.tree(t)
	op := ops[0]
	if v, _ := attr(op, "pagpolar.outcome"); v.AsString() != "succeeded" {
		t.Errorf("outcome %q, want succeeded", v.AsString())
	}
	if v, _ := attr(op, "pagpolar.source"); v.AsString() != string(pagpolar.SourceLookup) {
		t.Errorf("source %q, want lookup", v.AsString())
	}
	if v, _ := attr(op, "pagpolar.operation.kind"); v.AsString() != "pix" {
		t.Errorf("kind %q, want pix", v.AsString())
	}
	if v, ok := attr(op, "pagpolar.idempotency_key.sha256"); !ok || len(v.AsString()) != 64 || v.AsString() == ch.Operation.Key {
		t.Errorf("key hash %q: want a SHA-256, not the key", v.AsString())
	}
	var posts, lookups int
	for _, c := range children(all, op) {
		switch c.Name() {
		case "POST":
			posts++
		case "pagpolar.lookup":
			lookups++
			gets := children(all, c)
			if len(gets) == 0 || gets[0].Name() != "GET" {
				t.Errorf("lookup span without a GET attempt under it: %v", gets)
			}
			if v, _ := attr(c, "pagpolar.lookup.found"); !v.AsBool() {
				t.Error("lookup span: found false, want true")
			}
		}
	}
	if posts != 1 || lookups == 0 {
		t.Errorf("under the operation: %d POST, %d lookups; want 1 POST then lookups", posts, lookups)
	}
	if n := r.counter(t, "pagpolar.client.operations", attribute.String("pagpolar.outcome", "succeeded"), attribute.String("pagpolar.operation.kind", "pix")); n != 1 {
		t.Errorf("operations{succeeded,pix} = %d, want 1", n)
	}
	if n := r.counter(t, "pagpolar.client.lookups", attribute.Bool("pagpolar.lookup.found", true)); n == 0 {
		t.Error("no found lookup counted")
	}
	if n := r.counter(t, "http.client.request.duration", attribute.String("http.request.method", "GET")); n == 0 {
		t.Error("no GET request duration recorded")
	}
	r.noSecrets(t, ch.Operation.Key)

	// traceparent reached the API on every request, naming this trace.
	trace := op.SpanContext().TraceID().String()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.parents) < 2 {
		t.Fatalf("%d requests seen", len(r.parents))
	}
	for _, p := range r.parents {
		if !strings.Contains(p, trace) {
			t.Errorf("request traceparent %q, want one of trace %s", p, trace)
		}
	}
}

func TestInProgress409Wait_RecordsTheAttemptAndRetry(t *testing.T) {
	r := newRig(t)
	// The first POST is held past its attempt's timeout: the next one,
	// under the same key, meets the held one (409) and waits.
	r.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultHold, Delay: 250 * time.Millisecond, Times: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c2, err := pagpolar.NewClient(r.srv.CredentialID, pagpolar.StaticToken(r.srv.Token), pagpolar.WithBaseURL(r.srv.URL),
		pagpolar.WithStore(keystore.NewMemory()))
	if err != nil {
		t.Fatal(err)
	}
	params := pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: "order-409", Customer: customer}
	first := make(chan error, 1)
	go func() { _, err := c2.Payments.Pix(ctx, params); first <- err }()
	// Let the other host's request reach the held processing first.
	if err := r.srv.WaitHolds(ctx, 1); err != nil {
		t.Fatal(err)
	}
	_, err = r.client.Payments.Pix(ctx, params)
	if err2 := <-first; err2 != nil {
		t.Logf("the other host: %v", err2)
	}
	all, ops := r.tree(t)
	saw409 := false
	for _, c := range children(all, ops[0]) {
		if v, _ := attr(c, "http.response.status_code"); v.AsInt64() == 409 {
			saw409 = true
			if v, _ := attr(c, "error.type"); v.AsString() != "409" {
				t.Errorf("409 attempt: error.type %q, want 409", v.AsString())
			}
		}
	}
	if !saw409 {
		t.Fatalf("no 409 attempt under the operation (err %v)", err)
	}
	if n := r.counter(t, "pagpolar.client.attempts", attribute.String("pagpolar.cause", "409")); n == 0 {
		t.Error("no attempt counted with cause 409")
	}
	r.noSecrets(t)
}

func TestDeclinedCard_FailedOutcomeAndNoCardData(t *testing.T) {
	r := newRig(t)
	r.srv.Inject(pagpolartest.Fault{Route: "credit_card", Action: pagpolartest.FaultDecline, Times: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := r.client.Payments.CreditCard(ctx, pagpolar.CreditCardParams{OfferID: "offer-basic", ExternalReference: "order-card",
		Customer: customer, CardToken: cardToken})
	if !errors.Is(err, pagpolar.ErrDeclined) {
		t.Fatalf("err %v, want ErrDeclined", err)
	}
	all, ops := r.tree(t)
	op := ops[0]
	if v, _ := attr(op, "pagpolar.outcome"); v.AsString() != "failed" {
		t.Errorf("outcome %q, want failed", v.AsString())
	}
	if op.Status().Description != "declined" {
		t.Errorf("status %q, want declined", op.Status().Description)
	}
	// One POST, answered 402 (a GET beside it is the pre-send snapshot
	// of the sales of this order).
	var posts []sdktrace.ReadOnlySpan
	for _, k := range children(all, op) {
		if k.Name() == "POST" {
			posts = append(posts, k)
		}
	}
	if len(posts) != 1 {
		t.Fatalf("under the operation: %d POST spans, want 1", len(posts))
	}
	if v, _ := attr(posts[0], "http.response.status_code"); v.AsInt64() != 402 {
		t.Errorf("POST status %d, want 402", v.AsInt64())
	}
	if n := r.counter(t, "pagpolar.client.operations", attribute.String("pagpolar.outcome", "failed"), attribute.String("pagpolar.operation.kind", "credit_card")); n != 1 {
		t.Errorf("operations{failed,credit_card} = %d, want 1", n)
	}
	r.noSecrets(t)
}
