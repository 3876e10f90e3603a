package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pagpolar/pagpolar-go/keystore"
)

// pgStmt is one compare-and-set write of a PostgreSQL batch.
type pgStmt struct {
	query     string
	args      []any
	returning bool // the statement returns the row it wrote (or none)
}

// pgPipelines is how many batches may be in flight at once. Measured on a
// 2-core machine: 2 or 4 gave no more throughput than 1 (each batch already
// carries every waiting write) and a worse p99.
const pgPipelines = 1

// pgBatchTimeout bounds one pipelined batch: a database that stops
// answering fails the batch's callers (ErrUnavailable) instead of holding
// them forever.
const pgBatchTimeout = 30 * time.Second

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
	w.start(pgPipelines)
}

// pgApply runs a batch. Statements run in operation ID order, so that two
// processes' batches lock the rows they share in the same order and cannot
// deadlock; writes to one operation keep their queue order.
func (s *Store) pgApply(batch []*writeReq) ([]result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), pgBatchTimeout)
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
	// Waiting for a connection can outlast a caller's context: a write whose
	// caller was already told it failed must not be applied after all.
	live := order[:0]
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
	err = c.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("driver connection is %T, not pgx", dc)
		}
		conn := sc.Conn()
		b := &pgx.Batch{}
		for _, i := range order {
			b.Queue(batch[i].pg.query, batch[i].pg.args...)
		}
		br := conn.SendBatch(ctx, b)
		for _, i := range order {
			if !batch[i].pg.returning {
				if _, err := br.Exec(); err != nil {
					_ = br.Close()
					return badConn(conn, err)
				}
				continue
			}
			r, err := scanRow(br.QueryRow())
			switch {
			case errors.Is(err, pgx.ErrNoRows):
			case err != nil:
				_ = br.Close()
				return badConn(conn, err)
			default:
				results[i].found, results[i].row = true, r
			}
		}
		// Close reads the end of the pipeline: the implicit transaction
		// has committed when it returns nil.
		return badConn(conn, br.Close())
	})
	if err != nil {
		return nil, unavailable("write batch", err)
	}
	return results, nil
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
