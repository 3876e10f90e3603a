package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// OpenSQLite opens (creating if needed) the SQLite database file at path and
// returns a Store that owns it; Close closes it. Run Migrate before use.
//
// The file is opened twice: one connection for the group-commit writer, with
// journal_mode=WAL and synchronous=FULL (each COMMIT is fsynced: a record
// written before a request is sent survives a power loss, not only a crash
// of the process), and a small pool of query_only connections for Get and
// List, which WAL lets run beside the writer.
func OpenSQLite(path string, opts ...Option) (*Store, error) {
	if path == "" {
		return nil, errors.New("sqlstore: empty SQLite path")
	}
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if c.dialect != "" && c.dialect != SQLite {
		return nil, fmt.Errorf("sqlstore: OpenSQLite with dialect %q", c.dialect)
	}
	c.dialect = SQLite
	busy := fmt.Sprintf("busy_timeout(%d)", c.busyTimeout.Milliseconds())
	dsn := func(pragmas ...string) string {
		v := url.Values{}
		for _, p := range append([]string{busy}, pragmas...) {
			v.Add("_pragma", p)
		}
		return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + v.Encode()
	}
	wdb, err := sql.Open("sqlite", dsn("journal_mode(WAL)", "synchronous(FULL)"))
	if err != nil {
		return nil, unavailable("open "+path, err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxIdleTime(0)
	rdb, err := sql.Open("sqlite", dsn("query_only(1)"))
	if err != nil {
		_ = wdb.Close()
		return nil, unavailable("open "+path, err)
	}
	readers := 2 * runtime.GOMAXPROCS(0)
	rdb.SetMaxOpenConns(readers)
	rdb.SetMaxIdleConns(readers)

	s := newStore(c, rdb)
	s.owned = []*sql.DB{wdb, rdb}
	s.w = startWriter(wdb, s.q, c, false)
	s.wdb = wdb
	return s, nil
}

func (s *Store) selectRow(ctx context.Context, c *sql.Conn, id string) (row, bool, error) {
	r, err := scanRow(c.QueryRowContext(ctx, s.q.selectOne, id))
	if errors.Is(err, sql.ErrNoRows) {
		return row{}, false, nil
	}
	if err != nil {
		return row{}, false, unavailable("read "+id, err)
	}
	return r, true, nil
}

func (s *Store) liteCreate(ctx context.Context, rec keystore.Record, owner string, ttl time.Duration) (keystore.Record, error) {
	res := s.w.do(ctx, func(ctx context.Context, c *sql.Conn, now int64) (result, error) {
		cur, found, err := s.selectRow(ctx, c, rec.OperationID)
		if err != nil {
			return result{}, err
		}
		if found {
			return result{rec: cur.record(), err: fmt.Errorf("%w: %s", keystore.ErrExists, rec.OperationID)}, nil
		}
		r := newRow(rec, owner, ttl, now)
		if _, err := c.ExecContext(ctx, s.q.insert, r.values()...); err != nil {
			return result{}, unavailable("create "+rec.OperationID, err)
		}
		return result{rec: r.record()}, nil
	})
	return res.rec, res.err
}

// liteLease applies a lease decision and writes the lease columns if it
// changed them.
func (s *Store) liteLease(ctx context.Context, id string, decide func(cur row, now int64) (row, bool, error)) (keystore.Record, error) {
	res := s.w.do(ctx, func(ctx context.Context, c *sql.Conn, now int64) (result, error) {
		cur, found, err := s.selectRow(ctx, c, id)
		if err != nil {
			return result{}, err
		}
		if !found {
			return result{err: fmt.Errorf("%w: %s", keystore.ErrNotFound, id)}, nil
		}
		next, write, derr := decide(cur, now)
		if derr != nil {
			return result{rec: cur.record(), err: derr}, nil
		}
		if write {
			if _, err := c.ExecContext(ctx, s.q.writeLease, id, next.leaseOwner, next.leaseToken, next.leaseExpires); err != nil {
				return result{}, unavailable("lease "+id, err)
			}
		}
		return result{rec: next.record()}, nil
	})
	return res.rec, res.err
}

func (s *Store) liteUpdate(ctx context.Context, rec keystore.Record) (keystore.Record, error) {
	res := s.w.do(ctx, func(ctx context.Context, c *sql.Conn, now int64) (result, error) {
		cur, found, err := s.selectRow(ctx, c, rec.OperationID)
		if err != nil {
			return result{}, err
		}
		if !found {
			return result{err: fmt.Errorf("%w: %s", keystore.ErrNotFound, rec.OperationID)}, nil
		}
		next, derr := cur.update(rec, now)
		if derr != nil {
			return result{rec: cur.record(), err: derr}, nil
		}
		if _, err := c.ExecContext(ctx, s.q.writeUpdate, next.id, next.fingerprint, next.state, next.attempts,
			next.firstSent, next.lastSent, next.resultRef, nilIfEmpty(next.result), next.errText, nilIfEmpty(next.meta),
			next.version, next.updated); err != nil {
			return result{}, unavailable("update "+rec.OperationID, err)
		}
		return result{rec: next.record()}, nil
	})
	return res.rec, res.err
}

func (s *Store) liteDeleteExpired(ctx context.Context, before int64, limit int) (int, error) {
	res := s.w.do(ctx, func(ctx context.Context, c *sql.Conn, _ int64) (result, error) {
		r, err := c.ExecContext(ctx, s.q.deleteExpired, before, int64(limit))
		if err != nil {
			return result{}, unavailable("delete expired", err)
		}
		n, err := r.RowsAffected()
		if err != nil {
			return result{}, unavailable("delete expired", err)
		}
		return result{n: int(n)}, nil
	})
	return res.n, res.err
}
