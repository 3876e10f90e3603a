package sqlinbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pagpolar/pagpolar-go/webhook"
)

// casRetries bounds how often a refused Claim is tried again when re-reading
// the row shows it would now succeed (the row changed between two statements).
const casRetries = 5

// Insert implements webhook.Store: one upsert, so concurrent deliveries of
// one key insert once and count the others.
func (s *Store) Insert(ctx context.Context, rec webhook.Record) (webhook.Record, bool, error) {
	if err := checkCtx(ctx); err != nil {
		return webhook.Record{}, false, err
	}
	if rec.Key == "" {
		return webhook.Record{}, false, errors.New("sqlinbox: Insert: key: empty")
	}
	payload := rec.Payload
	if payload == nil {
		payload = []byte{}
	}
	got, err := scan(s.wdb.QueryRowContext(ctx, s.q.insert, rec.Key, rec.Event, rec.Entity, rec.EnvelopeID, payload))
	if err != nil {
		return webhook.Record{}, false, unavailable("insert", rec.Key, err)
	}
	// A conflict increments deliveries, so only a fresh row has 1.
	return got, got.Deliveries == 1, nil
}

// Get implements webhook.Store.
func (s *Store) Get(ctx context.Context, key string) (webhook.Record, error) {
	if err := checkCtx(ctx); err != nil {
		return webhook.Record{}, err
	}
	return s.get(ctx, s.rdb, key)
}

// getNow reads the row and the database's clock on the writer's connection.
func (s *Store) getNow(ctx context.Context, key string) (webhook.Record, time.Time, error) {
	r, now, err := scanNow(s.wdb.QueryRowContext(ctx, s.q.getNow, key))
	if errors.Is(err, sql.ErrNoRows) {
		return webhook.Record{}, time.Time{}, fmt.Errorf("%w: %s", webhook.ErrNotFound, key)
	}
	if err != nil {
		return webhook.Record{}, time.Time{}, unavailable("get", key, err)
	}
	return r, now, nil
}

func (s *Store) get(ctx context.Context, db *sql.DB, key string) (webhook.Record, error) {
	r, err := scan(db.QueryRowContext(ctx, s.q.get, key))
	if errors.Is(err, sql.ErrNoRows) {
		return webhook.Record{}, fmt.Errorf("%w: %s", webhook.ErrNotFound, key)
	}
	if err != nil {
		return webhook.Record{}, unavailable("get", key, err)
	}
	return r, nil
}

// Claim implements webhook.Store, by the database's clock.
func (s *Store) Claim(ctx context.Context, key, owner string, ttl time.Duration) (webhook.Record, error) {
	if err := checkCtx(ctx); err != nil {
		return webhook.Record{}, err
	}
	args := []any{key, owner, ttl.Microseconds()}
	for range casRetries {
		var got webhook.Record
		var err error
		if s.dialect == Postgres {
			got, err = s.pgClaim(ctx, key, args)
		} else {
			got, err = scan(s.wdb.QueryRowContext(ctx, s.q.claim, args...))
		}
		if err == nil {
			return got, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return webhook.Record{}, unavailable("claim", key, err)
		}
		// Refused: say why, from a fresh read of the row and the database's
		// clock (the writer's own connection for SQLite, so the read cannot
		// lag behind the write).
		cur, now, err := s.getNow(ctx, key)
		if err != nil {
			return webhook.Record{}, err
		}
		switch {
		case webhook.LiveLease(cur, now):
			return cur, fmt.Errorf("%w: %s", webhook.ErrLeaseHeld, key)
		case !webhook.Claimable(cur, now):
			return cur, fmt.Errorf("%w: %s is %s", webhook.ErrWrongState, key, cur.State)
		}
		var busy int
		if err := s.wdb.QueryRowContext(ctx, s.q.entityBusy, cur.Entity, key, micros(now)).Scan(&busy); err != nil {
			return webhook.Record{}, unavailable("claim", key, err)
		}
		if busy > 0 {
			return cur, fmt.Errorf("%w: %s (%s)", webhook.ErrEntityBusy, key, cur.Entity)
		}
		// The row or its entity changed between the statements: try again.
	}
	return webhook.Record{}, fmt.Errorf("%w: sqlinbox claim %s: the rows kept changing", webhook.ErrUnavailable, key)
}

// pgClaim runs the claim under a transaction-scoped advisory lock on the
// entity: under READ COMMITTED, two claims of different events of one entity
// could otherwise both see the other unleased.
func (s *Store) pgClaim(ctx context.Context, key string, args []any) (rec webhook.Record, err error) {
	// READ COMMITTED whatever the database's default: under REPEATABLE READ
	// the snapshot predates the advisory lock wait, and the NOT EXISTS check
	// below would miss an event of the same entity claimed meanwhile.
	tx, err := s.wdb.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return webhook.Record{}, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback() // the error that matters is err
		}
	}()
	if _, err = tx.ExecContext(ctx, s.q.lockEntity, key); err != nil {
		return webhook.Record{}, err
	}
	if rec, err = scan(tx.QueryRowContext(ctx, s.q.claim, args...)); err != nil {
		return webhook.Record{}, err
	}
	return rec, tx.Commit()
}

