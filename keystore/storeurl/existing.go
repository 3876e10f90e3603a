package storeurl

// OpenExisting and OpenReadOnly: the openers of operator tools, which
// never create a store.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"

	"github.com/pagpolar/pagpolar-go/internal/storeloc"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/redisstore"
	"github.com/pagpolar/pagpolar-go/keystore/sqlstore"
)

// ErrNoStore is wrapped by the errors of OpenExisting and OpenReadOnly
// when the URL names no existing PagPolar key store: no such file, no
// table, nothing under the Redis prefix, or a memory: store (which lives
// only inside the process that made it).
var ErrNoStore = errors.New("no PagPolar key store there")

// Reader is what OpenReadOnly returns: the reads of a keystore.Store.
type Reader interface {
	Get(ctx context.Context, operationID string) (keystore.Record, error)
	List(ctx context.Context, f keystore.Filter) ([]keystore.Record, error)
}

// OpenExisting opens the store rawURL names, as Open does, once it has
// checked (reading only) that the store exists; it never creates one. Its
// error wraps ErrNoStore when there is none.
func OpenExisting(ctx context.Context, rawURL string) (keystore.Store, func() error, error) {
	loc, err := storeloc.Parse(rawURL)
	if err != nil {
		return nil, nil, err
	}
	if err := exists(ctx, loc); err != nil {
		return nil, nil, err
	}
	return Open(ctx, rawURL)
}

// OpenReadOnly opens the existing store rawURL names for reading only. It
// never writes: no file, table, index or key is created, no migration runs,
// and it works under a read-only database role. SQLite is opened with
// mode=ro and query_only, or, when no process has the database open (no
// -wal file beside it), immutable, so that not even the -wal and -shm
// files are created; PostgreSQL in a session whose transactions are
// read-only (default_transaction_read_only); Redis through redisstore.New
// once the prefix's shard marker is known to exist, so New writes nothing.
//
// A read risks nothing on a store that may lose records, so the opt-outs
// of the durability checks are not needed: a Redis without an append-only
// file is read after one call of warn (nil: slog.Default's Warn) saying so.
//
// Its errors wrap ErrNoStore when there is no store, ErrBadURL for a bad
// URL and keystore.ErrUnavailable when the store does not answer.
func OpenReadOnly(ctx context.Context, rawURL string, warn func(msg string)) (Reader, func() error, error) {
	if warn == nil {
		warn = func(msg string) { slog.Default().Warn(msg) }
	}
	loc, err := storeloc.Parse(rawURL)
	if err != nil {
		return nil, nil, err
	}
	if err := exists(ctx, loc); err != nil {
		return nil, nil, err
	}
	switch loc.Scheme {
	case storeloc.SQLite, storeloc.Postgres:
		s, closeFn, err := openSQL(loc, sqlOptions{readOnly: true})
		if err != nil {
			return nil, nil, err
		}
		return s, closeFn, nil
	}
	log := storeloc.WarnLogger(loc.Name, "redisstore: AllowVolatile", warn)
	return openRedis(ctx, loc, redisstore.AllowVolatile(), redisstore.WithLogger(log))
}

func noStore(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrNoStore)
}

// exists checks, reading only, that loc holds a PagPolar key store.
func exists(ctx context.Context, loc storeloc.Location) error {
	table := sqlstore.DefaultTable
	if t, ok := loc.Param("table"); ok {
		table = t
	}
	switch loc.Scheme {
	case storeloc.Memory:
		return noStore("memory: holds no records here: a memory: store lives only inside the process that made it")
	case storeloc.SQLite:
		if _, err := os.Stat(loc.Path); errors.Is(err, fs.ErrNotExist) {
			return noStore("%s: the file does not exist (check the path; this command never creates a store)", loc.Name)
		} else if err != nil {
			return fmt.Errorf("storeurl: %s: %w: %w", loc.Name, keystore.ErrUnavailable, err)
		}
		db, err := sql.Open("sqlite", storeloc.SQLiteReadOnlyDSN(loc.Path))
		if err != nil {
			return fmt.Errorf("storeurl: %s: %w: %w", loc.Name, keystore.ErrUnavailable, err)
		}
		defer db.Close()
		var n int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", table).Scan(&n); err != nil {
			return fmt.Errorf("storeurl: %s: %w: %w", loc.Name, keystore.ErrUnavailable, err)
		}
		if n == 0 {
			return noStore("%s has no table %s (not a PagPolar key store, or ?table= names another)", loc.Name, table)
		}
		return nil
	case storeloc.Postgres:
		db, err := sql.Open("pgx", storeloc.PostgresReadOnlyDSN(loc.DSN))
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrBadURL, loc.Name, err)
		}
		defer db.Close()
		var found sql.NullString
		if err := db.QueryRowContext(ctx, "SELECT to_regclass($1)::text", table).Scan(&found); err != nil {
			return fmt.Errorf("storeurl: %s: %w: %w", loc.Name, keystore.ErrUnavailable, err)
		}
		if !found.Valid {
			return noStore("%s has no table %s (not a PagPolar key store, another database or search_path, or ?table= names another)", loc.Name, table)
		}
		return nil
	}
	prefix := redisstore.DefaultPrefix
	if p, ok := loc.Param("prefix"); ok {
		prefix = p
	}
	c := loc.Client()
	defer c.Close()
	// A prefix written by redisstore.New has shard 0's marker,
	// <prefix>:{<prefix>:0}:mark.
	k := prefix + ":{" + prefix + ":0}:mark"
	n, err := c.Exists(ctx, k).Result()
	if err != nil {
		return fmt.Errorf("storeurl: %s: %w: %w", loc.Name, keystore.ErrUnavailable, err)
	}
	if n > 0 {
		return nil
	}
	return noStore("%s has no key %s: nothing was ever stored under the prefix %q (another database number, or ?prefix= names another)", loc.Name, k, prefix)
}

// openSQLiteReadOnly returns a Store on a read-only database and the
// function that closes both.
func openSQLiteReadOnly(loc storeloc.Location, opts []sqlstore.Option) (*sqlstore.Store, func() error, error) {
	db, err := sql.Open("sqlite", storeloc.SQLiteReadOnlyDSN(loc.Path))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", keystore.ErrUnavailable, err)
	}
	s, err := sqlstore.New(db, append(opts, sqlstore.WithDialect(sqlstore.SQLite))...)
	if err != nil {
		_ = db.Close()
		return nil, nil, err
	}
	return s, func() error { return errors.Join(s.Close(), db.Close()) }, nil
}
