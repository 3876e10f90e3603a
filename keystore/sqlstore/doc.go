// Package sqlstore is a durable keystore.Store on database/sql, for SQLite
// (modernc.org/sqlite, pure Go: the embedded default) and PostgreSQL
// (github.com/jackc/pgx/v5/stdlib).
//
// Use OpenSQLite or OpenPostgres to let the Store own its database, or New
// to put the records in your own *sql.DB, beside your orders. Then call
// Migrate once (it is explicit and idempotent; nothing else touches the
// schema):
//
//	s, err := sqlstore.OpenSQLite("/var/lib/shop/pagpolar.db")
//	if err != nil { ... }
//	defer s.Close()
//	if err := s.Migrate(ctx); err != nil { ... }
//
// # Schema
//
// One table (default pagpolar_operations, see WithTable), one row per
// business operation. Times are integer unix milliseconds (UTC); those the
// store owns (lease expiry, created, updated) are computed by the database's
// clock: SQLite's unixepoch('subsec') (the host clock as SQLite sees it) and
// PostgreSQL's clock_timestamp() (not now(), which is frozen at the start of
// a transaction).
//
//	operation_id     TEXT PRIMARY KEY  stable business ID
//	idempotency_key  TEXT              the Idempotency-Key sent with every attempt
//	kind             TEXT              pix, boleto, credit_card, subscribe, plan_change, refund
//	fingerprint      TEXT              keyed fingerprint of the parameters
//	state            TEXT              pending, unknown, succeeded, failed, not_executed
//	version          BIGINT            compare-and-set version, 1 at creation
//	attempts         BIGINT            requests sent so far
//	first_sent_at    BIGINT NULL       ms; NULL until the first send
//	last_sent_at     BIGINT NULL       ms
//	result_ref       TEXT              sale / refund / subscription identifier
//	result_data      BLOB/BYTEA NULL   the JSON result of a settled operation
//	error_text       TEXT              one-line reason for failed / unknown
//	meta_data        BLOB/BYTEA NULL   engine-owned data (e.g. a refund snapshot)
//	lease_owner      TEXT              '' when no one holds the lease
//	lease_token      BIGINT            fencing token, +1 on every acquisition
//	lease_expires_at BIGINT            ms, database clock
//	created_at       BIGINT            ms, database clock
//	updated_at       BIGINT            ms, database clock
//
//	INDEX <table>_state_updated (state, updated_at)  List by state and age, DeleteExpired
//	INDEX <table>_updated (updated_at)               List by age
//
// The table holds no token, card data or personal document: the keystore
// Record has none (its fingerprint is a keyed HMAC; results hold
// identifiers, statuses and amounts).
//
// # Durability and concurrency
//
// SQLite: the database runs in WAL mode and every write transaction commits
// with synchronous=FULL, which fsyncs the WAL on each COMMIT; with the
// default NORMAL a power loss can undo the last commits, and the record
// written before a request is sent is exactly the one that must survive.
// SQLite allows one writer at a time and its busy handler is unfair, so
// concurrent callers do not each open a transaction: a single writer
// goroutine applies every queued write in one IMMEDIATE transaction (group
// commit), deciding each write's own answer inside it, and one fsync
// answers the whole batch. Several processes may share the file: their
// writers take turns on SQLite's lock, waiting up to the busy timeout
// (WithBusyTimeout). Get and List read through a separate pool.
//
// PostgreSQL: every write is one statement (INSERT … ON CONFLICT DO NOTHING,
// or an UPDATE whose WHERE clause is the compare-and-set: version, lease
// token and lease expiry by clock_timestamp()). PostgreSQL shares WAL
// flushes between concurrent commits, but each commit still costs a round
// trip and a backend wake-up; with pgx's driver, concurrent writes are
// therefore sent as one pipeline that runs as one implicit transaction (one
// round trip, one commit), each statement keeping its own answer, in
// operation ID order so that batches of several processes cannot deadlock.
// With another driver, or WithMaxBatch(1), each write is its own statement
// on the pool. A string PostgreSQL's TEXT refuses (invalid UTF-8, NUL) fails
// its own call before it can fail a batch.
//
// A database that cannot be reached, or an error from it, yields an error
// wrapping keystore.ErrUnavailable, so the client sends nothing. database/sql
// reconnects by itself: a database that comes back is used again without
// restarting the process.
//
// Retention is not the Store's business: run keystore.Reap periodically.
package sqlstore
