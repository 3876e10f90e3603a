package sqlstore

import (
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"runtime"
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
	s.migrateDSN = dsn("journal_mode(WAL)", "synchronous(FULL)")
	return s, nil
}
