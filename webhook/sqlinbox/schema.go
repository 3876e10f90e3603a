package sqlinbox

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// schema returns the statements Migrate runs, in order; each is idempotent.
func schema(d Dialect, table string) []string {
	blob, bigint := "BYTEA", "BIGINT"
	if d == SQLite {
		blob, bigint = "BLOB", "INTEGER"
	}
	return []string{
		fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %[1]s (
	dedupe_key       TEXT NOT NULL PRIMARY KEY,
	event            TEXT NOT NULL,
	entity           TEXT NOT NULL,
	envelope_id      TEXT NOT NULL,
	payload          %[3]s NOT NULL,
	state            TEXT NOT NULL,
	attempts         %[2]s NOT NULL,
	deliveries       %[2]s NOT NULL,
	last_error       TEXT NOT NULL,
	next_attempt_at  %[2]s NOT NULL,
	lease_owner      TEXT NOT NULL,
	lease_token      %[2]s NOT NULL,
	lease_expires_at %[2]s NOT NULL,
	received_at      %[2]s NOT NULL,
	updated_at       %[2]s NOT NULL
)`, table, bigint, blob),
		// Due: received/error by next attempt, processing by lease expiry.
		fmt.Sprintf("CREATE INDEX IF NOT EXISTS %[1]s_due ON %[1]s (state, next_attempt_at)", table),
		fmt.Sprintf("CREATE INDEX IF NOT EXISTS %[1]s_lease ON %[1]s (state, lease_expires_at)", table),
		// Claim's "no other event of the entity is leased".
		fmt.Sprintf("CREATE INDEX IF NOT EXISTS %[1]s_entity ON %[1]s (entity, state)", table),
		// List by state and DeleteExpired.
		fmt.Sprintf("CREATE INDEX IF NOT EXISTS %[1]s_updated ON %[1]s (state, updated_at)", table),
	}
}

func isPGDuplicate(err error) bool {
	var pe *pgconn.PgError
	// 23505: unique_violation on the catalog; 42P07: duplicate_table (also indexes).
	return errors.As(err, &pe) && (pe.Code == "23505" || pe.Code == "42P07")
}

type queries struct {
	insert, get, getNow, claim, entityBusy, renew, complete, due, retry, deleteExpired string
	lockEntity                                                                         string // PostgreSQL only
	orderKey                                                                           string
}

// nowMicros is the database's clock in microseconds since the Unix epoch:
// PostgreSQL's clock_timestamp() (the time the statement reads it, so a
// claim that waited for a lock compares leases with the time after the
// wait), SQLite's unixepoch('subsec') (milliseconds; SQLite gives one value
// for 'now' throughout a statement).
func nowMicros(d Dialect) string {
	if d == SQLite {
		return "(CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER) * 1000)"
	}
	return "floor(extract(epoch FROM clock_timestamp()) * 1000000)::bigint"
}

func buildQueries(d Dialect, t string) queries {
	// Keys sort bytewise in every store (PostgreSQL's default collation may not).
	orderKey := "dedupe_key"
	if d == Postgres {
		orderKey = `dedupe_key COLLATE "C"`
	}
	q := queries{orderKey: orderKey}
	// Every write reads the clock once, in c, and uses it throughout.
	with := "WITH c AS (SELECT " + nowMicros(d) + " AS db_now) "
	q.insert = with + fmt.Sprintf(`INSERT INTO %[1]s AS t (dedupe_key, event, entity, envelope_id, payload, state, attempts,
	deliveries, last_error, next_attempt_at, lease_owner, lease_token, lease_expires_at, received_at, updated_at)
VALUES ($1, $2, $3, $4, $5, 'received', 0, 1, '', (SELECT db_now FROM c), '', 0, 0, (SELECT db_now FROM c), (SELECT db_now FROM c))
ON CONFLICT (dedupe_key) DO UPDATE SET deliveries = t.deliveries + 1
RETURNING %[2]s`, t, columns)
	q.get = fmt.Sprintf(`SELECT %[2]s FROM %[1]s WHERE dedupe_key = $1`, t, columns)
	q.getNow = fmt.Sprintf(`SELECT %[2]s, %[3]s FROM %[1]s WHERE dedupe_key = $1`, t, columns, nowMicros(d))
	// $1 key, $2 owner, $3 ttl (µs).
	q.claim = with + fmt.Sprintf(`UPDATE %[1]s AS t SET state = 'processing', attempts = t.attempts + 1, lease_owner = $2,
	lease_token = t.lease_token + 1, lease_expires_at = c.db_now + $3, updated_at = c.db_now
FROM c
WHERE t.dedupe_key = $1
	AND (t.state IN ('received', 'error') OR (t.state = 'processing' AND t.lease_expires_at <= c.db_now))
	AND NOT EXISTS (SELECT 1 FROM %[1]s AS o WHERE o.entity = t.entity AND o.dedupe_key <> t.dedupe_key
		AND o.state = 'processing' AND o.lease_expires_at > c.db_now)
RETURNING %[2]s`, t, columns)
	// $1 entity, $2 key, $3 the database's now read with the row.
	q.entityBusy = fmt.Sprintf(`SELECT COUNT(*) FROM %[1]s WHERE entity = $1 AND dedupe_key <> $2
	AND state = 'processing' AND lease_expires_at > $3`, t)
	// Two int4 keys: the table's name and the entity, so other advisory
	// locks of the application never collide with ours by accident.
	q.lockEntity = fmt.Sprintf(`SELECT pg_advisory_xact_lock(hashtext('%[1]s'), hashtext(entity)) FROM %[1]s WHERE dedupe_key = $1`, t)
	// $1 key, $2 token, $3 ttl (µs).
	q.renew = with + fmt.Sprintf(`UPDATE %[1]s AS t SET lease_expires_at = c.db_now + $3
FROM c
WHERE t.dedupe_key = $1 AND t.lease_token = $2 AND t.state = 'processing' AND t.lease_expires_at > c.db_now
RETURNING %[2]s`, t, columns)
	// $1 key, $2 token, $3 state, $4 error, $5 retry after (µs), $6 not attempted (1 or 0).
	q.complete = with + fmt.Sprintf(`UPDATE %[1]s AS t SET state = $3,
	last_error = CASE WHEN $4 = '' THEN t.last_error ELSE $4 END,
	next_attempt_at = CASE WHEN $3 IN ('received', 'error') THEN c.db_now + $5 ELSE 0 END,
	attempts = CASE WHEN $6 = 1 AND t.attempts > 0 THEN t.attempts - 1 ELSE t.attempts END,
	lease_owner = '', lease_expires_at = 0, updated_at = c.db_now
FROM c
WHERE t.dedupe_key = $1 AND t.lease_token = $2 AND t.state = 'processing'
RETURNING %[2]s`, t, columns)
	q.due = with + fmt.Sprintf(`SELECT %[2]s FROM %[1]s AS t, c
WHERE (t.state IN ('received', 'error') AND t.next_attempt_at <= c.db_now)
	OR (t.state = 'processing' AND t.lease_expires_at <= c.db_now)
ORDER BY CASE WHEN t.state = 'processing' THEN t.lease_expires_at ELSE t.next_attempt_at END, t.%[3]s LIMIT $1`, t, columns, orderKey)
	q.retry = with + fmt.Sprintf(`UPDATE %[1]s AS t SET state = 'received', attempts = 0, next_attempt_at = c.db_now, updated_at = c.db_now
FROM c
WHERE t.dedupe_key = $1 AND t.state IN ('dead', 'error')
RETURNING %[2]s`, t, columns)
	// One small batch, oldest first; processed and dead only.
	q.deleteExpired = fmt.Sprintf(`DELETE FROM %[1]s WHERE dedupe_key IN (
	SELECT dedupe_key FROM %[1]s WHERE state IN ('processed', 'dead') AND updated_at < $1 ORDER BY updated_at, %[2]s LIMIT $2)`, t, orderKey)
	return q
}
