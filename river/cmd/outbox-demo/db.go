package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	_ "modernc.org/sqlite"
)

// appDB is the shop's database (orders, customers, River's tables) as
// every process of the demo opens it.
type appDB struct {
	dialect string // "sqlite" or "postgres"
	dsn     string
	keysURL string // the SDK's key store (durable, shared)
}

func (a appDB) open() (*sql.DB, error) {
	if a.dialect == "sqlite" {
		db, err := sql.Open("sqlite", a.dsn)
		if err != nil {
			return nil, err
		}
		db.SetMaxOpenConns(1)
		return db, nil
	}
	return sql.Open("pgx", a.dsn)
}

func (a appDB) driver(db *sql.DB) riverdriver.Driver[*sql.Tx] {
	if a.dialect == "sqlite" {
		return riversqlite.New(db)
	}
	return riverdatabasesql.New(db)
}

// q rewrites ? placeholders for PostgreSQL.
func (a appDB) q(query string) string {
	if a.dialect == "sqlite" {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

const ordersDDL = `CREATE TABLE orders (
	id TEXT PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL, document TEXT NOT NULL, phone TEXT NOT NULL,
	card_token TEXT NOT NULL DEFAULT '', status TEXT NOT NULL DEFAULT 'awaiting_charge', sale_id TEXT, decision TEXT)`

// prepare makes the demo's database: a SQLite file in dir, or a schema of
// its own on the PostgreSQL server of store (dropped by the function
// returned). River's migrations, the orders table and the SDK's key store
// all live there.
func prepare(ctx context.Context, store, dir string) (appDB, func(), error) {
	if store == "" || store == "sqlite" {
		path := filepath.Join(dir, "app.db")
		a := appDB{dialect: "sqlite", dsn: "file:" + path + "?_pragma=busy_timeout(20000)&_pragma=journal_mode(WAL)&_txlock=immediate",
			keysURL: "sqlite:" + filepath.Join(dir, "keys.db")}
		return a, func() {}, a.migrate(ctx)
	}
	u, err := url.Parse(store)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return appDB{}, nil, fmt.Errorf("-store %q: want postgres://... (or empty for SQLite)", redact(store))
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	schema := "pagpolar_outbox_demo_" + hex.EncodeToString(b[:])
	admin, err := sql.Open("pgx", store)
	if err != nil {
		return appDB{}, nil, err
	}
	defer func() { _ = admin.Close() }()
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		return appDB{}, nil, fmt.Errorf("creating schema %s: %w", schema, err)
	}
	drop := func() {
		if db, err := sql.Open("pgx", store); err == nil {
			_, _ = db.ExecContext(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
			_ = db.Close()
		}
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	a := appDB{dialect: "postgres", dsn: u.String(), keysURL: u.String()}
	if err := a.migrate(ctx); err != nil {
		drop()
		return appDB{}, nil, err
	}
	return a, drop, nil
}

func (a appDB) migrate(ctx context.Context) error {
	db, err := a.open()
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	m, err := rivermigrate.New(a.driver(db), nil)
	if err != nil {
		return err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}
	_, err = db.ExecContext(ctx, ordersDDL)
	return err
}

func redact(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		u.User = url.User(u.User.Username())
		return u.String()
	}
	return dsn
}
