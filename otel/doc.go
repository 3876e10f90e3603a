// Package pagpolarotel reports a pagpolar.Client's work to OpenTelemetry,
// through its API only (the application chooses the SDK and exporters).
//
//	client, err := pagpolar.NewClient(id, token,
//		pagpolarotel.Option(pagpolarotel.WithTracerProvider(tp), pagpolarotel.WithMeterProvider(mp)))
//
// Spans: one "pagpolar.operation" per money call (Pix, Boleto, CreditCard,
// Refunds.Create, Subscribe, ChangePlan), with one client span per HTTP
// attempt under it (HTTP client semantic conventions, named after the
// method), one "pagpolar.lookup" per settle lookup, whose reads are
// attempts under it, and one "pagpolar.store.<call>" per key-store call
// (pagpolar.store.create, .get, .acquire, .renew, .release, .update,
// .list), with its pagpolar.store.result; a store's failure
// (unavailable, amnesia, timeout) sets the span's status to Error, its
// ordinary answers (not_found, exists, lease_held, lease_lost, conflict)
// do not. The caller's context is the operation's parent, and
// each request carries the trace context (traceparent) to the API.
//
// Attributes never hold the token, card data, the customer's name, e-mail
// or document, nor the Idempotency-Key in the clear (its SHA-256, as
// pagpolar.idempotency_key.sha256); URLs lose their query.
//
// Metrics (names and units after the OpenTelemetry conventions):
//
//	pagpolar.client.operations       {operation}  by pagpolar.operation.kind, pagpolar.outcome
//	pagpolar.client.operation.duration  s         by pagpolar.operation.kind, pagpolar.outcome
//	pagpolar.client.unknown_outcomes {operation}  operations that ended with the outcome unknown
//	pagpolar.client.attempts         {attempt}    by pagpolar.cause ("" for a plain answer)
//	pagpolar.client.retries          {retry}      by pagpolar.cause
//	pagpolar.client.lookups          {lookup}     by pagpolar.lookup.found
//	http.client.request.duration     s            by http.request.method, http.response.status_code, server.address
//	pagpolar.client.store.duration   s            by pagpolar.store.call, pagpolar.store.result
//	pagpolar.webhook.events          {event}      by pagpolar.webhook.event, pagpolar.webhook.state (InboxOnOutcome)
//
// Attempts and retries carry the cause the Hook's events name
// (pagpolar.cause: "409", "429", "503", "dial", "trusted-not-found", ...).
package pagpolarotel
