// Package sqlinbox keeps a webhook inbox (webhook.Store) in SQLite
// (modernc.org/sqlite, driver "sqlite") or PostgreSQL (pgx stdlib, driver
// "pgx"), in one table whose primary key is the dedupe key: the unique index
// the PagPolar page asks for.
//
// Create a Store with OpenSQLite, OpenPostgres or New (on the caller's own
// *sql.DB, so events can live beside the orders), run Migrate once, and Close
// it when done; the conventions follow keystore/sqlstore.
//
// Durability: a write has been committed when its method returns, and the
// Inbox answers 200 only then. SQLite is opened by OpenSQLite with
// journal_mode=WAL and synchronous=FULL (each commit is fsynced).
// PostgreSQL commits as its synchronous_commit setting says: on (the
// default), local, remote_write and remote_apply wait for the local WAL
// flush; off does not, and a crash of the server can then lose events
// already answered 200, which PagPolar will not send again. OpenPostgres and
// New therefore read synchronous_commit at start-up and refuse "off" with an
// error wrapping ErrAsyncCommit, unless the caller opts out by name with
// AllowAsyncCommit().
//
// One event at a time per sale or subscription holds across processes:
// SQLite runs each Claim as one statement under its single-writer lock;
// PostgreSQL takes a transaction-scoped advisory lock on the entity before
// checking that no other event of it is leased.
//
// Time is the database's (as webhook.Store requires): every statement reads
// the clock once, PostgreSQL's clock_timestamp() (microseconds) or SQLite's
// unixepoch('subsec') (milliseconds), and compares and sets lease expiry,
// due times and timestamps with it, so processes whose clocks disagree
// still agree on leases. Times are stored as microseconds since the Unix
// epoch. DeleteExpired's cut-off is the caller's.
package sqlinbox
