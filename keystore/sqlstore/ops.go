package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// defaultListLimit is List's limit when the filter gives none.
const defaultListLimit = 100

// Create implements keystore.Store. When it returns nil the row is
// committed: for SQLite, fsynced to the WAL (synchronous=FULL); for
// PostgreSQL, as synchronous_commit says (on by default: flushed to the WAL).
// It inserts only if the table passes the loss check, in the same statement
// (PostgreSQL) or batch transaction (SQLite); otherwise it returns an error
// wrapping a *keystore.AmnesiaError (see the package documentation,
// "Amnesia").
func (s *Store) Create(ctx context.Context, rec keystore.Record, owner string, ttl time.Duration) (keystore.Record, error) {
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	if err := checkCtx(ctx); err != nil {
		return keystore.Record{}, err
	}
	if rec.OperationID == "" {
		return keystore.Record{}, errors.New("sqlstore: create: empty operation ID")
	}
	if rec.OperationID == markerID {
		return keystore.Record{}, errReserved
	}
	if rec.State != "" && !rec.State.Valid() {
		return keystore.Record{}, fmt.Errorf("sqlstore: create %s: invalid state %q", rec.OperationID, rec.State)
	}
	if s.dialect == Postgres {
		if err := pgCheckRecord(rec); err != nil {
			return keystore.Record{}, err
		}
		if err := pgText("owner", owner); err != nil {
			return keystore.Record{}, err
		}
	}
	if err := s.ensurePart(ctx); err != nil {
		return keystore.Record{}, s.timedOut(ctx, err)
	}
	var got keystore.Record
	var err error
	if s.dialect == SQLite {
		got, err = s.liteCreate(ctx, rec, owner, ttl)
	} else {
		got, err = s.pgCreate(ctx, rec, owner, ttl)
	}
	return got, s.timedOut(ctx, err)
}

// Get implements keystore.Store.
func (s *Store) Get(ctx context.Context, operationID string) (keystore.Record, error) {
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	if err := checkCtx(ctx); err != nil {
		return keystore.Record{}, err
	}
	if operationID == markerID || (s.dialect == Postgres && pgText("OperationID", operationID) != nil) {
		return keystore.Record{}, fmt.Errorf("%w: %q", keystore.ErrNotFound, operationID) // no record can have it
	}
	r, err := scanRow(s.db.QueryRowContext(ctx, s.q.selectOne, operationID))
	if errors.Is(err, sql.ErrNoRows) {
		return keystore.Record{}, fmt.Errorf("%w: %s", keystore.ErrNotFound, operationID)
	}
	if err != nil {
		return keystore.Record{}, s.timedOut(ctx, unavailable("get "+operationID, err))
	}
	return r.record(), nil
}

// Acquire implements keystore.Store, by the database's clock.
func (s *Store) Acquire(ctx context.Context, operationID, owner string, ttl time.Duration) (keystore.Record, error) {
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	if err := checkCtx(ctx); err != nil {
		return keystore.Record{}, err
	}
	if operationID == markerID {
		return keystore.Record{}, fmt.Errorf("%w: %q", keystore.ErrNotFound, operationID)
	}
	if s.dialect == SQLite {
		got, err := s.liteChange(ctx, operationID, false, func(cur row, now int64) (row, bool, error) {
			next, err := cur.acquire(owner, ttl, now)
			return next, err == nil, err
		})
		return got, s.timedOut(ctx, err)
	}
	if err := pgText("owner", owner); err != nil {
		return keystore.Record{}, err
	}
	if err := pgText("OperationID", operationID); err != nil {
		return keystore.Record{}, err
	}
	got, err := s.pgAcquire(ctx, operationID, owner, ttl)
	return got, s.timedOut(ctx, err)
}

