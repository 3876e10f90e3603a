// Package apicheck checks a PagPolar API (staging) against the shapes the
// SDK assumes (internal/wire), and says how the SDK acts on what it finds.
//
// Run makes a short scripted set of real calls under a sandbox credential —
// a PIX, a boleto and a card charge; the lookups by external_reference;
// GET /sales/{id}; a partial refund of 1 centavo, one over what is left
// (refused) and the refund of the rest, and the refund list; a subscribe, two plan changes and GET
// /subscriptions/{id}; every money call repeated under the same key from a
// second client (replay header and body); a key in processing (a 409, when
// the API's timing allows it); a POST without a key (400, and a lookup by
// its reference for a sale it may have created anyway) — each with its
// own operation ID and a reference starting "pagpolar-check-<run>-". The
// money calls go through the SDK, with the answer to the first send
// withheld (the API processed it; the SDK saw a lost connection), so the
// SDK settles each one by its own lookup; the same calls repeated from a
// second client settle through the API's replay. What each path ended in
// (settled, or unknown and why) is the SDK's own decision, not a copy of it.
//
// Every answer is recorded raw and compared, field by field, with the shape
// internal/wire/wire.go assumes. The Report says, per assumed shape:
// confirmed, differs (with what was seen), absent, or not exercised; and how
// the SDK acted on the paths that depend on it; and whether the API kept
// each key to one effect (idempotency.one-effect). Every card sale the run
// made is refunded in full where the API allows it (the refund of the rest
// only after the over-refund was seen refused); Report.Notes names any that
// is not. Text built from answers is scrubbed of every token sent, the
// check's customer values and e-mail addresses (redact.go). It is meant to be run by
// `pagpolar check` or from a team's own integration tests:
//
//	rep, err := apicheck.Run(ctx, apicheck.Config{BaseURL: url, CredentialID: cred,
//		Token: pagpolar.StaticToken(tok), OfferID: offer, PlanID: plan, OtherPlanID: other,
//		CardToken: cardToken})
//	if err != nil { t.Fatal(err) }
//	if rep.ExitCode() != 0 { rep.WriteTable(os.Stderr) }
//
// It refuses a base URL that looks like production unless
// Config.AllowProduction is set (IsProductionURL), and one with user
// information, a query or a fragment. Report.ExitCode is the verdict
// `pagpolar check` exits with (ExitConfirmed … ExitUnknown).
package apicheck
