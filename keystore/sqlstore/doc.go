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
//	TABLE <table>_meta (name TEXT PRIMARY KEY, value TEXT)  the table's epoch (see Amnesia)
//
// One row of the table is the store's own marker (operation ID "\x01pagpolar-marker",
// kind "pagpolar:marker", a state that is none of keystore's): List, Get and
// DeleteExpired never return or remove it, and no caller can create it.
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
// PostgreSQL makes a COMMIT durable as synchronous_commit says. With "off"
// a commit returns before it reaches the disk and a server crash loses the
// last ones the Store acknowledged: Migrate (and the first Create of a
// Store that was not migrated) refuses such a session with ErrAsyncCommit
// unless AllowAsyncCommit is given. Remote durability (a standby that has
// every commit when it is promoted) needs synchronous_standby_names; with
// asynchronous standbys a failover can lose acknowledged commits, which the
// Store then detects as amnesia. Read from the primary, never from a
// lagging replica.
//
// # Bounded calls
//
// Every call returns within the call timeout (WithCallTimeout, default
// DefaultCallTimeout = 5 s) or by its context's deadline if that is
// earlier, with an error wrapping keystore.ErrUnavailable, whatever the
// database does:
//
//   - Get, List, Ping and the PostgreSQL writes run under a context with
//     that deadline: pgx and modernc.org/sqlite abandon the statement
//     (PostgreSQL: the connection is closed and dropped from the pool), so
//     a frozen or blackholed connection costs its call 5 s, not forever
//     (measured: Get and List on a blackholed connection end after 5.0 s).
//   - PostgreSQL batches: the writer sends one batch at a time while they
//     answer; a batch still running after 100 ms no longer holds the next
//     ones back (up to 4 at once, on other connections). A statement that
//     waits more than 250 ms for a row lock held by another session fails
//     the batch's transaction; the batch is sent again without it and that
//     statement is retried alone, until its own caller's deadline. One
//     locked row therefore delays its caller and, by at most 250 ms, the
//     writes batched with it; one dead connection delays the callers of its
//     batch until their deadline, nobody else (measured with 8 writers: the
//     others' p99 stayed 3–6 ms, max 110–260 ms).
//   - SQLite has one writer at a time: a write lock held by another process
//     holds up every write of the file, up to the busy timeout
//     (WithBusyTimeout, default 10 s); each caller still stops waiting at
//     its own deadline, and a write whose caller left is not applied. The
//     one exception is a DeleteExpired its batch has already begun (the
//     lock taken): its caller waits for that batch's COMMIT, so that the
//     count of removed records it returns is never short.
//
// A call that timed out may or may not have been committed, like any call
// whose reply was lost; the caller sends nothing on it.
//
// # Amnesia
//
// The Store tells "this record never existed" from "this table lost what
// it acknowledged" (keystore.AmnesiaGuard, SAFETY rule 13). Migrate writes
// the table's marker row, naming an epoch, and remembers the epoch in
// <table>_meta; every Store remembers the epoch and the last record it
// created. Create inserts only if, in the same statement (PostgreSQL) or
// batch transaction (SQLite), the marker is there, not marked lost, with
// the epoch the Store knows, and the Store's last record is still there
// (unless DeleteExpired's cut-off could have removed it). Otherwise the
// table is marked lost, for every process, and Create refuses with an
// error wrapping a *keystore.AmnesiaError until AcceptLoss; the other calls
// keep working, so that what survived can be settled by lookup. Detected:
//
//   - the table emptied (DELETE, TRUNCATE), dropped and created again, or a
//     database restored or recreated: by the running Stores at their next
//     Create, and by a Store started afterwards at Migrate (<table>_meta
//     remembers the epoch, unless it was emptied too);
//   - committed writes lost (a failover to a standby that had not received
//     them, a crash with synchronous_commit off, an older backup): by a
//     Store whose last record is among them, at its next Create;
//   - a SQLite file deleted or replaced under a running process (whose
//     open connections would go on writing the deleted file): at its next
//     write, which also marks the file now at the path lost.
//
// Not detected: a table (and <table>_meta) emptied while no Store that
// had used it was running, then migrated again: it looks like a new one.
//
// A database that cannot be reached, or an error from it, yields an error
// wrapping keystore.ErrUnavailable, so the client sends nothing. database/sql
// reconnects by itself: a database that comes back is used again without
// restarting the process.
//
// Retention is not the Store's business: run keystore.Reap periodically.
// On SQLite each DeleteExpired call is one write transaction, and every
// other writer of the file, in this process or another, waits for it (the
// busy handler, up to the busy timeout): keystore.Reap keeps those short
// (200 records) and pauses after each, so that live writes get the lock
// between batches.
package sqlstore
