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

	// The amnesia marker (amnesia.go).
	metaEpoch   string // → the epoch <table>_meta remembers
	setMeta     string // $1 epoch
	initMeta    string // $1 epoch, if none is remembered
	insertMark  string // $1 marker ID, $2 epoch, $3 state, $4 reason, $5 now (ms); if absent
	loseMark    string // $1 marker ID, $2 epoch judged, $3 reason, $4 now
	acceptMark  string // $1 marker ID, $2 new epoch, $3 note, $4 now
	reapedMark  string // $1 marker ID, $2 DeleteExpired's cut-off (ms)
	declareMark string // $1 marker ID, $2 note, $3 now (ms)
	bumpMark    string // $1 marker ID → epoch, generation after the increment (SQLite)
	lastCreated string // $1 id → created_at

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
	// $1 before (ms), $2 limit, $3 marker ID → how many were removed
	pgDeleteExpired string
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
		metaEpoch:   fmt.Sprintf("SELECT value FROM %s WHERE name = 'epoch'", metaTable(t)),
		setMeta:     fmt.Sprintf("INSERT INTO %s (name, value) VALUES ('epoch', $1) ON CONFLICT (name) DO UPDATE SET value = excluded.value", metaTable(t)),
		initMeta:    fmt.Sprintf("INSERT INTO %s (name, value) VALUES ('epoch', $1) ON CONFLICT (name) DO NOTHING", metaTable(t)),
		insertMark:  fmt.Sprintf("INSERT INTO %s (%s) VALUES ($1, $2, '%s', '', $3, 1, 0, NULL, NULL, '', NULL, $4, NULL, '', 0, 0, $5, $5) ON CONFLICT (operation_id) DO NOTHING", t, columns, markerKind),
		loseMark:    fmt.Sprintf("UPDATE %s SET state = 'lost', error_text = $3, updated_at = $4 WHERE operation_id = $1 AND idempotency_key = $2 AND state = 'ok'", t),
		acceptMark:  fmt.Sprintf("UPDATE %s SET idempotency_key = $2, state = 'ok', error_text = '', result_ref = $3, first_sent_at = $4, updated_at = $4 WHERE operation_id = $1 AND state = 'lost'", t),
		reapedMark:  fmt.Sprintf("UPDATE %s SET last_sent_at = $2 WHERE operation_id = $1 AND (last_sent_at IS NULL OR last_sent_at < $2)", t),
		declareMark: fmt.Sprintf("UPDATE %s SET fingerprint = $2, lease_token = $3 WHERE operation_id = $1 AND state = 'ok'", t),
		bumpMark:    fmt.Sprintf("UPDATE %s SET attempts = attempts + 1 WHERE operation_id = $1 RETURNING idempotency_key, attempts, state", t),
		lastCreated: fmt.Sprintf("SELECT created_at FROM %s WHERE operation_id = $1", t),
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
	// The insert happens only if the table passes the loss check (g): its
	// marker row is there, not lost, with the epoch this Store knows ($16),
	// and the last record this Store created ($17, created at $18) is still
	// there unless DeleteExpired's cut-off (the marker's last_sent_at)
	// could have removed it. Otherwise nothing is inserted and pgCreate
	// finds out why (judge). SELECT does not infer parameter types from the
	// target columns as VALUES does: hence the casts.
	q.pgCreate = with + fmt.Sprintf(", g AS (SELECT 1 FROM %[1]s m WHERE m.operation_id = $15::text AND m.state = 'ok' "+
		"AND m.idempotency_key = $16::text AND ($17::text = '' OR $18::bigint < coalesce(m.last_sent_at, 0) "+
		"OR EXISTS (SELECT 1 FROM %[1]s r WHERE r.operation_id = $17::text AND r.created_at = $18::bigint))) "+
		"INSERT INTO %[1]s (%[2]s) SELECT $1::text, $2::text, $3::text, $4::text, $5::text, 1, $6::bigint, $7::bigint, $8::bigint, "+
		"$9::text, $10::bytea, $11::text, $12::bytea, $13::text, 1, (SELECT ms FROM c) + $14::bigint, (SELECT ms FROM c), (SELECT ms FROM c) FROM g "+
		"ON CONFLICT (operation_id) DO NOTHING RETURNING %[2]s", t, columns)
	q.pgAcquire = with + fmt.Sprintf("UPDATE %s SET lease_owner = $2, lease_token = lease_token + 1, "+
		"lease_expires_at = c.ms + $3 FROM c WHERE operation_id = $1 "+
		"AND (lease_owner = '' OR lease_owner = $2 OR lease_expires_at <= c.ms) RETURNING %s", t, columns)
	q.pgRenew = with + fmt.Sprintf("UPDATE %s SET lease_expires_at = c.ms + $3 FROM c "+
		"WHERE operation_id = $1 AND lease_token = $2 AND lease_expires_at > c.ms RETURNING %s", t, columns)
	// The removal and the marker's cut-off in one statement.
	q.pgDeleteExpired = fmt.Sprintf("WITH d AS (DELETE FROM %[1]s WHERE operation_id IN (SELECT operation_id FROM %[1]s "+
		"WHERE state IN %[2]s AND updated_at < $1 ORDER BY updated_at LIMIT $2) RETURNING 1), "+
		"u AS (UPDATE %[1]s SET last_sent_at = $1 WHERE operation_id = $3 AND (last_sent_at IS NULL OR last_sent_at < $1) "+
		"AND EXISTS (SELECT 1 FROM d)) SELECT count(*) FROM d", t, terminalStates)
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
	where = append(where, "operation_id <> "+arg(markerID))
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
