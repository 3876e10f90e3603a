// Package webhook receives PagPolar's webhooks safely: it authenticates each
// delivery, stores it durably, answers 200 well inside PagPolar's 10 s limit,
// and then runs the application's function for the event once per dedupe key,
// on a bounded worker pool, one event at a time per sale or subscription.
//
// It follows the flow of the PagPolar page "Processar eventos sem duplicar"
// and the Asaas inbox states:
//
//	check Authorization ──wrong──► 401, nothing stored
//	  │ body over the limit ► 413; not an envelope ► 400
//	  │ test event (and not accepted) ► 200, dropped; empty data ► 200, ignored
//	  ▼
//	store the event under its dedupe key (unique) ──fails──► 503: PagPolar resends
//	  ▼
//	200 ── later, on a worker ──►  received ─► processing (lease) ─► processed
//	                                   ▲              │
//	                                   └── error ◄────┘ (backoff) ─► dead after MaxAttempts
//
// A delivery whose key is already stored is acknowledged with 200 and not run
// again if the event was processed; an event in error, or one whose lease
// was left to expire by a crashed process, is resumed. Events left by a
// crash are resumed when an Inbox starts. Every outcome is kept in the Store
// and can be listed (by state) and retried by an operator.
//
// The envelope id changes on every delivery attempt, so it is never a dedupe
// key: DefaultKey builds keys as the PagPolar page's table says. Status values
// in an event are the state at send time and can be older than what the
// application stored: see Ranking and the Current* helpers so an order never
// moves backwards.
//
// Stores: MemoryStore here (tests only: a restart forgets every key), and the
// durable ones in the sqlinbox (SQLite, PostgreSQL) and redisinbox
// sub-packages. All pass the conformance suite in inboxtest.
package webhook