// Renew implements keystore.Store, by the database's clock.
func (s *Store) Renew(ctx context.Context, operationID string, token int64, ttl time.Duration) (keystore.Record, error) {
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	if err := checkCtx(ctx); err != nil {
		return keystore.Record{}, err
	}
	if operationID == markerID {
		return keystore.Record{}, fmt.Errorf("%w: %q", keystore.ErrNotFound, operationID)
	}
	if s.dialect == SQLite {
		got, err := s.liteChange(ctx, operationID, false, func(cur row, now int64) (row, bool, error) {
			next, err := cur.renew(token, ttl, now)
			return next, err == nil, err
		})
		return got, s.timedOut(ctx, err)
	}
	if err := pgText("OperationID", operationID); err != nil {
		return keystore.Record{}, err
	}
	got, err := s.pgRenew(ctx, operationID, token, ttl)
	return got, s.timedOut(ctx, err)
}

// Release implements keystore.Store.
func (s *Store) Release(ctx context.Context, operationID string, token int64) error {
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	if err := checkCtx(ctx); err != nil {
		return err
	}
	if operationID == markerID {
		return nil
	}
	if s.dialect == SQLite {
		_, err := s.liteChange(ctx, operationID, false, func(cur row, now int64) (row, bool, error) {
			next, changed := cur.release(token, now)
			return next, changed, nil
		})
		if errors.Is(err, keystore.ErrNotFound) {
			return nil // nothing of ours to give up
		}
		return s.timedOut(ctx, err)
	}
	if pgText("OperationID", operationID) != nil {
		return nil // no such record can exist: nothing of ours to give up
	}
	return s.timedOut(ctx, s.pgRelease(ctx, operationID, token))
}

// Update implements keystore.Store: one compare-and-set on version and
// lease token, by the database's clock.
func (s *Store) Update(ctx context.Context, rec keystore.Record) (keystore.Record, error) {
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	if err := checkCtx(ctx); err != nil {
		return keystore.Record{}, err
	}
	if !rec.State.Valid() {
		return keystore.Record{}, fmt.Errorf("sqlstore: update %s: invalid state %q", rec.OperationID, rec.State)
	}
	if rec.OperationID == markerID {
		return keystore.Record{}, fmt.Errorf("%w: %q", keystore.ErrNotFound, rec.OperationID)
	}
	if s.dialect == SQLite {
		got, err := s.liteChange(ctx, rec.OperationID, true, func(cur row, now int64) (row, bool, error) {
			next, err := cur.update(rec, now)
			return next, err == nil, err
		})
		return got, s.timedOut(ctx, err)
	}
	if err := pgCheckRecord(rec); err != nil {
		return keystore.Record{}, err
	}
	got, err := s.pgUpdate(ctx, rec)
	return got, s.timedOut(ctx, err)
}

// List implements keystore.Store (default limit 100), oldest UpdatedAt
// first, ties by OperationID.
func (s *Store) List(ctx context.Context, f keystore.Filter) ([]keystore.Record, error) {
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	limit := f.Limit
	if limit <= 0 {
		limit = defaultListLimit
	}
	query, args := s.q.list(f, limit)
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, s.timedOut(ctx, unavailable("list", err))
	}
	defer rows.Close()
	var out []keystore.Record
	for rows.Next() {
		r, err := scanRow(rows)
		if err != nil {
			return nil, s.timedOut(ctx, unavailable("list", err))
		}
		out = append(out, r.record())
	}
	if err := rows.Err(); err != nil {
		return nil, s.timedOut(ctx, unavailable("list", err))
	}
	return out, nil
}

// DeleteExpired implements keystore.Store: it removes at most limit
// succeeded or failed records last updated before 'before', oldest first,
// and records the cut-off in the table's marker (so that a removed record
// is not taken for a lost one).
func (s *Store) DeleteExpired(ctx context.Context, before time.Time, limit int) (int, error) {
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	if err := checkCtx(ctx); err != nil {
		return 0, err
	}
	if limit <= 0 {
		return 0, nil
	}
	b := beforeMillis(before)
	var n int
	var err error
	if s.dialect == SQLite {
		n, err = s.liteDeleteExpired(ctx, b, limit)
	} else {
		n, err = s.pgDeleteExpired(ctx, b, limit)
	}
	return n, s.timedOut(ctx, err)
}
