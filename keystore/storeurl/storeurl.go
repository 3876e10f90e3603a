package storeurl

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/storeloc"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/redisstore"
	"github.com/pagpolar/pagpolar-go/keystore/sqlstore"
)

// ErrBadURL is wrapped by every error about the URL itself (as opposed to
// the store it names being unreachable, which wraps keystore.ErrUnavailable).
var ErrBadURL = storeloc.ErrBadURL

// Forms lists the accepted URL forms, for usage messages.
const Forms = storeloc.Forms

// Open opens the store rawURL names and returns it with the function that
// closes it (and whatever Open opened for it). ctx bounds the schema
// migration and the first contact with the store.
func Open(ctx context.Context, rawURL string) (keystore.Store, func() error, error) {
	loc, err := storeloc.Parse(rawURL)
	if err != nil {
		return nil, nil, err
	}
	switch loc.Scheme {
	case storeloc.Memory:
		return keystore.NewMemory(), func() error { return nil }, nil
	case storeloc.SQLite, storeloc.Postgres:
		s, _, err := openSQL(loc, sqlOptions{})
		if err != nil {
			return nil, nil, err
		}
		return migrated(ctx, s, loc.Name)
	}
	return openRedis(ctx, loc)
}

// sqlOptions are how OpenReadOnly changes the SQL stores' opening.
type sqlOptions struct {
	readOnly bool
}

// openSQL opens a SQLite or PostgreSQL location, without migrating, and
// returns the function that closes what it opened.
func openSQL(loc storeloc.Location, so sqlOptions) (*sqlstore.Store, func() error, error) {
	var opts []sqlstore.Option
	if t, ok := loc.Param("table"); ok {
		opts = append(opts, sqlstore.WithTable(t))
	}
	if note, ok := loc.Param("declared_new"); ok {
		opts = append(opts, sqlstore.DeclaredNew(note))
	}
	if v, ok := loc.Param("busy_timeout"); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: sqlite busy_timeout %q: %v", ErrBadURL, v, err)
		}
		opts = append(opts, sqlstore.WithBusyTimeout(d))
	}
	async, err := loc.Bool("async_commit")
	if err != nil {
		return nil, nil, err
	}
	if async || so.readOnly { // a read risks nothing on a session that commits asynchronously
		opts = append(opts, sqlstore.AllowAsyncCommit())
	}
	var s *sqlstore.Store
	var closeFn func() error
	switch {
	case loc.Scheme == storeloc.SQLite && so.readOnly:
		s, closeFn, err = openSQLiteReadOnly(loc, opts)
	case loc.Scheme == storeloc.SQLite:
		s, err = sqlstore.OpenSQLite(loc.Path, opts...)
	case so.readOnly:
		s, err = sqlstore.OpenPostgres(storeloc.PostgresReadOnlyDSN(loc.DSN), opts...)
	default:
		s, err = sqlstore.OpenPostgres(loc.DSN, opts...)
	}
	if err != nil {
		return nil, nil, badOrUnavailable(loc.Name, err)
	}
	if closeFn == nil {
		closeFn = s.Close
	}
	return s, closeFn, nil
}

// badOrUnavailable wraps an error from opening a store: unreachable stays
// ErrUnavailable, anything else is a problem with the URL.
func badOrUnavailable(name string, err error) error {
	if errors.Is(err, ErrBadURL) {
		return err
	}
	if errors.Is(err, keystore.ErrUnavailable) || errors.Is(err, redisstore.ErrVolatile) || errors.Is(err, sqlstore.ErrAsyncCommit) {
		return fmt.Errorf("storeurl: %s: %w", name, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrBadURL, name, err)
}

func migrated(ctx context.Context, s *sqlstore.Store, name string) (keystore.Store, func() error, error) {
	if err := s.Migrate(ctx); err != nil {
		_ = s.Close()
		return nil, nil, fmt.Errorf("storeurl: %s: %w", name, err)
	}
	if err := s.Ping(ctx); err != nil {
		_ = s.Close()
		return nil, nil, fmt.Errorf("storeurl: %s: %w", name, err)
	}
	return s, s.Close, nil
}

// redisOptions turns the store's own parameters into redisstore options.
func redisOptions(loc storeloc.Location) ([]redisstore.Option, error) {
	var opts []redisstore.Option
	if p, ok := loc.Param("prefix"); ok {
		opts = append(opts, redisstore.WithPrefix(p))
	}
	volatile, err := loc.Bool("volatile")
	if err != nil {
		return nil, err
	}
	if volatile {
		opts = append(opts, redisstore.AllowVolatile())
	}
	if note, ok := loc.Param("declared_new"); ok {
		opts = append(opts, redisstore.DeclaredNew(note))
	}
	wait, hasWait := loc.Param("wait")
	timeout, hasTimeout := loc.Param("wait_timeout")
	switch {
	case hasWait:
		n, err := strconv.Atoi(wait)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%w: %s: wait=%q: want a number of replicas >= 1", ErrBadURL, loc.Name, wait)
		}
		d := 500 * time.Millisecond
		if hasTimeout {
			if d, err = time.ParseDuration(timeout); err != nil {
				return nil, fmt.Errorf("%w: %s: wait_timeout=%q: %v", ErrBadURL, loc.Name, timeout, err)
			}
		}
		opts = append(opts, redisstore.WithWait(n, d))
	case hasTimeout:
		return nil, fmt.Errorf("%w: %s: wait_timeout without wait", ErrBadURL, loc.Name)
	}
	return opts, nil
}

// openRedis opens a Redis or Cluster location with redisstore.New and
// extra options of the caller's.
func openRedis(ctx context.Context, loc storeloc.Location, extra ...redisstore.Option) (keystore.Store, func() error, error) {
	opts, err := redisOptions(loc)
	if err != nil {
		return nil, nil, err
	}
	client := loc.Client()
	// New checks the options first, then reaches Redis (within its own
	// bound; on a Cluster needing only some of its masters).
	s, err := redisstore.New(client, append(opts, extra...)...)
	if err != nil {
		_ = client.Close()
		return nil, nil, badOrUnavailable(loc.Name, err)
	}
	if loc.Scheme == storeloc.Redis {
		// The Ping after New honours ctx.
		if err := client.Ping(ctx).Err(); err != nil {
			_ = client.Close()
			return nil, nil, fmt.Errorf("storeurl: %s: %w: %w", loc.Name, keystore.ErrUnavailable, err)
		}
	}
	return s, client.Close, nil
}
