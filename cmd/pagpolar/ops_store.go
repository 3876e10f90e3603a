package main

// The interim storeOpener of pagpolar ops. Replace interimOpener with the
// stores' own read-only constructors once they exist (see storeOpener);
// this file then goes.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/redisstore"
	"github.com/pagpolar/pagpolar-go/keystore/sqlstore"
	"github.com/pagpolar/pagpolar-go/keystore/storeurl"
	"github.com/redis/go-redis/v9"
)

// errBadStoreURL is wrapped by errors about the store URL itself.
var errBadStoreURL = storeurl.ErrBadURL

// interimOpener is pagpolar ops' storeOpener until the stores have
// read-only constructors of their own (storeurl.OpenReadOnly and
// storeurl.OpenExisting: see the lead's note in the report of issue 13).
// It checks, with reads only, that the store and its records exist, and
// then opens SQLite and PostgreSQL without migrating (SQLite with mode=ro
// and query_only, PostgreSQL in read-only transactions); Redis is opened
// with redisstore.New once its <prefix>:meta key is known to exist, so
// New's HSETNX of the shard count changes nothing.
//
// One side effect remains, and is SQLite's: a reader of a WAL database
// needs its -wal and -shm files and creates them (empty) when they are
// missing, e.g. after the last writer closed cleanly; the database file
// itself is not written (TestOpsReadCommandsNeverWrite compares it byte
// for byte). immutable=1 would avoid them but read wrong data beside a live
// writer.
type interimOpener struct{}

// storeLocation is what a store URL names.
type storeLocation struct {
	scheme string // memory, sqlite, postgres, redis
	path   string // sqlite
	table  string // sqlite, postgres
	dsn    string // postgres: without table=
	prefix string // redis
	redis  *redis.Options
	name   string // for messages, without a password
}

func locateStore(raw string) (storeLocation, error) {
	scheme, rest, ok := strings.Cut(raw, ":")
	if !ok || scheme == "" {
		return storeLocation{}, fmt.Errorf("%w: %q has no scheme; want one of %s", errBadStoreURL, redactURL(raw), storeurl.Forms)
	}
	loc := storeLocation{scheme: strings.ToLower(scheme), table: sqlstore.DefaultTable, prefix: redisstore.DefaultPrefix, name: redactURL(raw)}
	switch loc.scheme {
	case "memory":
		return loc, nil
	case "sqlite":
		p, query, _ := strings.Cut(rest, "?")
		if strings.HasPrefix(p, "///") {
			p = p[2:]
		} else if strings.HasPrefix(p, "//") {
			return loc, fmt.Errorf("%w: sqlite:%s: a host is not allowed; use sqlite:PATH or sqlite:///ABS/PATH", errBadStoreURL, p)
		}
		path, err := url.PathUnescape(p)
		if err != nil || path == "" {
			return loc, fmt.Errorf("%w: sqlite: needs a file path, e.g. sqlite:/var/lib/shop/pagpolar.db", errBadStoreURL)
		}
		q, err := url.ParseQuery(query)
		if err != nil {
			return loc, fmt.Errorf("%w: sqlite query %q: %v", errBadStoreURL, query, err)
		}
		if t := q.Get("table"); t != "" {
			loc.table = t
		}
		loc.path, loc.name = path, "sqlite:"+path
		return loc, nil
	case "postgres", "postgresql":
		u, err := url.Parse(raw)
		if err != nil {
			return loc, fmt.Errorf("%w: %s: not a URL", errBadStoreURL, redactURL(raw))
		}
		q := u.Query()
		if t := q.Get("table"); t != "" {
			loc.table = t
		}
		q.Del("table")
		u.RawQuery = q.Encode()
		loc.scheme, loc.dsn, loc.name = "postgres", u.String(), u.Redacted()
		return loc, nil
	case "redis", "rediss":
		u, err := url.Parse(raw)
		if err != nil {
			return loc, fmt.Errorf("%w: %s: not a URL", errBadStoreURL, redactURL(raw))
		}
		q := u.Query()
		if p := q.Get("prefix"); p != "" {
			loc.prefix = p
		}
		// The store's own parameters are storeurl's (it opens the store
		// once the prefix is known to exist); go-redis refuses them.
		for _, k := range []string{"prefix", "volatile", "wait", "wait_timeout"} {
			q.Del(k)
		}
		u.RawQuery = q.Encode()
		opts, err := redis.ParseURL(u.String())
		if err != nil {
			return loc, fmt.Errorf("%w: %s: %v", errBadStoreURL, u.Redacted(), err)
		}
		opts.DialerRetries, opts.ContextTimeoutEnabled = 1, true
		loc.scheme, loc.redis, loc.name = "redis", opts, u.Redacted()
		return loc, nil
	}
	return loc, fmt.Errorf("%w: unknown scheme %q; want one of %s", errBadStoreURL, scheme, storeurl.Forms)
}

