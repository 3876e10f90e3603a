package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pagpolar/pagpolar-go/keystore"
)

// OpenPostgres opens a PostgreSQL database through pgx (DSN as pgx reads it:
// a postgres:// URL or key=value pairs) and returns a Store that owns it;
// Close closes it. Run Migrate before use. PostgreSQL makes each COMMIT
// durable per its synchronous_commit setting (on by default: flushed to the
// WAL); concurrent writes share commits (see the package documentation).
func OpenPostgres(dsn string, opts ...Option) (*Store, error) {
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if c.dialect != "" && c.dialect != Postgres {
		return nil, fmt.Errorf("sqlstore: OpenPostgres with dialect %q", c.dialect)
	}
	c.dialect = Postgres
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		// pgx's parse errors quote the DSN with its password masked.
		return nil, fmt.Errorf("sqlstore: PostgreSQL DSN: %w", err)
	}
	s := newStore(c, db)
	s.owned = []*sql.DB{db}
	if c.maxBatch > 1 { // WithMaxBatch(1): each write its own statement on the pool, as New does
		s.startPGWriter(c)
	}
	return s, nil
}

func isPGUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "23505" || pe.Code == "42P07")
}

// casRetries bounds how often a compare-and-set that matched no row is
// retried when re-reading the row shows it would now match (the row changed
// between the two statements).
const casRetries = 5

// selectNow reads the row and the database's clock.
func (s *Store) selectNow(ctx context.Context, id string) (row, int64, bool, error) {
	var now int64
	var r row
	err := s.db.QueryRowContext(ctx, s.q.selectNow, id).Scan(&r.id, &r.key, &r.kind, &r.fingerprint, &r.state,
		&r.version, &r.attempts, &r.firstSent, &r.lastSent, &r.resultRef, &r.result, &r.errText, &r.meta,
		&r.leaseOwner, &r.leaseToken, &r.leaseExpires, &r.created, &r.updated, &now)
	if errors.Is(err, sql.ErrNoRows) {
		return row{}, 0, false, nil
	}
	if err != nil {
		return row{}, 0, false, unavailable("read "+id, err)
	}
	return r, now, true, nil
}

func (s *Store) pgCreate(ctx context.Context, rec keystore.Record, owner string, ttl time.Duration) (keystore.Record, error) {
	r := newRow(rec, owner, ttl, 0)
	for range casRetries {
		pv := s.part.view()
		got, err := s.pgQueryRow(ctx, r.id, "create", s.q.pgCreate, []any{r.id, r.key, r.kind, r.fingerprint, r.state,
			r.attempts, r.firstSent, r.lastSent, r.resultRef, nilIfEmpty(r.result), r.errText, nilIfEmpty(r.meta),
			owner, ttlMillis(ttl), markerID, pv.epoch, pv.lastID, pv.lastCA})
		if err == nil {
			s.part.created(pv.epoch, got.id, got.created)
			return got.record(), nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return keystore.Record{}, err
		}
		// Nothing inserted: the operation exists (ON CONFLICT DO NOTHING),
		// or the table failed the loss check.
		cur, _, found, err := s.selectNow(ctx, rec.OperationID)
		if err != nil {
			return keystore.Record{}, err
		}
		if found {
			return cur.record(), fmt.Errorf("%w: %s", keystore.ErrExists, rec.OperationID)
		}
		if retry, err := s.pgJudge(ctx, pv); !retry {
			return keystore.Record{}, err
		}
		// Deleted between the two statements, or an accepted loss adopted:
		// try again.
	}
	return keystore.Record{}, fmt.Errorf("%w: sqlstore create %s: the row kept changing", keystore.ErrUnavailable, rec.OperationID)
}

// pgCAS runs a compare-and-set statement; when it matches no row, it reads
// the row and lets decide say why (decide returning nil means the row would
// match now, so the statement is tried again).
func (s *Store) pgCAS(ctx context.Context, what, id, query string, args []any, decide func(cur row, now int64) error) (keystore.Record, error) {
	var lastErr error
	for range casRetries {
		got, err := s.pgQueryRow(ctx, id, what, query, args)
		if err == nil {
			return got.record(), nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return keystore.Record{}, err
		}
		cur, now, found, err := s.selectNow(ctx, id)
		if err != nil {
			return keystore.Record{}, err
		}
		if !found {
			return keystore.Record{}, fmt.Errorf("%w: %s", keystore.ErrNotFound, id)
		}
		if lastErr = decide(cur, now); lastErr != nil {
			return cur.record(), lastErr
		}
	}
	return keystore.Record{}, fmt.Errorf("%w: sqlstore %s %s: the row kept changing", keystore.ErrUnavailable, what, id)
}

func (s *Store) pgAcquire(ctx context.Context, id, owner string, ttl time.Duration) (keystore.Record, error) {
	return s.pgCAS(ctx, "acquire", id, s.q.pgAcquire, []any{id, owner, ttlMillis(ttl)}, func(cur row, now int64) error {
		_, err := cur.acquire(owner, ttl, now)
		return err
	})
}

func (s *Store) pgRenew(ctx context.Context, id string, token int64, ttl time.Duration) (keystore.Record, error) {
	return s.pgCAS(ctx, "renew", id, s.q.pgRenew, []any{id, token, ttlMillis(ttl)}, func(cur row, now int64) error {
		_, err := cur.renew(token, ttl, now)
		return err
	})
}

func (s *Store) pgRelease(ctx context.Context, id string, token int64) error {
	return s.pgExec(ctx, id, "release", s.q.pgRelease, []any{id, token})
}

func (s *Store) pgUpdate(ctx context.Context, rec keystore.Record) (keystore.Record, error) {
	var r row
	r.setMutable(rec)
	args := []any{rec.OperationID, r.fingerprint, r.state, r.attempts, r.firstSent, r.lastSent, r.resultRef,
		nilIfEmpty(r.result), r.errText, nilIfEmpty(r.meta), rec.Version, rec.LeaseToken}
	return s.pgCAS(ctx, "update", rec.OperationID, s.q.pgUpdate, args, func(cur row, now int64) error {
		_, err := cur.update(rec, now)
		return err
	})
}

func (s *Store) pgDeleteExpired(ctx context.Context, before int64, limit int) (int, error) {
	var n int
	if err := s.db.QueryRowContext(ctx, s.q.pgDeleteExpired, before, int64(limit), markerID).Scan(&n); err != nil {
		return 0, unavailable("delete expired", err)
	}
	return n, nil
}
