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
// key: DefaultKey builds keys as the PagPolar page's table says. A
// SUBSCRIPTION_RENEWED without next_billing_at, which the table cannot key,
// is stored under FallbackKey (the event, the subscription and a hash of
// data) and answered 200, not 400. Status values in an event are the state
// at send time and can be older than what the application stored: see
// Ranking and the Current* helpers so an order never moves backwards.
//
// # Shutdown
//
// Shutdown lets running handlers finish. If its context ends first, the
// handlers' contexts are cancelled and each event whose handler returns (or
// had not started) is handed back, due at once, without counting the
// attempt (Outcome.NotAttempted): interrupted deploys never push an event
// towards dead. An attempt counts when the handler ran to an outcome, or
// when the process died under it (its lease then expires and the next claim
// is a new attempt).
//
// # Time
//
// Leases, due times and the records' timestamps follow the store's clock
// (the database's, Redis TIME), never the process's: a process whose clock
// is minutes off neither takes over an event another process is running nor
// holds one past its lease, and does not run retries early (SAFETY rule 12).
// Config.Clock times this process's own waits (polling, lease renewal,
// backoff lengths) and the retention cut-off.
//
// # Customer data and retention
//
// A delivery can carry the customer's name, e-mail and document. The Inbox
// stores the body sealed with AES-256-GCM under a key the application
// supplies (Config.PayloadKeys; each sealed body names its key's ID, so keys
// rotate: the first key seals, every key opens), bound to its dedupe key so
// it cannot be copied onto another record. Handlers get the body opened.
// Without keys, Config.PlaintextPayloads must say by name that bodies are
// stored as received. The rest of a record is stored in clear, because
// processing and operators need it: the dedupe key and event (they name
// the sale or subscription id), the entity, state, attempts, deliveries, the
// last error (keep personal data out of handler errors), the envelope id
// and times. That is what `pagpolar ops inbox list|show` shows; `show
// -payload` opens the body only with the keys in
// PAGPOLAR_WEBHOOK_PAYLOAD_KEYS, and otherwise says which key sealed it.
//
// Processed and dead events are removed once they have not changed for
// Config.Retention (default 30 days, at least MinRetention, 7 days), every
// hour while the Inbox runs, in batches of DefaultReapBatch with a pause
// between them, so the purge never holds the store for long; Reap,
// Inbox.Reap and `pagpolar ops inbox reap [-dry-run]` do it on demand.
// Received, processing and error events are never removed.
//
// # Stores
//
// MemoryStore here (tests only: a restart forgets every key), and the
// durable ones in the sqlinbox (SQLite, PostgreSQL) and redisinbox
// sub-packages. All pass the conformance suite in inboxtest. A durable
// store refuses at start-up a backend that can lose what it acknowledged (a
// Redis without an append-only file, PostgreSQL with synchronous_commit
// off) unless the caller opts out by name (redisinbox.AllowVolatile,
// sqlinbox.AllowAsyncCommit): an event answered 200 and then lost is never
// sent again.
package webhook