// exists checks, reading only, that loc holds a PagPolar key store.
func (loc storeLocation) exists(ctx context.Context) error {
	switch loc.scheme {
	case "memory":
		return noStore("memory: holds no records here: a memory: store lives only inside the process that made it")
	case "sqlite":
		if _, err := os.Stat(loc.path); errors.Is(err, fs.ErrNotExist) {
			return noStore("%s: the file does not exist (check the path; pagpolar ops never creates a store)", loc.name)
		} else if err != nil {
			return fmt.Errorf("%s: %w: %w", loc.name, keystore.ErrUnavailable, err)
		}
		db, err := sql.Open("sqlite", loc.sqliteReadOnlyDSN())
		if err != nil {
			return fmt.Errorf("%s: %w: %w", loc.name, keystore.ErrUnavailable, err)
		}
		defer db.Close()
		var n int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", loc.table).Scan(&n); err != nil {
			return fmt.Errorf("%s: %w: %w", loc.name, keystore.ErrUnavailable, err)
		}
		if n == 0 {
			return noStore("%s has no table %s (not a PagPolar key store, or ?table= names another)", loc.name, loc.table)
		}
		return nil
	case "postgres":
		db, err := sql.Open("pgx", loc.postgresReadOnlyDSN())
		if err != nil {
			return fmt.Errorf("%w: %s: %v", errBadStoreURL, loc.name, err)
		}
		defer db.Close()
		var found sql.NullString
		if err := db.QueryRowContext(ctx, "SELECT to_regclass($1)::text", loc.table).Scan(&found); err != nil {
			return fmt.Errorf("%s: %w: %w", loc.name, keystore.ErrUnavailable, err)
		}
		if !found.Valid {
			return noStore("%s has no table %s (not a PagPolar key store, another database or search_path, or ?table= names another)", loc.name, loc.table)
		}
		return nil
	case "redis":
		c := redis.NewClient(loc.redis)
		defer c.Close()
		// A prefix written by redisstore.New has shard 0's marker (layout
		// 2: <prefix>:{<prefix>:0}:mark; layout 1: <prefix>:{0}:mark) and,
		// for layout 1, <prefix>:meta. One key at a time: they live in
		// different Cluster slots.
		for _, k := range []string{loc.prefix + ":{" + loc.prefix + ":0}:mark", loc.prefix + ":meta", loc.prefix + ":{0}:mark"} {
			n, err := c.Exists(ctx, k).Result()
			if err != nil {
				return fmt.Errorf("%s: %w: %w", loc.name, keystore.ErrUnavailable, err)
			}
			if n > 0 {
				return nil
			}
		}
		return noStore("%s has no key %s:{%s:0}:mark or %s:meta: nothing was ever stored under the prefix %q (another database number, or ?prefix= names another)", loc.name, loc.prefix, loc.prefix, loc.prefix, loc.prefix)
	}
	return fmt.Errorf("%w: %s", errBadStoreURL, loc.name)
}

func (loc storeLocation) sqliteReadOnlyDSN() string {
	return "file:" + (&url.URL{Path: loc.path}).EscapedPath() + "?mode=ro&_pragma=query_only(1)&_pragma=busy_timeout(5000)"
}

// postgresReadOnlyDSN sets default_transaction_read_only, a run-time
// parameter pgx passes on: every statement of the session is read-only.
func (loc storeLocation) postgresReadOnlyDSN() string {
	sep := "?"
	if strings.Contains(loc.dsn, "?") {
		sep = "&"
	}
	return loc.dsn + sep + "default_transaction_read_only=on"
}

func (interimOpener) OpenReadOnly(ctx context.Context, raw string) (recordReader, func() error, error) {
	loc, err := locateStore(raw)
	if err != nil {
		return nil, nil, err
	}
	if err := loc.exists(ctx); err != nil {
		return nil, nil, err
	}
	switch loc.scheme {
	case "sqlite":
		db, err := sql.Open("sqlite", loc.sqliteReadOnlyDSN())
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w: %w", loc.name, keystore.ErrUnavailable, err)
		}
		s, err := sqlstore.New(db, sqlstore.WithDialect(sqlstore.SQLite), sqlstore.WithTable(loc.table))
		if err != nil {
			_ = db.Close()
			return nil, nil, fmt.Errorf("%w: %s: %w", errBadStoreURL, loc.name, err)
		}
		return s, func() error { return errors.Join(s.Close(), db.Close()) }, nil
	case "postgres":
		s, err := sqlstore.OpenPostgres(loc.postgresReadOnlyDSN(), sqlstore.WithTable(loc.table))
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %s: %w", errBadStoreURL, loc.name, err)
		}
		return s, s.Close, nil
	}
	return storeurl.Open(ctx, raw) // redis: its meta key exists, New writes nothing
}

func (interimOpener) OpenWritable(ctx context.Context, raw string) (keystore.Store, func() error, error) {
	loc, err := locateStore(raw)
	if err != nil {
		return nil, nil, err
	}
	if err := loc.exists(ctx); err != nil {
		return nil, nil, err
	}
	return storeurl.Open(ctx, raw)
}
