package pagpolarotel

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/url"
	"strconv"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/webhook"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the spans and metrics.
const ScopeName = "github.com/pagpolar/pagpolar-go/otel"

// Attribute keys of the SDK's own (the others are OpenTelemetry's).
const (
	AttrOperationKind = attribute.Key("pagpolar.operation.kind")
	AttrOperationID   = attribute.Key("pagpolar.operation.id")
	AttrKeyHash       = attribute.Key("pagpolar.idempotency_key.sha256")
	AttrAttempts      = attribute.Key("pagpolar.attempts")
	AttrOutcome       = attribute.Key("pagpolar.outcome") // the record's state: succeeded, failed, not_executed, unknown, ...
	AttrSource        = attribute.Key("pagpolar.source")
	AttrDecision      = attribute.Key("pagpolar.decision")     // a succeeded operation's decision: pending, paid, requested, scheduled, ...
	AttrErrorBranch   = attribute.Key("pagpolar.error_branch") // a failed call's branch: failed, not_executed, unknown (pagpolar.OutcomeOf)
	AttrCause         = attribute.Key("pagpolar.cause")
	AttrFound         = attribute.Key("pagpolar.lookup.found")
	AttrStoreCall     = attribute.Key("pagpolar.store.call")   // the keystore.Store method: create, get, acquire, renew, release, update, list, delete_expired
	AttrStoreResult   = attribute.Key("pagpolar.store.result") // ok, or the store's answer: not_found, exists, lease_held, lease_lost, conflict, amnesia, unavailable, timeout, canceled, error
	AttrWebhookEvent  = attribute.Key("pagpolar.webhook.event")
	AttrWebhookState  = attribute.Key("pagpolar.webhook.state")
)

// Setting configures Option.
type Setting func(*config)

type config struct {
	tp   trace.TracerProvider
	mp   metric.MeterProvider
	prop propagation.TextMapPropagator
	next pagpolar.Hook
}

// WithTracerProvider sets the TracerProvider (default: otel's global one).
func WithTracerProvider(tp trace.TracerProvider) Setting { return func(c *config) { c.tp = tp } }

// WithMeterProvider sets the MeterProvider (default: otel's global one).
func WithMeterProvider(mp metric.MeterProvider) Setting { return func(c *config) { c.mp = mp } }

// WithPropagator sets how the trace context is written to each request
// (default: otel's global propagator, W3C Trace Context if none is set).
func WithPropagator(p propagation.TextMapPropagator) Setting { return func(c *config) { c.prop = p } }

// WithHook passes every Hook event on to h as well: Option takes the
// client's hook (pagpolar.WithHook) for the metrics.
func WithHook(h pagpolar.Hook) Setting { return func(c *config) { c.next = h } }

