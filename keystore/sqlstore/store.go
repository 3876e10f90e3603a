package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pagpolar/pagpolar-go/keystore"
	"modernc.org/sqlite"
)

// Store is a keystore.Store on a SQL database. Create one with New, OpenSQLite
// or OpenPostgres, run Migrate once, and Close it when done.
type Store struct {
	dialect    Dialect
	table      string
	db         *sql.DB // reads (and, for PostgreSQL, writes)
	wdb        *sql.DB // SQLite writes and Migrate; db unless OpenSQLite split them
	migrateDSN string  // OpenSQLite: Migrate opens its own connection (the writer keeps wdb's only one)
	owned      []*sql.DB
	q          queries

	w *writer // SQLite only: the group-commit writer

	callTimeout time.Duration
	allowAsync  bool
	durableOK   atomic.Bool // synchronous_commit was read and is not off
	part        part        // the table's marker as this Store knows it (amnesia.go)
	// identity is the SQLite file OpenSQLite opened; the writer checks that
	// the path still names it (see sqlite.go).
	identity *fileIdentity
	// hist is the table's history as last read (history.go); declareNew
	// the DeclaredNew option's note.
	hist       histCache
	declareNew string
	// side is the file beside a SQLite database (sidecar.go); nil for
	// PostgreSQL and a caller's *sql.DB.
	side *sidecar

	closeOnce sync.Once
	closeErr  error
}

var (
	_ keystore.Store         = (*Store)(nil)
	_ keystore.AmnesiaGuard  = (*Store)(nil)
	_ keystore.HistoryProver = (*Store)(nil)
)

// ErrClosed is returned by a Store's methods after Close.
var ErrClosed = errors.New("sqlstore: store closed")

type config struct {
	table       string
	dialect     Dialect
	busyTimeout time.Duration
	maxBatch    int
	callTimeout time.Duration
	allowAsync  bool
	declareNew  string
}

// Option configures a Store.
type Option func(*config) error

// WithTable sets the table name (default DefaultTable): a letter or an
// underscore followed by letters, digits and underscores, at most 48 in all.
// The index names are derived from it.
func WithTable(name string) Option {
	return func(c *config) error {
		if err := validTable(name); err != nil {
			return err
		}
		c.table = name
		return nil
	}
}

// WithDialect names the database when New cannot tell it from the driver
// (a wrapped or instrumented driver).
func WithDialect(d Dialect) Option {
	return func(c *config) error {
		if d != SQLite && d != Postgres {
			return fmt.Errorf("sqlstore: dialect %q: want %q or %q", d, SQLite, Postgres)
		}
		c.dialect = d
		return nil
	}
}

// WithBusyTimeout sets how long a SQLite write waits for a lock held by
// another connection or process before it fails with keystore.ErrUnavailable
// (default 10 s). Ignored for PostgreSQL.
func WithBusyTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("sqlstore: busy timeout %v: want >= 0", d)
		}
		c.busyTimeout = d
		return nil
	}
}

// WithMaxBatch caps how many writes one transaction commits together
// (default 256). 1 turns group commit off: for SQLite one commit, one fsync
// per write; for PostgreSQL each write is its own statement on the pool.
func WithMaxBatch(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("sqlstore: max batch %d: want >= 1", n)
		}
		c.maxBatch = n
		return nil
	}
}

func newConfig(opts []Option) (config, error) {
	c := config{table: DefaultTable, busyTimeout: 10 * time.Second, maxBatch: 256, callTimeout: DefaultCallTimeout}
	for _, o := range opts {
		if err := o(&c); err != nil {
			return c, err
		}
	}
	return c, nil
}

func isPGX(db *sql.DB) bool {
	_, ok := db.Driver().(*stdlib.Driver)
	return ok
}

func detectDialect(db *sql.DB) (Dialect, bool) {
	switch db.Driver().(type) {
	case *sqlite.Driver:
		return SQLite, true
	case *stdlib.Driver:
		return Postgres, true
	}
	return "", false
}

