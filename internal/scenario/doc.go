// Package scenario hunts the next double charge: a property-based
// generator (pgregory.net/rapid) of worlds the SDK could meet, run
// through the root package's public API against pagpolartest, with the
// fake's ledger as the truth.
//
// A Scenario (scenario.go) draws, each part on its own and in any
// combination:
//
//   - how the API answers: any set of the fake's shapes
//     (pagpolartest.AllShapes) plus generated Mutations of each kind of
//     answer (edits.go): fields renamed, lookalikes beside them, removed,
//     numbers as strings and numeric strings as numbers, values in other
//     case, times as Unix seconds, without a zone or in another zone,
//     bodies wrapped, lists bare, paging markers without a next page,
//     totals that say more, list items compacted to their ID and status,
//     a field under its lookalike's name and value (offer_id: 3 for
//     offer_identifier); half of them change a field the SDK compares in
//     an answer a lookup reads, and only there; some edit the second
//     API host's answers only (a rolling deploy) or apply once a step
//     deploys the API's next version (DoDeploy), so that one kind of
//     answer carries a field under two names or spellings;
//   - the API's Date header (APIClock): shifted from the clock that
//     stamps created_at, stepping forward or back at some answer, two
//     hosts that disagree, missing on some answers; the API's own clock
//     stepping (DoAPIStep: its Date and the creation times it stamps
//     from then on, as an NTP correction on its servers would); and the
//     client hosts' clock (ClientSkew, DoClientStep);
//   - a cache in front (Cache): copies served despite no-cache with a
//     truthful Age, an unreadable Age or two Age headers, or without Age
//     once seconds old (only their Date tells them), or "Age: 0" on fresh
//     answers;
//   - faults per request (Fault, aimed at the step's money route or its
//     lookup): answers lost before or after the commit, 500/502/503/504
//     with and without the API's JSON, 429, the API's 503, slow
//     processing (409 to a resend meanwhile, or past the window), slow
//     500s, replicas behind, declines; answers cut mid-body (Truncate);
//     callers that give up right after the first answer (GiveUp);
//   - actors: 1–3 clients on one store, steps run concurrently, restarts,
//     Resume and ResumeAll at any moment, webhook deliveries late,
//     duplicated and out of order, PIX then boleto for one order, two
//     refunds of one sale and two plan changes of one subscription,
//     customers paying later, time passing (past the window, past the 24 h
//     replay), the store forgetting everything or its newest record, and
//     the operator accepting the loss.
//
// Each scenario first draws its swarm (draw.go): the step actions and
// money faults its steps may pick, each kept with even odds (one scenario
// in four keeps all). A world whose API fails in two ways meets those two
// often, so a bug that needs one route, one fault and a second process
// turns up in tens of scenarios instead of thousands.
//
// Run executes a scenario on a fresh fake and Check (invariants.go) is the
// specification it is held to: no operation with two successful effects;
// no effect under a key no operation has; a success names an effect of
// that operation that took effect; a "failed" or "not executed" never
// while the operation's effect exists or is still on its way; the store's
// final word agrees with the ledger; no call returns long after its
// context ended; no goroutine of the SDK is left once a run is over.
// "Unknown" breaks nothing — it is the honest answer to ambiguity — and
// is counted as a liveness figure, with the operations still unknown
// after a final ResumeAll by a fresh client. Violations under SAFETY.md's
// documented exposures (processing past the in-processing mark, a lookup
// lagging behind a write by more than the settle delay) are counted, not
// failed. A documented exposure drawn for one of several concurrent steps
// on one reference exposes them all (faults match by route and reference).
//
// Time. Every party reads the fake's Clock. A client's waits (backoff,
// settle delays, windows) move that Clock forward instead of passing in
// real time while one step runs alone (hostClock), so a scenario costs
// milliseconds and does not depend on how busy the machine is; only
// concurrent steps and the HTTP attempt timeout wait in real time.
// Faults are matched per request in order and decided by the seed
// (WithDeterministicFaults).
//
// Budgets: go test runs 100 scenarios, 300 with PAGPOLAR_LONG=1 (CI's
// bounded hunt, about two minutes on the project's 2-core machine), 20
// with -short, and prints the figures; rapid
// prints the seed of a failure and shrinks it to a minimal scenario,
// printed in words and as Go source for a regression test:
//
//	go test ./internal/scenario -run TestScenarios -rapid.checks=5000
//	SCENARIO_DURATION=30m SCENARIO_KEEP_GOING=1 go test ./internal/scenario -run TestScenarios -rapid.checks=100000 -timeout 40m
//	go test ./internal/scenario -run TestScenarios -rapid.seed=N
package scenario