// Option is the client option that installs the instrumentation: an
// Observer for the spans and a Hook for the metrics. It replaces a hook set
// earlier with pagpolar.WithHook (pass it with WithHook instead).
func Option(settings ...Setting) pagpolar.Option {
	c := config{}
	for _, s := range settings {
		s(&c)
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.prop == nil {
		c.prop = otel.GetTextMapPropagator()
		if len(c.prop.Fields()) == 0 {
			c.prop = propagation.TraceContext{}
		}
	}
	o, err := newObserver(c)
	return func(cl *pagpolar.Client) error {
		if err != nil {
			return err
		}
		if err := pagpolar.WithObserver(o)(cl); err != nil {
			return err
		}
		return pagpolar.WithHook(o.hook)(cl)
	}
}

type observer struct {
	tracer   trace.Tracer
	prop     propagation.TextMapPropagator
	next     pagpolar.Hook
	ops      metric.Int64Counter
	opDur    metric.Float64Histogram
	unknown  metric.Int64Counter
	attempts metric.Int64Counter
	retries  metric.Int64Counter
	lookups  metric.Int64Counter
	httpDur  metric.Float64Histogram
	storeDur metric.Float64Histogram
}

func newObserver(c config) (*observer, error) {
	m := c.mp.Meter(ScopeName)
	o := &observer{tracer: c.tp.Tracer(ScopeName), prop: c.prop, next: c.next}
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	var err error
	o.ops, err = m.Int64Counter("pagpolar.client.operations", metric.WithUnit("{operation}"), metric.WithDescription("Money operations ended, by kind and outcome."))
	add(err)
	o.opDur, err = m.Float64Histogram("pagpolar.client.operation.duration", metric.WithUnit("s"), metric.WithDescription("Duration of money operations, from the record to the outcome."))
	add(err)
	o.unknown, err = m.Int64Counter("pagpolar.client.unknown_outcomes", metric.WithUnit("{operation}"), metric.WithDescription("Operations that ended with the outcome unknown (a later call settles them)."))
	add(err)
	o.attempts, err = m.Int64Counter("pagpolar.client.attempts", metric.WithUnit("{attempt}"), metric.WithDescription("Requests of money operations sent, by what their answer was classified as."))
	add(err)
	o.retries, err = m.Int64Counter("pagpolar.client.retries", metric.WithUnit("{retry}"), metric.WithDescription("Resends under the same key, by cause."))
	add(err)
	o.lookups, err = m.Int64Counter("pagpolar.client.lookups", metric.WithUnit("{lookup}"), metric.WithDescription("Settle lookups run, by whether they found the effect."))
	add(err)
	o.httpDur, err = m.Float64Histogram("http.client.request.duration", metric.WithUnit("s"), metric.WithDescription("Duration of HTTP client requests."))
	add(err)
	o.storeDur, err = m.Float64Histogram("pagpolar.client.store.duration", metric.WithUnit("s"), metric.WithDescription("Duration of key-store calls, by call and result."))
	add(err)
	return o, errors.Join(errs...)
}

// hook records the metrics of Hook events.
func (o *observer) hook(ctx context.Context, e pagpolar.Event) {
	switch e.Kind {
	case pagpolar.EventAttempt:
		o.attempts.Add(ctx, 1, metric.WithAttributes(AttrCause.String(e.Cause)))
	case pagpolar.EventRetry:
		o.retries.Add(ctx, 1, metric.WithAttributes(AttrCause.String(e.Cause)))
	case pagpolar.EventLookup:
		o.lookups.Add(ctx, 1, metric.WithAttributes(AttrFound.Bool(e.Found)))
	}
	if o.next != nil {
		o.next(ctx, e)
	}
}

// hashKey is the attribute form of an Idempotency-Key.
func hashKey(k string) string {
	s := sha256.Sum256([]byte(k))
	return hex.EncodeToString(s[:])
}

// Start implements pagpolar.Observer.
func (o *observer) Start(ctx context.Context, s pagpolar.Step) (context.Context, func(pagpolar.StepEnd)) {
	begun := time.Now()
	switch s.Kind {
	case pagpolar.StepOperation:
		kind := AttrOperationKind.String(s.OperationKind)
		ctx, span := o.tracer.Start(ctx, "pagpolar.operation", trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(kind, AttrOperationID.String(s.OperationID)))
		return ctx, func(e pagpolar.StepEnd) {
			outcome := e.State
			if outcome == "" {
				outcome = "error"
			}
			attrs := []attribute.KeyValue{AttrOutcome.String(outcome), AttrAttempts.Int(e.Attempts)}
			if e.Key != "" {
				attrs = append(attrs, AttrKeyHash.String(hashKey(e.Key)))
			}
			if e.Source != "" {
				attrs = append(attrs, AttrSource.String(string(e.Source)))
			}
			if e.Decision != "" {
				attrs = append(attrs, AttrDecision.String(string(e.Decision)))
			}
			if e.Outcome != "" {
				attrs = append(attrs, AttrErrorBranch.String(string(e.Outcome)))
			}
			span.SetAttributes(attrs...)
			if e.Err != nil {
				span.SetStatus(codes.Error, errorType(e.Err))
			}
			span.End()
			set := metric.WithAttributes(kind, AttrOutcome.String(outcome))
			o.ops.Add(ctx, 1, set)
			o.opDur.Record(ctx, time.Since(begun).Seconds(), set)
			if errors.Is(e.Err, pagpolar.ErrOutcomeUnknown) {
				o.unknown.Add(ctx, 1, metric.WithAttributes(kind))
			}
		}
	case pagpolar.StepLookup:
		ctx, span := o.tracer.Start(ctx, "pagpolar.lookup", trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(AttrOperationKind.String(s.OperationKind), AttrOperationID.String(s.OperationID)))
		return ctx, func(e pagpolar.StepEnd) {
			span.SetAttributes(AttrFound.Bool(e.Found))
			if e.Err != nil {
				span.SetStatus(codes.Error, errorType(e.Err))
			}
			span.End()
		}
	case pagpolar.StepStore:
		call := AttrStoreCall.String(s.StoreCall)
		ctx, span := o.tracer.Start(ctx, "pagpolar.store."+s.StoreCall, trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(call))
		return ctx, func(e pagpolar.StepEnd) {
			res, failed := storeResult(e.Err)
			span.SetAttributes(AttrStoreResult.String(res))
			if failed {
				span.SetStatus(codes.Error, res)
			}
			span.End()
			o.storeDur.Record(ctx, time.Since(begun).Seconds(), metric.WithAttributes(call, AttrStoreResult.String(res)))
		}
	case pagpolar.StepAttempt:
		host, port := serverOf(s.URL)
		attrs := []attribute.KeyValue{
			attribute.String("http.request.method", s.Method),
			attribute.String("server.address", host),
			attribute.Int("server.port", port),
			attribute.String("url.full", withoutQuery(s.URL)),
		}
		if s.Key != "" {
			attrs = append(attrs, AttrKeyHash.String(hashKey(s.Key)))
		}
		ctx, span := o.tracer.Start(ctx, s.Method, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
		if s.Header != nil {
			o.prop.Inject(ctx, s.Header)
		}
		return ctx, func(e pagpolar.StepEnd) {
			set := []attribute.KeyValue{attribute.String("http.request.method", s.Method), attribute.String("server.address", host)}
			if e.Status != 0 {
				span.SetAttributes(attribute.Int("http.response.status_code", e.Status))
				set = append(set, attribute.Int("http.response.status_code", e.Status))
			}
			switch {
			case e.Err != nil:
				et := errorType(e.Err)
				if et == "error" {
					et = "transport" // no answer: the connection failed or closed
				}
				span.SetAttributes(attribute.String("error.type", et))
				span.SetStatus(codes.Error, et)
				set = append(set, attribute.String("error.type", et))
			case e.Status >= 400:
				span.SetAttributes(attribute.String("error.type", strconv.Itoa(e.Status)))
				span.SetStatus(codes.Error, "")
				set = append(set, attribute.String("error.type", strconv.Itoa(e.Status)))
			}
			span.End()
			o.httpDur.Record(ctx, time.Since(begun).Seconds(), metric.WithAttributes(set...))
		}
	}
	return ctx, func(pagpolar.StepEnd) {}
}

// storeResult names a store call's answer, and whether it is a failure
// of the store (not_found, exists, lease_held, lease_lost and conflict
// are answers the client acts on).
func storeResult(err error) (string, bool) {
	switch {
	case err == nil:
		return "ok", false
	case errors.Is(err, keystore.ErrNotFound):
		return "not_found", false
	case errors.Is(err, keystore.ErrExists):
		return "exists", false
	case errors.Is(err, keystore.ErrLeaseHeld):
		return "lease_held", false
	case errors.Is(err, keystore.ErrLeaseLost):
		return "lease_lost", false
	case errors.Is(err, keystore.ErrConflict):
		return "conflict", false
	case errors.Is(err, keystore.ErrAmnesia):
		return "amnesia", true
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout", true
	case errors.Is(err, context.Canceled):
		return "canceled", true
	case errors.Is(err, keystore.ErrUnavailable):
		return "unavailable", true
	}
	return "error", true
}

// errorType names an error by its class, never by its text (which can
// quote what the API echoed).
func errorType(err error) string {
	var ue *pagpolar.OutcomeUnknownError
	var ae *pagpolar.APIError
	switch {
	case errors.As(err, &ue):
		return "outcome_unknown"
	case errors.Is(err, pagpolar.ErrDeclined):
		return "declined"
	case errors.As(err, &ae):
		return "http_" + strconv.Itoa(ae.StatusCode)
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "error"
}

func serverOf(u *url.URL) (string, int) {
	if u == nil {
		return "", 0
	}
	p, _ := strconv.Atoi(u.Port())
	if p == 0 {
		p = map[string]int{"http": 80, "https": 443}[u.Scheme]
	}
	return u.Hostname(), p
}

func withoutQuery(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := *u
	c.RawQuery, c.Fragment, c.User = "", "", nil
	return c.String()
}

// InboxOnOutcome returns a webhook.Config.OnOutcome that counts the
// Inbox's recorded outcomes as pagpolar.webhook.events, by event name and
// the state the event was left in (processed, error, dead, or received
// when handed back), then calls next (if not nil). Of the settings, it
// uses WithMeterProvider.
func InboxOnOutcome(next func(webhook.Record), settings ...Setting) (func(webhook.Record), error) {
	c := config{}
	for _, s := range settings {
		s(&c)
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	events, err := c.mp.Meter(ScopeName).Int64Counter("pagpolar.webhook.events", metric.WithUnit("{event}"),
		metric.WithDescription("Webhook events whose outcome the Inbox recorded, by event and state."))
	if err != nil {
		return nil, err
	}
	return func(r webhook.Record) {
		events.Add(context.Background(), 1, metric.WithAttributes(AttrWebhookEvent.String(r.Event), AttrWebhookState.String(string(r.State))))
		if next != nil {
			next(r)
		}
	}, nil
}
