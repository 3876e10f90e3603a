// Package pagpolartest is an in-process fake of the PagPolar API, in the
// spirit of net/http/httptest, that fails on purpose.
//
// NewServer starts it on 127.0.0.1 for one test:
//
//	srv := pagpolartest.NewServer(t, pagpolartest.WithProcessingWindow(5*time.Second))
//	srv.Inject(pagpolartest.Fault{Route: "pix", Times: 1, Action: pagpolartest.FaultCommitThenDrop})
//	// ... point the client at srv.URL with srv.Token, charge ...
//	if d := srv.Ledger().Duplicates(pagpolartest.DefaultGroup); len(d) > 0 {
//		t.Fatalf("charged twice: %v", d)
//	}
//
// The fake serves the six money routes and the read routes of CONTRACT.md
// under "/v1", with bearer tokens mapped to credentials (two tokens of one
// credential share idempotency keys; another credential shares nothing).
// Keys behave exactly as documented, per credential, in the documented order
// of checks: authentication (401), rate limit (429, key not registered),
// validation (400, key not registered), then the key: in processing → 409
// with wire.MsgInProgress; finished 2xx within the replay window → the same
// status and body bytes with Idempotency-Replayed: true (the body is not
// compared); finished non-2xx → released; older than the window → new.
//
// Every shape, status and error code comes from internal/wire, where the
// ASSUMED ones are marked. The fake adds its own assumptions there too: the
// success statuses (201 for charges, subscribe and refunds, 200 for plan
// changes), 402 for a decline, 422 for a business rule, 413 above 1 MiB.
//
// Time is read from a Clock that tests Advance, so nothing sleeps through
// the 60 s in-processing mark or the 24 h replay window. WaitHolds lets a
// test wait until held requests are waiting on the Clock before it
// advances it.
//
// Faults (see Fault and FaultAction) reproduce, as a client sees them on a
// real network, every case SAFETY.md reasons about: answers lost after a
// commit, errors after a commit, requests dropped before processing,
// processing held past the mark, lookups lagging behind writes,
// intermediaries' HTML errors, 429/503 bursts and latency. The Ledger
// records every effect with the key that created it and every request with
// the fault applied, and answers the question the SDK's tests ask: which
// operations took effect more than once?
//
// The fake is as strict as the documented PIX request: every member of
// the documentation's example is required (the customer's name, e-mail,
// document and phone; document and phone may be ""), and a member it does
// not know is a 400 — so a client that drifts from the documented request
// finds out here, not in staging.
//
// WithShapes makes it answer in other plausible shapes (Shape: method
// spellings, list paging, time formats, error bodies, sparse objects), to
// prove a client fails safe when the assumed shapes are wrong;
// WithoutSubscriptionLookup removes the one assumed lookup route a real API
// may lack. WithDeterministicFaults decides each probabilistic fault by
// the seed (WithSeed), the order the request concerns and how many requests
// about it came before (not by arrival order), so a run can be reproduced.
//
// WithAsync makes it decide after answering, as acquirers with antifraud
// or batch refunds do (Async): card sales answered "pending" or
// "in_analysis" and decided later (Decide, or Async.DecideAfter on the
// Clock) with TRANSACTION_PAID or TRANSACTION_DECLINED; refunds answered
// "requested" and completed later (CompleteRefund, FailRefund); plan
// changes answered "scheduled" and applied at the next cycle
// (ApplyPlanChanges, Renew). Lookups, the Ledger and the events show each
// decision as it stands; the default stays synchronous.
//
// `pagpolar sim` (cmd/pagpolar) runs the same fake on a local port for
// tests written in other languages.
package pagpolartest
