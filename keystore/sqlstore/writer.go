package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"sync"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// writer is SQLite's group commit. SQLite has one writer at a time and its
// busy handler is unfair (a waiting connection sleeps and retries, so under
// load some callers starve for seconds). Instead of letting every caller
// fight for the lock, one goroutine takes the queued writes and applies as
// many as are waiting in one IMMEDIATE transaction: each write's own answer
// (ErrExists, ErrLeaseHeld...) is decided inside the transaction by reading
// the row first, so a refused write changes nothing and the others still
// commit; one COMMIT, one fsync, then answers the whole batch.
type writer struct {
	db       *sql.DB
	q        queries
	maxBatch int
	// pragmas run on the batch's connection before BEGIN, when the Store
	// does not own the connection's DSN (New with the caller's db).
	pragmas []string

	mu     sync.RWMutex // held for reading while enqueueing; Close takes it to stop new writes
	closed bool
	queue  chan *writeReq
	quit   chan struct{}
	done   chan struct{}
}

// op applies one write inside the batch transaction at database time now
// (ms). A non-nil error is a database failure: the batch is rolled back.
type op func(ctx context.Context, c *sql.Conn, now int64) (result, error)

type result struct {
	rec keystore.Record
	n   int
	err error // the write's own answer (ErrExists...), decided in the batch
}

type writeReq struct {
	ctx context.Context
	op  op
	out chan result // buffered: the writer never blocks on a caller that left
}

func startWriter(db *sql.DB, q queries, c config, callerDB bool) *writer {
	w := &writer{
		db:       db,
		q:        q,
		maxBatch: c.maxBatch,
		queue:    make(chan *writeReq, c.maxBatch),
		quit:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	if callerDB {
		w.pragmas = []string{
			"PRAGMA synchronous=FULL",
			fmt.Sprintf("PRAGMA busy_timeout=%d", c.busyTimeout.Milliseconds()),
		}
	}
	go w.run()
	return w
}

// do queues o and waits for its answer. If ctx ends first, do returns at
// once; the write may still be committed by a batch already under way (as
// with any database whose reply is lost).
func (w *writer) do(ctx context.Context, o op) result {
	if err := checkCtx(ctx); err != nil {
		return result{err: err}
	}
	req := &writeReq{ctx: ctx, op: o, out: make(chan result, 1)}
	w.mu.RLock()
	if w.closed {
		w.mu.RUnlock()
		return result{err: fmt.Errorf("%w: %w", keystore.ErrUnavailable, ErrClosed)}
	}
	select {
	case w.queue <- req:
		w.mu.RUnlock()
	case <-ctx.Done():
		w.mu.RUnlock()
		return result{err: checkCtx(ctx)}
	}
	select {
	case r := <-req.out:
		return r
	case <-ctx.Done():
		return result{err: checkCtx(ctx)}
	}
}

// close stops taking writes, answers every queued one and waits for the
// writer goroutine to end.
func (w *writer) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	close(w.quit)
	<-w.done
}

func (w *writer) run() {
	defer close(w.done)
	for {
		select {
		case req := <-w.queue:
			w.batch(req)
		case <-w.quit:
			// No enqueue can start any more (closed is set under mu):
			// what is queued now is all there will be.
			for {
				select {
				case req := <-w.queue:
					w.batch(req)
				default:
					return
				}
			}
		}
	}
}

func (w *writer) batch(first *writeReq) {
	batch := []*writeReq{first}
collect:
	for len(batch) < w.maxBatch {
		select {
		case req := <-w.queue:
			batch = append(batch, req)
		default:
			break collect
		}
	}
	// Callers that gave up before their write was applied get their
	// context's error, and their write is not applied.
	live := batch[:0]
	for _, req := range batch {
		if err := checkCtx(req.ctx); err != nil {
			req.out <- result{err: err}
			continue
		}
		live = append(live, req)
	}
	if len(live) == 0 {
		return
	}
	results, err := w.apply(live)
	for i, req := range live {
		if err != nil {
			req.out <- result{err: err}
		} else {
			req.out <- results[i]
		}
	}
}

// apply runs the batch in one transaction on one connection. The context is
// not any caller's: once begun, a batch runs to COMMIT or ROLLBACK (SQLite's
// busy_timeout bounds the wait for the lock).
func (w *writer) apply(batch []*writeReq) (results []result, err error) {
	ctx := context.Background()
	c, err := w.db.Conn(ctx)
	if err != nil {
		return nil, unavailable("write: connect", err)
	}
	defer func() {
		if err != nil {
			// Discard the connection rather than guess what state a failed
			// statement left it in; database/sql opens a new one next time.
			_, _ = c.ExecContext(ctx, "ROLLBACK")
			_ = c.Raw(func(any) error { return driver.ErrBadConn })
		}
		_ = c.Close()
	}()
	for _, p := range w.pragmas {
		if _, err := c.ExecContext(ctx, p); err != nil {
			return nil, unavailable("write: "+p, err)
		}
	}
	// IMMEDIATE takes the write lock now, so the reads that decide each
	// write see what the writes will apply to.
	if _, err := c.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return nil, unavailable("write: begin", err)
	}
	var now int64
	if err := c.QueryRowContext(ctx, w.q.now).Scan(&now); err != nil {
		return nil, unavailable("write: clock", err)
	}
	results = make([]result, len(batch))
	for i, req := range batch {
		if results[i], err = req.op(ctx, c, now); err != nil {
			return nil, err
		}
	}
	if _, err := c.ExecContext(ctx, "COMMIT"); err != nil {
		return nil, unavailable("write: commit", err)
	}
	return results, nil
}
