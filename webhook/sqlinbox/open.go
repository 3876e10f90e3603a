package sqlinbox

import (
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"time"
)

// SQLiteDSN returns the modernc.org/sqlite DSN OpenSQLite uses for the file
// at path, for callers that open the database themselves and pass it to New:
// WAL (reads beside the writer), synchronous=FULL (each commit fsynced, so a
// stored event survives a power loss) and busy_timeout (wait for another
// process's write lock instead of failing at once).
func SQLiteDSN(path string, busyTimeout time.Duration) string {
	return sqliteDSN(path, busyTimeout, "journal_mode(WAL)", "synchronous(FULL)")
}

func sqliteDSN(path string, busyTimeout time.Duration, pragmas ...string) string {
	v := url.Values{}
	v.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	for _, p := range pragmas {
		v.Add("_pragma", p)
	}
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + v.Encode()
}

// OpenSQLite opens (creating if needed) the SQLite file at path and returns a
// Store that owns it; Close closes it. Run Migrate before use.
//
// Writes go through one connection (SQLite has one writer at a time anyway,
// and this keeps writers in this process from waiting on each other's
// locks); reads use a small pool of query_only connections, which WAL lets
// run beside the writer.
func OpenSQLite(path string, opts ...Option) (*Store, error) {
	if path == "" {
		return nil, errors.New("sqlinbox: empty SQLite path")
	}
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if c.dialect != "" && c.dialect != SQLite {
		return nil, fmt.Errorf("sqlinbox: OpenSQLite with dialect %q", c.dialect)
	}
	c.dialect = SQLite
	wdb, err := sql.Open("sqlite", SQLiteDSN(path, c.busyTimeout))
	if err != nil {
		return nil, unavailable("open", path, err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxIdleTime(0)
	rdb, err := sql.Open("sqlite", sqliteDSN(path, c.busyTimeout, "query_only(1)"))
	if err != nil {
		_ = wdb.Close()
		return nil, unavailable("open", path, err)
	}
	readers := 2 * runtime.GOMAXPROCS(0)
	rdb.SetMaxOpenConns(readers)
	rdb.SetMaxIdleConns(readers)
	s := newStore(c, rdb, wdb)
	s.owned = []*sql.DB{wdb, rdb}
	return s, nil
}

// OpenPostgres opens a PostgreSQL database through pgx (a postgres:// URL or
// key=value pairs, as pgx reads them) and returns a Store that owns it; Close
// closes it. Run Migrate before use. It connects at once to read
// synchronous_commit (within 10 s), and refuses "off" unless
// AllowAsyncCommit() is given (see the package doc).
func OpenPostgres(dsn string, opts ...Option) (*Store, error) {
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if c.dialect != "" && c.dialect != Postgres {
		return nil, fmt.Errorf("sqlinbox: OpenPostgres with dialect %q", c.dialect)
	}
	c.dialect = Postgres
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		// pgx's parse errors quote the DSN with its password masked.
		return nil, fmt.Errorf("sqlinbox: PostgreSQL DSN: %w", err)
	}
	s := newStore(c, db, db)
	if err := s.checkDurable(c); err != nil {
		_ = db.Close()
		return nil, err
	}
	s.owned = []*sql.DB{db}
	return s, nil
}
