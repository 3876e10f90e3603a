package sqlstore

import (
	"fmt"
	"strings"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// queries holds the SQL text of one Store, built once from its dialect and
// table name (validated, so it is safe to splice in).
type queries struct {
	dialect Dialect
	table   string

	selectOne     string // $1 id
	deleteExpired string // $1 before (ms), $2 limit

	// SQLite: the batch's clock and its per-row writes (positional ?).
	now        string
	insert     string // every column
	writeLease string // lease_owner, lease_token, lease_expires_at, id
	writeData  string // Update's columns, version, updated_at, id

	// PostgreSQL: single-statement compare-and-set writes by clock_timestamp().
	selectNow string // $1 id → columns, database now (ms)
	pgCreate  string
	pgAcquire string // $1 id, $2 owner, $3 ttl ms
	pgRenew   string // $1 id, $2 token, $3 ttl ms
	pgRelease string // $1 id, $2 token
	pgUpdate  string // $1 id, $2..$10 mutable, $11 version, $12 token
}

const terminalStates = "('" + string(keystore.StateSucceeded) + "', '" + string(keystore.StateFailed) + "')"

func buildQueries(d Dialect, table string) queries {
	t := table
	q := queries{
		dialect:   d,
		table:     t,
		selectOne: fmt.Sprintf("SELECT %s FROM %s WHERE operation_id = $1", columns, t),
		deleteExpired: fmt.Sprintf("DELETE FROM %[1]s WHERE operation_id IN (SELECT operation_id FROM %[1]s "+
			"WHERE state IN %[2]s AND updated_at < $1 ORDER BY updated_at LIMIT $2)", t, terminalStates),
	}
	if d == SQLite {
		q.now = "SELECT " + nowMillis(d)
		q.insert = fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", t, columns, qmarks(18))
		q.writeLease = fmt.Sprintf("UPDATE %s SET lease_owner = ?, lease_token = ?, lease_expires_at = ? WHERE operation_id = ?", t)
		q.writeData = fmt.Sprintf("UPDATE %s SET fingerprint = ?, state = ?, attempts = ?, first_sent_at = ?, "+
			"last_sent_at = ?, result_ref = ?, result_data = ?, error_text = ?, meta_data = ?, "+
			"version = ?, updated_at = ? WHERE operation_id = ?", t)
		return q
	}
	with := "WITH c AS (SELECT " + nowMillis(d) + " AS ms) "
	q.selectNow = fmt.Sprintf("SELECT %s, %s FROM %s WHERE operation_id = $1", columns, nowMillis(d), t)
	// VALUES lets PostgreSQL infer each parameter's type from its column.
	q.pgCreate = with + fmt.Sprintf("INSERT INTO %s (%s) VALUES ($1, $2, $3, $4, $5, 1, $6, $7, $8, $9, $10, $11, $12, "+
		"$13, 1, (SELECT ms FROM c) + $14, (SELECT ms FROM c), (SELECT ms FROM c)) "+
		"ON CONFLICT (operation_id) DO NOTHING RETURNING %s", t, columns, columns)
	q.pgAcquire = with + fmt.Sprintf("UPDATE %s SET lease_owner = $2, lease_token = lease_token + 1, "+
		"lease_expires_at = c.ms + $3 FROM c WHERE operation_id = $1 "+
		"AND (lease_owner = '' OR lease_owner = $2 OR lease_expires_at <= c.ms) RETURNING %s", t, columns)
	q.pgRenew = with + fmt.Sprintf("UPDATE %s SET lease_expires_at = c.ms + $3 FROM c "+
		"WHERE operation_id = $1 AND lease_token = $2 AND lease_expires_at > c.ms RETURNING %s", t, columns)
	q.pgRelease = with + fmt.Sprintf("UPDATE %s SET lease_owner = '', lease_expires_at = c.ms FROM c "+
		"WHERE operation_id = $1 AND lease_token = $2", t)
	q.pgUpdate = with + fmt.Sprintf("UPDATE %s SET fingerprint = $2, state = $3, attempts = $4, first_sent_at = $5, "+
		"last_sent_at = $6, result_ref = $7, result_data = $8, error_text = $9, meta_data = $10, "+
		"version = version + 1, updated_at = c.ms FROM c WHERE operation_id = $1 AND version = $11 "+
		"AND lease_token = $12 AND lease_owner <> '' AND lease_expires_at > c.ms "+
		"AND (state NOT IN %s OR state = $3) RETURNING %s", t, terminalStates, columns)
	return q
}

// list builds the List query for f.
func (q *queries) list(f keystore.Filter, limit int) (string, []any) {
	var (
		where []string
		args  []any
	)
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if len(f.States) > 0 {
		ps := make([]string, len(f.States))
		for i, s := range f.States {
			ps[i] = arg(string(s))
		}
		where = append(where, "state IN ("+strings.Join(ps, ", ")+")")
	}
	if !f.UpdatedBefore.IsZero() {
		where = append(where, "updated_at < "+arg(beforeMillis(f.UpdatedBefore)))
	}
	if f.Prefix != "" {
		where = append(where, prefixMatch(q.dialect, arg(f.Prefix)))
	}
	query := fmt.Sprintf("SELECT %s FROM %s", columns, q.table)
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY updated_at, operation_id LIMIT " + arg(int64(limit))
	return query, args
}

// beforeMillis converts an exclusive upper bound to milliseconds so that
// "updated_at < result" keeps "UpdatedAt < t" for sub-millisecond t: a
// record at the millisecond of t is before t only if t is past that
// millisecond's start.
func beforeMillis(t time.Time) int64 {
	ms := t.UnixMilli()
	if t.After(time.UnixMilli(ms)) {
		ms++
	}
	return ms
}
