package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pagpolar/pagpolar-go/keystore"
)

// pgStmt is one compare-and-set write of a PostgreSQL batch.
type pgStmt struct {
	query     string
	args      []any
	returning bool // the statement returns the row it wrote (or none)
}

// The PostgreSQL group commit keeps one batch in flight while batches
// answer promptly: each carries every write that queued meanwhile, which
// measured better than several smaller batches at once on a 2-core
// machine. A batch still running after pgStuckAfter (a row lock held by
// another session, a connection that stopped answering) no longer holds
// the others back: the next batch starts beside it, on another connection,
// up to pgMaxInFlight at once. Inside a batch, a statement that waits more
// than pgBatchLockTimeout for a row lock fails the batch's implicit
// transaction; the batch is sent again without it, and that statement is
// retried alone, waiting for its lock only as long as its own caller's
// deadline allows. So one locked row delays its own caller, and the others
// of its batch by at most pgBatchLockTimeout; one dead connection delays
// the callers of its batch until their deadline, nobody else.
const (
	pgStuckAfter       = 100 * time.Millisecond
	pgMaxInFlight      = 4
	pgBatchLockTimeout = 250 * time.Millisecond
)

// startPGWriter starts the PostgreSQL group commit, used when db is pgx's
// database/sql driver. Concurrent writes are sent together as one pipeline
// (one round trip) that PostgreSQL runs as one implicit transaction: one
// commit, one WAL flush for the batch. Each statement keeps its own
// compare-and-set answer (a statement that matches no row is not an error),
// so one write's refusal does not undo the others.
func (s *Store) startPGWriter(c config) {
	w := newWriter(s.db, s.q, c)
	w.applyFn = s.pgApply
	s.w = w
	w.startElastic(pgMaxInFlight, pgStuckAfter)
}

// batchDeadline is the latest deadline of the batch's callers (each call
// has one: the call timeout), so that the batch can answer the most patient
// of them, and never later than the call timeout from now.
func (s *Store) batchDeadline(batch []*writeReq) time.Time {
	limit := time.Now().Add(s.callTimeout)
	var latest time.Time
	for _, r := range batch {
		if dl, ok := r.ctx.Deadline(); ok && dl.After(latest) {
			latest = dl
		}
	}
	if latest.IsZero() || latest.After(limit) {
		return limit
	}
	return latest
}

// pgApply runs a batch. Statements run in operation ID order, so that two
// processes' batches lock the rows they share in the same order and cannot
// deadlock; writes to one operation keep their queue order. A statement
// that times out on a row lock is taken out and retried alone (pgSolo); the
// rest are sent again.
func (s *Store) pgApply(batch []*writeReq) ([]result, error) {
	ctx, cancel := context.WithDeadline(context.Background(), s.batchDeadline(batch))
	defer cancel()
	order := make([]int, len(batch))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return batch[order[a]].id < batch[order[b]].id })

	c, err := s.db.Conn(ctx)
	if err != nil {
		return nil, unavailable("write batch: connect", err)
	}
	defer c.Close()
	results := make([]result, len(batch))
	for range len(batch) {
		// Waiting for a connection or a lock can outlast a caller's context:
		// a write whose caller was already told it failed must not be
		// applied after all.
		live := order[:0:0]
		for _, i := range order {
			if err := checkCtx(batch[i].ctx); err != nil {
				results[i] = result{err: err}
				continue
			}
			live = append(live, i)
		}
		if len(live) == 0 {
			return results, nil
		}
		order = live
		locked, err := s.pgRun(ctx, c, batch, order, results)
		if err == nil {
			return results, nil
		}
		if locked < 0 {
			// The writes still in the batch fail; those taken out to run
			// alone keep their deferred result: their own goroutine answers
			// them, and a write is answered once (its channel holds one).
			e := unavailable("write batch", err)
			for _, i := range order {
				results[i] = result{err: e}
			}
			return results, nil
		}
		// The statement at locked waited too long for a row lock: the
		// transaction rolled back. Retry it alone, the others together.
		req := batch[locked]
		results[locked] = result{deferred: true}
		s.w.done.Add(1) // Close waits for it too: no write lands after Close
		go func() {
			defer s.w.done.Done()
			req.out <- s.pgSolo(req)
		}()
		order = slices.DeleteFunc(order, func(i int) bool { return i == locked })
		for _, i := range order {
			results[i] = result{}
		}
	}
	return results, nil
}

