package sqlstore

import (
	"fmt"
	"regexp"
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
const DefaultTable = "pagpolar_operations"

var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,47}$`)

func validTable(name string) error {
	if !tableName.MatchString(name) {
		return fmt.Errorf("sqlstore: table name %q: want a letter or _ then up to 47 letters, digits or _", name)
	}
	return nil
}

// schema returns the statements Migrate runs, in order. Every one is
// idempotent.
func schema(d Dialect, table string) []string {
	blob, bigint := "BYTEA", "BIGINT"
	if d == SQLite {
		blob, bigint = "BLOB", "INTEGER"
	}
	ddl := fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %[1]s (
	operation_id     TEXT NOT NULL PRIMARY KEY,
	idempotency_key  TEXT NOT NULL,
	kind             TEXT NOT NULL,
	fingerprint      TEXT NOT NULL,
	state            TEXT NOT NULL,
	version          %[2]s NOT NULL,
	attempts         %[2]s NOT NULL,
	first_sent_at    %[2]s,
	last_sent_at     %[2]s,
	result_ref       TEXT NOT NULL,
	result_data      %[3]s,
	error_text       TEXT NOT NULL,
	meta_data        %[3]s,
	lease_owner      TEXT NOT NULL,
	lease_token      %[2]s NOT NULL,
	lease_expires_at %[2]s NOT NULL,
	created_at       %[2]s NOT NULL,
	updated_at       %[2]s NOT NULL
)`, table, bigint, blob)
	return []string{
		ddl,
		fmt.Sprintf("CREATE INDEX IF NOT EXISTS %[1]s_state_updated ON %[1]s (state, updated_at)", table),
		fmt.Sprintf("CREATE INDEX IF NOT EXISTS %[1]s_updated ON %[1]s (updated_at)", table),
		fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (name TEXT NOT NULL PRIMARY KEY, value TEXT NOT NULL)", metaTable(table)),
	}
}

// metaTable is the table that remembers the records table's epoch, so that
// a records table emptied or recreated is not taken for a new one (see
// amnesia.go).
func metaTable(table string) string { return table + "_meta" }

// nowMillis is the database's clock as integer unix milliseconds (UTC).
// PostgreSQL: clock_timestamp(), the time of the call, not now(), which
// is frozen at the start of the transaction.
func nowMillis(d Dialect) string {
	if d == SQLite {
		return "CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER)"
	}
	return "floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
}

// prefixMatch is a condition "operation_id starts with the parameter",
// taking every character literally (LIKE would treat % and _ as wildcards,
// and SQLite's LIKE ignores ASCII case).
func prefixMatch(d Dialect, param string) string {
	if d == SQLite {
		return fmt.Sprintf("substr(operation_id, 1, length(%[1]s)) = %[1]s", param)
	}
	return fmt.Sprintf("left(operation_id, char_length(%[1]s)) = %[1]s", param)
}
