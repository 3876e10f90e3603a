package sqlstore

import (
	"database/sql"
	"fmt"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// row is one record as the table holds it: times as integer unix
// milliseconds (UTC), computed by the database for the store-owned ones.
type row struct {
	id, key, kind, fingerprint string
	state                      string
	version                    int64
	attempts                   int64
	firstSent, lastSent        sql.NullInt64 // NULL: the zero time
	resultRef                  string
	result                     []byte
	errText                    string
	meta                       []byte
	leaseOwner                 string
	leaseToken                 int64
	leaseExpires               int64
	created, updated           int64
}

// columns lists the table's columns in the order scan and values use.
const columns = "operation_id, idempotency_key, kind, fingerprint, state, version, attempts, " +
	"first_sent_at, last_sent_at, result_ref, result_data, error_text, meta_data, " +
	"lease_owner, lease_token, lease_expires_at, created_at, updated_at"

type scanner interface{ Scan(dest ...any) error }

func scanRow(s scanner) (row, error) {
	var r row
	err := s.Scan(&r.id, &r.key, &r.kind, &r.fingerprint, &r.state, &r.version, &r.attempts,
		&r.firstSent, &r.lastSent, &r.resultRef, &r.result, &r.errText, &r.meta,
		&r.leaseOwner, &r.leaseToken, &r.leaseExpires, &r.created, &r.updated)
	return r, err
}

// values returns r's columns in the order of columns.
func (r *row) values() []any {
	return []any{r.id, r.key, r.kind, r.fingerprint, r.state, r.version, r.attempts,
		r.firstSent, r.lastSent, r.resultRef, nilIfEmpty(r.result), r.errText, nilIfEmpty(r.meta),
		r.leaseOwner, r.leaseToken, r.leaseExpires, r.created, r.updated}
}

func nilIfEmpty(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

func toMillis(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMilli(), Valid: true}
}

func fromMillis(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

func fromNullMillis(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return fromMillis(n.Int64)
}

// ttlMillis rounds a lease TTL to the table's precision, at least 1 ms so a
// positive TTL never yields a lease that is already expired.
func ttlMillis(ttl time.Duration) int64 {
	ms := ttl.Milliseconds()
	if ms < 1 && ttl > 0 {
		ms = 1
	}
	return ms
}

func (r *row) record() keystore.Record {
	return keystore.Record{
		OperationID:    r.id,
		Key:            r.key,
		Kind:           r.kind,
		Fingerprint:    r.fingerprint,
		State:          keystore.State(r.state),
		Version:        r.version,
		Attempts:       int(r.attempts),
		FirstSentAt:    fromNullMillis(r.firstSent),
		LastSentAt:     fromNullMillis(r.lastSent),
		ResultRef:      r.resultRef,
		Result:         append([]byte(nil), r.result...),
		Error:          r.errText,
		Meta:           append([]byte(nil), r.meta...),
		LeaseOwner:     r.leaseOwner,
		LeaseToken:     r.leaseToken,
		LeaseExpiresAt: fromMillis(r.leaseExpires),
		CreatedAt:      fromMillis(r.created),
		UpdatedAt:      fromMillis(r.updated),
	}
}

// newRow is what Create stores for rec at database time now (ms).
func newRow(rec keystore.Record, owner string, ttl time.Duration, now int64) row {
	state := rec.State
	if state == "" {
		state = keystore.StatePending
	}
	r := row{
		id: rec.OperationID, key: rec.Key, kind: rec.Kind, fingerprint: rec.Fingerprint,
		state: string(state), version: 1,
		leaseOwner: owner, leaseToken: 1, leaseExpires: now + ttlMillis(ttl),
		created: now, updated: now,
	}
	r.setMutable(rec)
	return r
}

// setMutable copies the fields Update may change.
func (r *row) setMutable(rec keystore.Record) {
	r.fingerprint = rec.Fingerprint
	r.state = string(rec.State)
	if r.state == "" {
		r.state = string(keystore.StatePending)
	}
	r.attempts = int64(rec.Attempts)
	r.firstSent, r.lastSent = toMillis(rec.FirstSentAt), toMillis(rec.LastSentAt)
	r.resultRef, r.errText = rec.ResultRef, rec.Error
	r.result = append([]byte(nil), rec.Result...)
	r.meta = append([]byte(nil), rec.Meta...)
}

// The decisions below are the Store contract's rules on one row at database
// time now (ms). SQLite applies them inside its write transaction; PostgreSQL
// encodes them in single-statement compare-and-set updates and uses them only
// to say why such an update matched no row.

func (r *row) leaseHeldBy(now int64) bool { return r.leaseOwner != "" && now < r.leaseExpires }

// acquire returns the row after owner takes the lease, or ErrLeaseHeld.
func (r row) acquire(owner string, ttl time.Duration, now int64) (row, error) {
	if r.leaseHeldBy(now) && r.leaseOwner != owner {
		return r, fmt.Errorf("%w: %s", keystore.ErrLeaseHeld, r.id)
	}
	r.leaseOwner, r.leaseToken, r.leaseExpires = owner, r.leaseToken+1, now+ttlMillis(ttl)
	return r, nil
}

// renew returns the row with its lease extended, or ErrLeaseLost.
func (r row) renew(token int64, ttl time.Duration, now int64) (row, error) {
	if r.leaseToken != token || now >= r.leaseExpires {
		return r, fmt.Errorf("%w: %s", keystore.ErrLeaseLost, r.id)
	}
	r.leaseExpires = now + ttlMillis(ttl)
	return r, nil
}

// release returns the row with the lease given up, and whether token was
// the current one (otherwise nothing changes).
func (r row) release(token int64, now int64) (row, bool) {
	if r.leaseToken != token {
		return r, false
	}
	r.leaseOwner, r.leaseExpires = "", now
	return r, true
}

// update returns the row after the compare-and-set write of rec, or
// ErrLeaseLost / ErrConflict, checked in that order (as Memory does).
func (r row) update(rec keystore.Record, now int64) (row, error) {
	if r.leaseToken != rec.LeaseToken || !r.leaseHeldBy(now) {
		return r, fmt.Errorf("%w: %s", keystore.ErrLeaseLost, r.id)
	}
	if r.version != rec.Version {
		return r, fmt.Errorf("%w: %s", keystore.ErrConflict, r.id)
	}
	if keystore.State(r.state).Terminal() && rec.State != keystore.State(r.state) {
		return r, fmt.Errorf("%w: %s is %s and cannot become %s", keystore.ErrConflict, r.id, r.state, rec.State)
	}
	r.setMutable(rec)
	r.version++
	r.updated = now
	return r, nil
}