// New returns a Store on the caller's own database, so that the records can
// live beside the caller's orders. The caller keeps ownership of db: Close
// stops the Store (and its writer goroutine) but does not close db. The
// Store's writes are its own transactions: they cannot join one of the
// caller's.
//
// The dialect is detected from the driver (modernc.org/sqlite, pgx stdlib)
// or given with WithDialect. For SQLite, each write batch runs on one
// connection of db with PRAGMA synchronous=FULL and busy_timeout set on it
// (they stay set on that connection), and Migrate switches the database file
// to WAL; db must allow at least one connection besides those the caller
// keeps busy. For PostgreSQL through pgx, concurrent writes are pipelined on
// one connection of db at a time (see the package documentation).
func New(db *sql.DB, opts ...Option) (*Store, error) {
	if db == nil {
		return nil, errors.New("sqlstore: nil *sql.DB")
	}
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if c.dialect == "" {
		d, ok := detectDialect(db)
		if !ok {
			return nil, fmt.Errorf("sqlstore: cannot tell the dialect of driver %T: use WithDialect", db.Driver())
		}
		c.dialect = d
	}
	s := newStore(c, db)
	switch {
	case c.dialect == SQLite:
		s.w = startWriter(db, s.q, c, true, nil)
	case isPGX(db) && c.maxBatch > 1:
		s.startPGWriter(c)
	}
	return s, nil
}

func newStore(c config, db *sql.DB) *Store {
	return &Store{dialect: c.dialect, table: c.table, db: db, wdb: db, q: buildQueries(c.dialect, c.table),
		callTimeout: c.callTimeout, allowAsync: c.allowAsync, declareNew: c.declareNew}
}

// Dialect reports the database behind s.
func (s *Store) Dialect() Dialect { return s.dialect }

// Table reports the table s keeps its records in.
func (s *Store) Table() string { return s.table }

// Migrate creates the table, its indexes and <table>_meta if they do not
// exist, and writes the table's marker (see the package documentation,
// "Amnesia") in a new table or one without it. It is
// idempotent and safe to run from several processes at once; nothing else
// creates or changes the schema. For SQLite it also switches the database to
// WAL (a persistent property of the file). On PostgreSQL it refuses a
// session with synchronous_commit off (ErrAsyncCommit) unless
// AllowAsyncCommit was given. A table that lost its records since this Store
// last saw it (or whose marker is gone while <table>_meta remembers it) is
// marked lost, and Create refuses until AcceptLoss. Migrate runs under ctx
// alone (creating an index on a large table may take a while).
func (s *Store) Migrate(ctx context.Context) error {
	db := s.wdb
	if s.migrateDSN != "" {
		// The writer goroutine holds the file's one write connection between
		// batches; a second Migrate on a busy store would wait for it forever.
		mdb, err := sql.Open("sqlite", s.migrateDSN)
		if err != nil {
			return unavailable("migrate: open", err)
		}
		defer mdb.Close()
		mdb.SetMaxOpenConns(1)
		db = mdb
	}
	if s.dialect == SQLite {
		// WAL cannot be entered inside a transaction; it lets reads run
		// beside the single writer.
		var mode string
		if err := db.QueryRowContext(ctx, "PRAGMA journal_mode=WAL").Scan(&mode); err != nil {
			return unavailable("migrate: journal_mode", err)
		}
	}
	for _, stmt := range schema(s.dialect, s.table) {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			if s.dialect == Postgres && isPGUniqueViolation(err) {
				// Two processes creating the same table or index at once:
				// IF NOT EXISTS is not atomic in PostgreSQL's catalog. The
				// other one won; that is what we wanted.
				continue
			}
			return unavailable("migrate "+s.table, err)
		}
	}
	if err := s.checkDurable(ctx); err != nil {
		return err
	}
	if _, err := s.syncMarker(ctx, db, true); err != nil {
		return fmt.Errorf("sqlstore: migrate %s: %w", s.table, err)
	}
	return nil
}

// Close stops the SQLite writer after it has answered every queued write,
// and closes the databases the Store opened itself (not one given to New).
// Calls after Close return ErrClosed.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.w != nil {
			s.w.close()
		}
		if s.side != nil {
			s.side.close()
		}
		var errs []error
		for _, db := range s.owned {
			errs = append(errs, db.Close())
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// Ping checks that the database answers and the table exists, with an
// error wrapping keystore.ErrUnavailable otherwise.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	var n int
	err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM (SELECT 1 FROM "+s.table+" LIMIT 1) t").Scan(&n)
	if err != nil {
		return unavailable("ping", err)
	}
	return nil
}

// unavailable wraps a database error: the caller must send nothing. The
// driver's error stays visible to errors.Is/As (context.Canceled, *pgconn.PgError...).
func unavailable(op string, err error) error {
	return fmt.Errorf("%w: sqlstore %s: %w", keystore.ErrUnavailable, op, err)
}

func checkCtx(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", keystore.ErrUnavailable, err)
	}
	return nil
}
