// Package inboxtest is the conformance suite every webhook.Store passes
// unchanged: the memory store, the SQL stores (SQLite and PostgreSQL) and
// the Redis store.
//
// Stores keep time by their own clock (database now, Redis TIME), so tests
// that need a lease to expire use short real TTLs and wait, with a bound,
// until the store itself reports it expired (Due lists it); times the store
// sets are compared with this process's clock within a tolerance, and with
// each other exactly. Stores must keep at least millisecond precision.
//
// Two cases run Inboxes on the store whose clocks are ten minutes off in
// either direction: one must not take over a live lease, and a lease taken
// by a process whose clock is ahead must still expire on time.
package inboxtest
