package sqlinbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"

	"github.com/pagpolar/pagpolar-go/webhook"
)

// Dialect names the SQL database behind a Store.
type Dialect string

const (
	// SQLite is modernc.org/sqlite (driver name "sqlite").
	SQLite Dialect = "sqlite"
	// Postgres is PostgreSQL through github.com/jackc/pgx/v5/stdlib (driver name "pgx").
	Postgres Dialect = "postgres"
)

// DefaultTable is the table a Store uses unless WithTable says otherwise.
const DefaultTable = "pagpolar_webhook_inbox"

// Store is a webhook.Store on a SQL database. It is safe for concurrent use
// by many goroutines and processes sharing the database.
type Store struct {
	dialect Dialect
	table   string
	rdb     *sql.DB // reads
	wdb     *sql.DB // writes (the same as rdb unless OpenSQLite split them)
	owned   []*sql.DB
	q       queries

	closeOnce sync.Once
	closeErr  error
}

var _ webhook.Store = (*Store)(nil)

type config struct {
	table       string
	dialect     Dialect
	busyTimeout time.Duration
	allowAsync  bool
}

// Option configures a Store.
type Option func(*config) error

var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,47}$`)

// WithTable sets the table name (default DefaultTable): a letter or an
// underscore followed by letters, digits and underscores, at most 48 in all.
// Index names are derived from it.
func WithTable(name string) Option {
	return func(c *config) error {
		if !tableName.MatchString(name) {
			return fmt.Errorf("sqlinbox: table name %q: want a letter or _ then up to 47 letters, digits or _", name)
		}
		c.table = name
		return nil
	}
}

// WithDialect names the database when New cannot tell it from the driver (a
// wrapped or instrumented driver).
func WithDialect(d Dialect) Option {
	return func(c *config) error {
		if d != SQLite && d != Postgres {
			return fmt.Errorf("sqlinbox: dialect %q: want %q or %q", d, SQLite, Postgres)
		}
		c.dialect = d
		return nil
	}
}

// WithBusyTimeout sets how long a SQLite write opened by OpenSQLite waits for
// another process's lock before failing (default 5 s: below the Inbox's
// persist timeout, so a delivery is answered 503 rather than too late).
func WithBusyTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return fmt.Errorf("sqlinbox: busy timeout %v: want >= 0", d)
		}
		c.busyTimeout = d
		return nil
	}
}

func newConfig(opts []Option) (config, error) {
	c := config{table: DefaultTable, busyTimeout: 5 * time.Second}
	for _, o := range opts {
		if err := o(&c); err != nil {
			return c, err
		}
	}
	return c, nil
}

// New returns a Store on the caller's database; the caller keeps ownership
// of db (Close does not close it). The dialect is detected from the driver or
// given with WithDialect. For SQLite, open db with a DSN from SQLiteDSN so
// every connection waits on locks and fsyncs each commit. For PostgreSQL it
// reads synchronous_commit (within 10 s) and refuses "off" unless
// AllowAsyncCommit() is given (see the package doc).
func New(db *sql.DB, opts ...Option) (*Store, error) {
	if db == nil {
		return nil, errors.New("sqlinbox: nil *sql.DB")
	}
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if c.dialect == "" {
		switch db.Driver().(type) {
		case *sqlite.Driver:
			c.dialect = SQLite
		case *stdlib.Driver:
			c.dialect = Postgres
		default:
			return nil, fmt.Errorf("sqlinbox: cannot tell the dialect of driver %T: use WithDialect", db.Driver())
		}
	}
	s := newStore(c, db, db)
	if err := s.checkDurable(c); err != nil {
		return nil, err
	}
	return s, nil
}

func newStore(c config, rdb, wdb *sql.DB) *Store {
	return &Store{dialect: c.dialect, table: c.table, rdb: rdb, wdb: wdb, q: buildQueries(c.dialect, c.table)}
}

// Dialect reports the database behind s.
func (s *Store) Dialect() Dialect { return s.dialect }

// Table reports the table s keeps events in.
func (s *Store) Table() string { return s.table }

// Migrate creates the table and its indexes if they do not exist. It is
// idempotent and safe to run from several processes at once.
func (s *Store) Migrate(ctx context.Context) error {
	for _, stmt := range schema(s.dialect, s.table) {
		if _, err := s.wdb.ExecContext(ctx, stmt); err != nil {
			if s.dialect == Postgres && isPGDuplicate(err) {
				// Two processes creating the table at once: IF NOT EXISTS is
				// not atomic in PostgreSQL's catalog, and the other one won.
				continue
			}
			return unavailable("migrate "+s.table, "", err)
		}
	}
	return nil
}

// Close closes the databases the Store opened itself (not one given to New).
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		for _, db := range s.owned {
			errs = append(errs, db.Close())
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

func unavailable(op, key string, err error) error {
	if key != "" {
		op += " " + key
	}
	return fmt.Errorf("%w: sqlinbox %s: %w", webhook.ErrUnavailable, op, err)
}

func checkCtx(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", webhook.ErrUnavailable, err)
	}
	return nil
}

func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

// beforeMicros converts an exclusive upper bound to microseconds so that
// "updated_at < result" keeps "UpdatedAt < t" for a t between two
// microseconds.
func beforeMicros(t time.Time) int64 {
	us := t.UnixMicro()
	if t.After(time.UnixMicro(us)) {
		us++
	}
	return us
}

func fromMicros(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}

// columns is the order every query selects and scan reads.
const columns = "dedupe_key, event, entity, envelope_id, payload, state, attempts, deliveries, last_error, " +
	"next_attempt_at, lease_owner, lease_token, lease_expires_at, received_at, updated_at"

type scanner interface{ Scan(dest ...any) error }

func scan(sc scanner) (webhook.Record, error) {
	return scanExtra(sc)
}

// scanNow scans a row followed by the database's clock (µs).
func scanNow(sc scanner) (webhook.Record, time.Time, error) {
	var now int64
	r, err := scanExtra(sc, &now)
	return r, fromMicros(now), err
}

func scanExtra(sc scanner, extra ...any) (webhook.Record, error) {
	var r webhook.Record
	var state string
	var next, leaseExp, received, updated int64
	dest := append([]any{&r.Key, &r.Event, &r.Entity, &r.EnvelopeID, &r.Payload, &state, &r.Attempts, &r.Deliveries,
		&r.LastError, &next, &r.LeaseOwner, &r.LeaseToken, &leaseExp, &received, &updated}, extra...)
	if err := sc.Scan(dest...); err != nil {
		return webhook.Record{}, err
	}
	r.State = webhook.State(state)
	r.NextAttemptAt, r.LeaseExpiresAt = fromMicros(next), fromMicros(leaseExp)
	r.ReceivedAt, r.UpdatedAt = fromMicros(received), fromMicros(updated)
	return r, nil
}

func scanAll(rows *sql.Rows) ([]webhook.Record, error) {
	defer rows.Close()
	var out []webhook.Record
	for rows.Next() {
		r, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func placeholders(from, n int) string {
	p := make([]string, n)
	for i := range p {
		p[i] = fmt.Sprintf("$%d", from+i)
	}
	return strings.Join(p, ", ")
}
