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
	insert, get, claim, entityBusy, renew, complete, due, retry, deleteExpired string
	lockEntity                                                                 string // PostgreSQL only
	orderKey                                                                   string
}

func buildQueries(d Dialect, t string) queries {
	// Keys sort bytewise in every store (PostgreSQL's default collation may not).
	orderKey := "dedupe_key"
	if d == Postgres {
		orderKey = `dedupe_key COLLATE "C"`
	}
	q := queries{orderKey: orderKey}
	q.insert = fmt.Sprintf(`INSERT INTO %[1]s AS t (dedupe_key, event, entity, envelope_id, payload, state, attempts,
	deliveries, last_error, next_attempt_at, lease_owner, lease_token, lease_expires_at, received_at, updated_at)
VALUES ($1, $2, $3, $4, $5, 'received', 0, 1, '', $6, '', 0, 0, $6, $6)
ON CONFLICT (dedupe_key) DO UPDATE SET deliveries = t.deliveries + 1
RETURNING %[2]s`, t, columns)
	q.get = fmt.Sprintf(`SELECT %[2]s FROM %[1]s WHERE dedupe_key = $1`, t, columns)
	// $1 key, $2 owner, $3 now, $4 lease expiry.
	q.claim = fmt.Sprintf(`UPDATE %[1]s AS t SET state = 'processing', attempts = t.attempts + 1, lease_owner = $2,
	lease_token = t.lease_token + 1, lease_expires_at = $4, updated_at = $3
WHERE t.dedupe_key = $1
	AND (t.state IN ('received', 'error') OR (t.state = 'processing' AND t.lease_expires_at <= $3))
	AND NOT EXISTS (SELECT 1 FROM %[1]s AS o WHERE o.entity = t.entity AND o.dedupe_key <> t.dedupe_key
		AND o.state = 'processing' AND o.lease_expires_at > $3)
RETURNING %[2]s`, t, columns)
	q.entityBusy = fmt.Sprintf(`SELECT COUNT(*) FROM %[1]s WHERE entity = $1 AND dedupe_key <> $2
	AND state = 'processing' AND lease_expires_at > $3`, t)
	// Two int4 keys: the table's name and the entity, so other advisory
	// locks of the application never collide with ours by accident.
	q.lockEntity = fmt.Sprintf(`SELECT pg_advisory_xact_lock(hashtext('%[1]s'), hashtext(entity)) FROM %[1]s WHERE dedupe_key = $1`, t)
	q.renew = fmt.Sprintf(`UPDATE %[1]s SET lease_expires_at = $4
WHERE dedupe_key = $1 AND lease_token = $2 AND state = 'processing' AND lease_expires_at > $3
RETURNING %[2]s`, t, columns)
	// $1 key, $2 token, $3 state, $4 error, $5 next attempt, $6 now.
	q.complete = fmt.Sprintf(`UPDATE %[1]s SET state = $3, last_error = CASE WHEN $4 = '' THEN last_error ELSE $4 END,
	next_attempt_at = $5, lease_owner = '', lease_expires_at = 0, updated_at = $6
WHERE dedupe_key = $1 AND lease_token = $2 AND state = 'processing'
RETURNING %[2]s`, t, columns)
	q.due = fmt.Sprintf(`SELECT %[2]s FROM %[1]s
WHERE (state IN ('received', 'error') AND next_attempt_at <= $1) OR (state = 'processing' AND lease_expires_at <= $1)
ORDER BY CASE WHEN state = 'processing' THEN lease_expires_at ELSE next_attempt_at END, %[3]s LIMIT $2`, t, columns, orderKey)
	q.retry = fmt.Sprintf(`UPDATE %[1]s SET state = 'received', attempts = 0, next_attempt_at = $2, updated_at = $2
WHERE dedupe_key = $1 AND state IN ('dead', 'error')
RETURNING %[2]s`, t, columns)
	q.deleteExpired = fmt.Sprintf(`DELETE FROM %[1]s WHERE dedupe_key IN (
	SELECT dedupe_key FROM %[1]s WHERE state = 'processed' AND updated_at < $1 ORDER BY updated_at LIMIT $2)`, t)
	return q
}
