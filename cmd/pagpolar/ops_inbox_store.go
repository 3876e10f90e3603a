package main

// How pagpolar ops inbox opens a webhook inbox: the same URLs as the key
// store (internal/storeloc reads both), never creating one; the read
// commands open it read-only.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/storeloc"
	"github.com/pagpolar/pagpolar-go/webhook"
	"github.com/pagpolar/pagpolar-go/webhook/redisinbox"
	"github.com/pagpolar/pagpolar-go/webhook/sqlinbox"
)

// errNoInbox is matched by the errors of a URL that names no webhook inbox.
var errNoInbox = errors.New("no webhook inbox there")

func noInbox(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), errNoInbox)
}

// openInbox opens the existing inbox raw names. readOnly: for list, show
// and reap -dry-run, which write nothing (no file, table or key; SQLite
// immutable or mode=ro, PostgreSQL in read-only transactions), and accept a
// store whose durability check fails, after one warning (a read risks
// nothing). Otherwise (retry, reap) the store's own opt-outs are needed:
// ?volatile=1, ?async_commit=1.
func openInbox(ctx context.Context, raw string, readOnly bool, warn func(string)) (webhook.Store, func() error, error) {
	loc, err := storeloc.Parse(raw)
	if err != nil {
		return nil, nil, err
	}
	if err := loc.Reject("a webhook inbox", "wait", "wait_timeout"); err != nil {
		return nil, nil, err
	}
	var opts []sqlinbox.Option
	if t, ok := loc.Param("table"); ok {
		opts = append(opts, sqlinbox.WithTable(t))
	}
	table := sqlinbox.DefaultTable
	if t, ok := loc.Param("table"); ok {
		table = t
	}
	switch loc.Scheme {
	case storeloc.Memory:
		return nil, nil, noInbox("memory: holds no events here: a memory inbox lives only inside the process that made it")
	case storeloc.SQLite:
		if _, err := os.Stat(loc.Path); errors.Is(err, fs.ErrNotExist) {
			return nil, nil, noInbox("%s: the file does not exist (check the path; pagpolar ops never creates a store)", loc.Name)
		}
		db, err := sql.Open("sqlite", storeloc.SQLiteReadOnlyDSN(loc.Path))
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w: %w", loc.Name, webhook.ErrUnavailable, err)
		}
		if err := sqlTableExists(ctx, db, loc.Name, table, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?"); err != nil {
			_ = db.Close()
			return nil, nil, err
		}
		if readOnly {
			s, err := sqlinbox.New(db, append(opts, sqlinbox.WithDialect(sqlinbox.SQLite))...)
			if err != nil {
				_ = db.Close()
				return nil, nil, fmt.Errorf("%w: %s: %w", errBadStoreURL, loc.Name, err)
			}
			return s, func() error { return errors.Join(s.Close(), db.Close()) }, nil
		}
		_ = db.Close()
		if v, ok := loc.Param("busy_timeout"); ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: %s: busy_timeout=%q: %v", errBadStoreURL, loc.Name, v, err)
			}
			opts = append(opts, sqlinbox.WithBusyTimeout(d))
		}
		s, err := sqlinbox.OpenSQLite(loc.Path, opts...)
		if err != nil {
			return nil, nil, err
		}
		return s, s.Close, nil
	case storeloc.Postgres:
		dsn := loc.DSN
		async, err := loc.Bool("async_commit")
		if err != nil {
			return nil, nil, err
		}
		if readOnly {
			dsn, async = storeloc.PostgresReadOnlyDSN(dsn), true // a read risks nothing
		}
		if async {
			opts = append(opts, sqlinbox.AllowAsyncCommit())
		}
		s, err := sqlinbox.OpenPostgres(dsn, opts...)
		if err != nil {
			if errors.Is(err, sqlinbox.ErrAsyncCommit) {
				err = fmt.Errorf("%s: %w (?async_commit=1 in the URL accepts it)", loc.Name, err)
			}
			return nil, nil, err
		}
		db, err := sql.Open("pgx", storeloc.PostgresReadOnlyDSN(loc.DSN))
		if err == nil {
			err = sqlTableExists(ctx, db, loc.Name, table, "SELECT count(*) FROM (SELECT to_regclass($1) AS t) r WHERE t IS NOT NULL")
			_ = db.Close()
		}
		if err != nil {
			_ = s.Close()
			return nil, nil, err
		}
		return s, s.Close, nil
	}
	prefix := redisinbox.DefaultPrefix
	ropts := []redisinbox.Option{}
	if p, ok := loc.Param("prefix"); ok {
		prefix = p
		ropts = append(ropts, redisinbox.WithPrefix(p))
	}
	volatile, err := loc.Bool("volatile")
	if err != nil {
		return nil, nil, err
	}
	if readOnly {
		volatile = true
		ropts = append(ropts, redisinbox.WithLogger(storeloc.WarnLogger(loc.Name, "redisinbox: AllowVolatile", warn)))
	}
	if volatile {
		ropts = append(ropts, redisinbox.AllowVolatile())
	}
	client := loc.Client()
	// An inbox's keys share the hash tag {<prefix>}: one slot, so one
	// EXISTS answers for all of them. An inbox whose every event was reaped
	// holds no key, and looks like none.
	keys := []string{"{" + prefix + "}:due", "{" + prefix + "}:leases"}
	for _, st := range []webhook.State{webhook.StateReceived, webhook.StateProcessing, webhook.StateProcessed, webhook.StateError, webhook.StateDead} {
		keys = append(keys, "{"+prefix+"}:ix:"+string(st))
	}
	n, err := client.Exists(ctx, keys...).Result()
	if err != nil {
		_ = client.Close()
		return nil, nil, fmt.Errorf("%s: %w: %w", loc.Name, webhook.ErrUnavailable, err)
	}
	if n == 0 {
		_ = client.Close()
		return nil, nil, noInbox("%s holds no webhook event under the prefix %q (nothing was stored there, another database number, ?prefix= names another, or every event was reaped)", loc.Name, prefix)
	}
	s, err := redisinbox.New(client, ropts...)
	if err != nil {
		_ = client.Close()
		if errors.Is(err, redisinbox.ErrVolatile) {
			err = fmt.Errorf("%s: %w (?volatile=1 in the URL accepts it)", loc.Name, err)
		}
		return nil, nil, err
	}
	return s, s.Close, nil
}

// sqlTableExists runs query (one parameter: the table; one count back) and
// says so when the table is not there.
func sqlTableExists(ctx context.Context, db *sql.DB, name, table, query string) error {
	var n int
	if err := db.QueryRowContext(ctx, query, table).Scan(&n); err != nil {
		return fmt.Errorf("%s: %w: %w", name, webhook.ErrUnavailable, err)
	}
	if n == 0 {
		return noInbox("%s has no table %s (not a webhook inbox, or ?table= names another)", name, table)
	}
	return nil
}
