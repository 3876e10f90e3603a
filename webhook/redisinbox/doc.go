// Package redisinbox keeps a webhook inbox (webhook.Store) in Redis, for
// fleets that already share one. It accepts any redis.UniversalClient: a
// single node, Sentinel (a failover client) or Cluster.
//
// # Layout
//
// Every key of a Store shares one Cluster hash tag, its prefix, so each write
// is one Lua script that changes a record and every index that lists it
// atomically, including the check that no other event of the same sale or
// subscription is leased:
//
//	{<prefix>}:rec:<dedupe key>   the event (hash)
//	{<prefix>}:due                events Claim could take, scored by the time they become due (µs)
//	{<prefix>}:leases             per entity, the lease last granted: "<expiry µs>|<dedupe key>"
//	{<prefix>}:ix:<state>         events in that state, scored by UpdatedAt (µs)
//
// The price of one hash tag is that a Store's whole inbox lives on one
// Cluster slot; webhook volumes are small enough for that.
//
// Time is Redis's (as webhook.Store requires): each script reads TIME and
// compares and sets leases, due times and timestamps with it, so processes
// whose clocks disagree still agree on leases. DeleteExpired's cut-off is
// the caller's.
//
// List and Due are each one read-only script, so they see the records as
// they stood at one instant: an event changing state meanwhile is listed
// once. Redis runs nothing else while a script runs, so List (which returns
// whole records, bodies included) is for pages of hundreds, not for
// dumping an inbox; Due leaves the bodies out.
//
// # Durability
//
// An event must be on disk before the delivery is answered 200, or a Redis
// restart loses it while PagPolar believes it was delivered (and will not
// send it again). Redis does not give that by default: run it with
// appendonly yes (appendfsync always for "no acknowledged event is ever
// lost"; everysec risks about one second of them on a power loss). New
// therefore refuses, with an error wrapping ErrVolatile, a Redis that
// reports appendonly no, or one whose setting it cannot read (CONFIG GET
// and INFO persistence both refused), on every master of a Cluster; pass
// AllowVolatile() to opt out by name, e.g. for a development Redis that
// keeps nothing. Replication is asynchronous: a failover can lose the last
// acknowledged writes.
//
// Network failures, timeouts and a cancelled context return errors wrapping
// webhook.ErrUnavailable (the Inbox then answers 503 and PagPolar resends).
// Scripts carry a nonce, so a script that go-redis resends after a lost
// reply returns its first result instead of applying twice.
//
// # Bounded calls and logging
//
// A call is bounded by its context, which the Inbox always gives a deadline
// (PersistTimeout for storing a delivery). go-redis honours that deadline
// while it waits for a connection, dials (≥ 9.2x dials DialerRetries = 5
// times, 100 ms apart, inside each command retry) and backs off, whatever
// the client's options; a read or write on an open connection honours it
// only with ContextTimeoutEnabled (otherwise it waits the client's
// ReadTimeout; the Inbox stops waiting for an insert at PersistTimeout
// anyway). NewFromURL builds its client to fail fast, with DialerRetries 1
// and ContextTimeoutEnabled; do the same for a client of your own.
//
// go-redis logs through one process-wide logger, by default to stderr.
// Importing this package routes it, once, at init, to slog.Default() at
// debug level (attribute logger=go-redis), as keystore/redisstore does; an
// application's own redis.SetLogger call in main replaces it.
package redisinbox