// Renew implements webhook.Store, by the database's clock.
func (s *Store) Renew(ctx context.Context, key string, token int64, ttl time.Duration) (webhook.Record, error) {
	if err := checkCtx(ctx); err != nil {
		return webhook.Record{}, err
	}
	got, err := scan(s.wdb.QueryRowContext(ctx, s.q.renew, key, token, ttl.Microseconds()))
	if err == nil {
		return got, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return webhook.Record{}, unavailable("renew", key, err)
	}
	cur, err := s.get(ctx, s.wdb, key)
	if err != nil {
		return webhook.Record{}, err
	}
	return cur, fmt.Errorf("%w: %s", webhook.ErrLeaseLost, key)
}

// Complete implements webhook.Store, by the database's clock.
func (s *Store) Complete(ctx context.Context, key string, token int64, out webhook.Outcome) (webhook.Record, error) {
	if err := checkCtx(ctx); err != nil {
		return webhook.Record{}, err
	}
	if err := out.Check(); err != nil {
		return webhook.Record{}, fmt.Errorf("sqlinbox: Complete %s: %w", key, err)
	}
	notAttempted := int64(0)
	if out.NotAttempted {
		notAttempted = 1
	}
	got, err := scan(s.wdb.QueryRowContext(ctx, s.q.complete, key, token, string(out.State), out.Error,
		out.RetryAfter.Microseconds(), notAttempted))
	if err == nil {
		return got, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return webhook.Record{}, unavailable("complete", key, err)
	}
	cur, err := s.get(ctx, s.wdb, key)
	if err != nil {
		return webhook.Record{}, err
	}
	return cur, fmt.Errorf("%w: %s", webhook.ErrLeaseLost, key)
}

// Due implements webhook.Store, by the database's clock.
func (s *Store) Due(ctx context.Context, limit int) ([]webhook.Record, error) {
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = webhook.DefaultListLimit
	}
	rows, err := s.rdb.QueryContext(ctx, s.q.due, limit)
	if err != nil {
		return nil, unavailable("due", "", err)
	}
	out, err := scanAll(rows)
	if err != nil {
		return nil, unavailable("due", "", err)
	}
	return out, nil
}

// List implements webhook.Store: one SELECT, so a snapshot.
func (s *Store) List(ctx context.Context, f webhook.Filter) ([]webhook.Record, error) {
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	limit := f.Limit
	if limit <= 0 {
		limit = webhook.DefaultListLimit
	}
	var where []string
	var args []any
	if len(f.States) > 0 {
		where = append(where, "state IN ("+placeholders(len(args)+1, len(f.States))+")")
		for _, st := range f.States {
			args = append(args, string(st))
		}
	}
	if !f.UpdatedBefore.IsZero() {
		args = append(args, beforeMicros(f.UpdatedBefore))
		where = append(where, fmt.Sprintf("updated_at < $%d", len(args)))
	}
	q := "SELECT " + columns + " FROM " + s.table
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	args = append(args, limit)
	q += fmt.Sprintf(" ORDER BY updated_at, %s LIMIT $%d", s.q.orderKey, len(args))
	rows, err := s.rdb.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, unavailable("list", "", err)
	}
	out, err := scanAll(rows)
	if err != nil {
		return nil, unavailable("list", "", err)
	}
	return out, nil
}

// Retry implements webhook.Store, by the database's clock.
func (s *Store) Retry(ctx context.Context, key string) (webhook.Record, error) {
	if err := checkCtx(ctx); err != nil {
		return webhook.Record{}, err
	}
	got, err := scan(s.wdb.QueryRowContext(ctx, s.q.retry, key))
	if err == nil {
		return got, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return webhook.Record{}, unavailable("retry", key, err)
	}
	cur, err := s.get(ctx, s.wdb, key)
	if err != nil {
		return webhook.Record{}, err
	}
	return cur, fmt.Errorf("%w: %s is %s", webhook.ErrWrongState, key, cur.State)
}

// DeleteExpired implements webhook.Store.
func (s *Store) DeleteExpired(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := checkCtx(ctx); err != nil {
		return 0, err
	}
	if limit <= 0 {
		return 0, nil
	}
	res, err := s.wdb.ExecContext(ctx, s.q.deleteExpired, beforeMicros(before), limit)
	if err != nil {
		return 0, unavailable("delete expired", "", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, unavailable("delete expired", "", err)
	}
	return int(n), nil
}
