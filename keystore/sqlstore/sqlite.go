package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"runtime"
	"sync"

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
	s.identity = &fileIdentity{path: path}
	s.side = &sidecar{path: sidecarPath(path, s.table)}
	s.w = startWriter(wdb, s.q, c, false, s.checkFile)
	s.w.stamp, s.w.stamped = s.stamp, s.stamped
	s.wdb = wdb
	s.migrateDSN = dsn("journal_mode(WAL)", "synchronous(FULL)")
	return s, nil
}

// fileIdentity is the SQLite file a Store opened. A file deleted or
// replaced under a running process (a new file at the same path, a restore)
// keeps being written through the connections already open, which still
// point at the old one: those records reach nobody. The writer checks,
// before each batch, that the path still names the file it writes.
type fileIdentity struct {
	path string
	mu   sync.Mutex
	info os.FileInfo // nil until the file first exists
}

// checkFile is the writer's check: nil while the path names the file the
// Store writes. When it names another file (or none), the file now at the
// path is marked lost (its schema created if it has none), the Store's
// read connections are dropped so that reads go to it, and the batch fails
// with an error wrapping an AmnesiaError.
func (s *Store) checkFile(ctx context.Context) error {
	f := s.identity
	f.mu.Lock()
	defer f.mu.Unlock()
	now, err := os.Stat(f.path)
	switch {
	case f.info == nil && err != nil:
		return nil // created by the first connection
	case f.info == nil:
		f.info = now
		return nil
	case err == nil && os.SameFile(f.info, now):
		return nil
	}
	why := fmt.Sprintf("the database file %s was deleted or replaced while this process had it open, so the records it held are gone for every other process", f.path)
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout)
	defer cancel()
	if err := s.markReplaced(ctx, why); err != nil {
		return fmt.Errorf("%w: sqlstore: %s, and marking the new file lost failed: %w", keystore.ErrUnavailable, why, err)
	}
	// Reads must see the file at the path from now on: no pooled
	// connection to the old one.
	s.db.SetMaxIdleConns(0)
	if info, err := os.Stat(f.path); err == nil {
		f.info = info
	}
	return s.amnesiaErr(row{}, why)
}

// markReplaced marks the file now at the path lost, creating its schema
// (and the file) if needed, so that every process using it refuses Create
// until the loss is accepted.
func (s *Store) markReplaced(ctx context.Context, why string) error {
	db, done, err := s.markerDB()
	if err != nil {
		return err
	}
	defer done()
	for _, stmt := range schema(s.dialect, s.table) {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return err
		}
	}
	now, err := dbNow(ctx, db, s.dialect)
	if err != nil {
		return err
	}
	m, found, err := readMarker(ctx, db, s.q)
	if err != nil {
		return err
	}
	if !found {
		if _, err := db.ExecContext(ctx, s.q.insertMark, markerID, newEpoch(), "lost", why, now); err != nil {
			return err
		}
	} else if m.state == "ok" {
		if _, err := db.ExecContext(ctx, s.q.loseMark, markerID, m.key, why, now); err != nil {
			return err
		}
	}
	m, _, err = readMarker(ctx, db, s.q)
	if err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, s.q.initMeta, m.key); err != nil {
		return err
	}
	s.part.learn(m.key, now)
	return nil
}