// pgRun sends the statements of order as one pipeline on c and fills
// their results. On a row-lock timeout (or a deadlock) it returns the index
// of the statement that met it; for any other error, -1.
func (s *Store) pgRun(ctx context.Context, c *sql.Conn, batch []*writeReq, order []int, results []result) (int, error) {
	locked := -1
	err := c.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("driver connection is %T, not pgx", dc)
		}
		conn := sc.Conn()
		b := &pgx.Batch{}
		// Local to the batch's implicit transaction.
		b.Queue("SELECT set_config('lock_timeout', $1, true)", strconv.FormatInt(pgBatchLockTimeout.Milliseconds(), 10))
		for _, i := range order {
			b.Queue(batch[i].pg.query, batch[i].pg.args...)
		}
		br := conn.SendBatch(ctx, b)
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return badConn(conn, err)
		}
		fail := func(i int, err error) error {
			if isLockWait(err) {
				locked = i
			}
			_ = br.Close()
			return badConn(conn, err)
		}
		for _, i := range order {
			if !batch[i].pg.returning {
				if _, err := br.Exec(); err != nil {
					return fail(i, err)
				}
				continue
			}
			r, err := scanRow(br.QueryRow())
			switch {
			case errors.Is(err, pgx.ErrNoRows):
			case err != nil:
				return fail(i, err)
			default:
				results[i].found, results[i].row = true, r
			}
		}
		// Close reads the end of the pipeline: the implicit transaction
		// has committed when it returns nil.
		return badConn(conn, br.Close())
	})
	return locked, err
}

// isLockWait reports a statement cancelled by lock_timeout, or chosen as a
// deadlock victim.
func isLockWait(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "55P03" || pe.Code == "40P01")
}

// pgSolo runs one statement of a batch on its own, on the pool, bounded by
// its caller's context only.
func (s *Store) pgSolo(req *writeReq) result {
	if req.pg.returning {
		r, err := scanRow(s.db.QueryRowContext(req.ctx, req.pg.query, req.pg.args...))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return result{}
		case err != nil:
			return result{err: unavailable("write (alone, after a lock wait)", err)}
		}
		return result{found: true, row: r}
	}
	if _, err := s.db.ExecContext(req.ctx, req.pg.query, req.pg.args...); err != nil {
		return result{err: unavailable("write (alone, after a lock wait)", err)}
	}
	return result{}
}

// badConn makes database/sql drop a connection that pgx has closed.
func badConn(conn *pgx.Conn, err error) error {
	if err != nil && conn.IsClosed() {
		return fmt.Errorf("%w: %w", driver.ErrBadConn, err)
	}
	return err
}

// pgQueryRow runs a compare-and-set statement, through the batch when there
// is one. It returns sql.ErrNoRows when the statement matched no row.
func (s *Store) pgQueryRow(ctx context.Context, id, what, query string, args []any) (row, error) {
	if s.w == nil {
		r, err := scanRow(s.db.QueryRowContext(ctx, query, args...))
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return row{}, unavailable(what+" "+id, err)
		}
		return r, err
	}
	res := s.w.do(ctx, &writeReq{id: id, pg: &pgStmt{query: query, args: args, returning: true}})
	if res.err != nil {
		return row{}, res.err
	}
	if !res.found {
		return row{}, sql.ErrNoRows
	}
	return res.row, nil
}

func (s *Store) pgExec(ctx context.Context, id, what, query string, args []any) error {
	if s.w == nil {
		if _, err := s.db.ExecContext(ctx, query, args...); err != nil {
			return unavailable(what+" "+id, err)
		}
		return nil
	}
	return s.w.do(ctx, &writeReq{id: id, pg: &pgStmt{query: query, args: args}}).err
}

// pgText checks a string PostgreSQL's TEXT would refuse (invalid UTF-8, NUL),
// so that such a value fails its own call with a clear error rather than
// the whole batch it would share.
func pgText(field, v string) error {
	if !utf8.ValidString(v) {
		return fmt.Errorf("sqlstore: %s is not valid UTF-8", field)
	}
	if strings.IndexByte(v, 0) >= 0 {
		return fmt.Errorf("sqlstore: %s contains a NUL byte", field)
	}
	return nil
}

func pgCheckRecord(rec keystore.Record) error {
	for _, f := range []struct{ name, v string }{
		{"OperationID", rec.OperationID}, {"Key", rec.Key}, {"Kind", rec.Kind},
		{"Fingerprint", rec.Fingerprint}, {"ResultRef", rec.ResultRef}, {"Error", rec.Error},
	} {
		if err := pgText(f.name, f.v); err != nil {
			return err
		}
	}
	return nil
}
