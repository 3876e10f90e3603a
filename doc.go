// Package pagpolar is a client for the PagPolar payment API that promises
// at most one successful effect per business operation (a PIX, boleto or
// card charge, a subscription, a plan change, a refund), and a known outcome
// for every operation — or an explicit ErrOutcomeUnknown that a later call
// settles. Where it cannot be sure (an answer in a shape it cannot verify),
// it says "unknown"; it never concludes "not found", "failed" or "not
// executed" from a guess, and never resends on one.
//
// # How
//
// Every money-moving call is a business operation with a stable ID (derived
// from the external reference for charges, given by you for refunds and plan
// changes). Before the first byte is sent, the operation's Idempotency-Key,
// a fingerprint of its params and its state are written to a durable key
// store (package keystore). The client then:
//
//   - resends with the same key only when the answer proves nothing was
//     processed (429, the API's own 503, a connection that never opened),
//     after backoff and within a client-wide retry budget;
//   - after an ambiguous attempt (500/502/504, a lost answer, a timeout, a
//     409 for a request still running), looks the effect up by
//     external_reference (or the sale's refunds, or the subscription), every
//     page of it, attributes what it finds to this operation only on proof
//     (attribute.go), and resends only when the lookup says "not found" and
//     the original request must have ended (the API's 60 s in-processing
//     window has passed);
//   - checks every 2xx against the request (a replay returns the first
//     answer for the key, whatever was sent now);
//   - lets one worker at a time act on an operation (a lease with a fencing
//     token in the store), so goroutines and processes sharing a store never
//     send the same operation concurrently.
//
// # Two answers: the effect and its decision
//
// An operation call answers whether its effect exists: a nil error (it
// does), or an error in one of three branches — ErrFailed (definitely not:
// a new attempt needs a new operation ID), ErrNotExecuted (nothing was
// processed: call again with the same ID) or ErrOutcomeUnknown (it may:
// call again later with the same ID). OutcomeOf names the branch. A
// succeeded result also carries what the API decided about the effect, its
// Decision (pending, in analysis, paid, requested, scheduled, ...): a card
// answered pending is an answer. Decisions move forward with webhook events
// (SettleFromWebhook), Client.Refresh and Client.AwaitDecision.
//
// # The engine, file by file
//
// In the order of SAFETY.md's steps:
//
//   - validate.go, fingerprint.go: params checked before anything is saved;
//     the keyed fingerprint of what the operation sends (rule 10).
//   - idempotency.go, recordid.go, record.go, encode.go: the record written
//     before the first send (rules 1, 2), its ID and meta.
//   - lease.go: one worker per operation (rule 9).
//   - send.go, client.go, retry.go: one attempt and when to send again with
//     the same key (rules 2, 4, 6).
//   - classify.go: what an answer says (rules 3–5), a pure function.
//   - lookup.go, lookup_fresh.go, read.go, attribute.go, claim.go, effect.go,
//     shapes.go, servertime.go, settle.go: settling an ambiguous attempt by
//     lookup (lookup_fresh.go: whether a list answer is current; read.go:
//     the GETs and every page of a list), attribution on proof only, claims
//     so that no two operations settle on one effect (rules 5, 7, 11, 12).
//   - outcome.go, decision.go, errors.go: the outcome recorded and returned,
//     the effect's decision (rule 3), the three error branches.
//   - refresh.go, webhook_settle.go, webhook_decision.go: decisions that come
//     later, and unknown operations settled by webhook events.
//   - resume.go: settling what a crash left, never charging (rule 8).
//   - scrub.go, redact.go: no secret or personal value in errors, logs or
//     stores; the token removed from errors and headers as a whole value.
//
// Calling a method again with the same operation ID is always safe: a
// settled operation is answered from the store without a request; an
// unsettled one is settled first. Client.Resume and Client.ResumeAll settle
// operations left by a crash without ever charging.
//
// The rules are written out in SAFETY.md and the API's behaviour in
// CONTRACT.md (both in the repository's docs folder); each rule has a test
// named after it.
//
// # Limits
//
// A server that keeps processing past its in-processing window, a lookup that
// lags longer than RetryPolicy.SettleDelay, and two hosts with separate
// stores and random keys can still produce a second effect; see README.md,
// which also lists what the SDK assumes about the API's shapes and what it
// does when an assumption is wrong.
package pagpolar
