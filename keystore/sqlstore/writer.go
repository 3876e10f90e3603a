package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

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
	// keep holds one connection across batches: the Store owns db and it
	// has that one connection only. With
	// the caller's db, each batch borrows a connection and gives it back.
	keep bool
	conn *sql.Conn // the kept connection; only the writer goroutine uses it

	// applyFn applies one batch: apply (SQLite) or Store.pgApply. A
	// result marked deferred is answered by the goroutine that deferred
	// it, whatever the error.
	applyFn func([]*writeReq) ([]result, error)
	// checkFile (OpenSQLite) runs before each batch: an error fails the
	// batch and drops the connection (Store.checkFile).
	checkFile func(context.Context) error
	// stamp (OpenSQLite) runs in each batch before COMMIT and stamped
	// after it (Store.stamp: the generation in the file beside).
	stamp   func(context.Context, *sql.Conn, int64) (epoch string, gen int64, lost, err error)
	stamped func(string, int64)
	// beforeCommit, if set (tests only), runs before each batch's COMMIT.
	beforeCommit func()

	mu     sync.RWMutex // held for reading while enqueueing; Close takes it to stop new writes
	closed bool
	queue  chan *writeReq
	quit   chan struct{}
	done   sync.WaitGroup // one per run goroutine
}

// op decides one write against the batch's view of the rows at database
// time now (ms), changing that view; the batch writes the changed rows once
// at its end. It runs no SQL: SQLite parses every statement anew (the driver
// keeps no prepared statements), which costs more than running it, so a
// batch reads its rows with a few SELECTs and writes each changed row once,
// with the smallest statement for the change (see view).
type op func(v *view, now int64) result

type result struct {
	rec   keystore.Record
	n     int
	err   error  // the write's own answer (ErrExists...), decided in the batch
	found bool   // PostgreSQL: the statement returned its row
	row   row    // PostgreSQL: that row
	epoch string // Create: the table's epoch it was checked against
	// deferred: the write is answered by another goroutine (a PostgreSQL
	// statement retried alone after a lock timeout), not by the batch.
	deferred bool
}

type writeReq struct {
	ctx   context.Context
	id    string   // the row op reads and writes
	extra []string // other rows op reads (a Create's loss check)
	op    op
	del   *deleteReq  // instead of op: DeleteExpired, run as SQL in the batch
	pg    *pgStmt     // PostgreSQL: one statement of the pipelined batch
	out   chan result // buffered: the writer never blocks on a caller that left
	// claim (DeleteExpired only) decides who wins when the caller's context
	// ends while its delete is in a batch: the caller, before the batch runs
	// the delete (claimLeft: the batch skips it), or the batch (claimTaken:
	// the caller waits for its answer). A delete the batch commits is then
	// always counted by its caller: a reap never reports fewer removals
	// than it made.
	claim atomic.Int32
}

// The states of writeReq.claim.
const (
	claimOpen  int32 = iota // neither the caller nor the batch has decided
	claimLeft               // the caller gave up first: the delete is not run
	claimTaken              // the batch runs the delete: the caller waits for its count
)

type deleteReq struct {
	before int64 // ms, exclusive
	limit  int
}

func startWriter(db *sql.DB, q queries, c config, callerDB bool, checkFile func(context.Context) error) *writer {
	w := newWriter(db, q, c)
	w.checkFile = checkFile
	w.applyFn = w.apply
	w.keep = !callerDB
	if callerDB {
		w.pragmas = []string{
			"PRAGMA synchronous=FULL",
			fmt.Sprintf("PRAGMA busy_timeout=%d", c.busyTimeout.Milliseconds()),
		}
	}
	w.start(1)
	return w
}

// newWriter returns a writer without its apply function; start it with
// go w.run() once applyFn is set.
func newWriter(db *sql.DB, q queries, c config) *writer {
	return &writer{
		db:       db,
		q:        q,
		maxBatch: c.maxBatch,
		queue:    make(chan *writeReq, c.maxBatch),
		quit:     make(chan struct{}),
	}
}

// do queues o and waits for its answer. If ctx ends first, do returns at
// once; the write may still be committed by a batch already under way (as
// with any database whose reply is lost). A delete the batch has begun is
// the exception: do waits for its count (see writeReq.claim), which comes
// after that batch's COMMIT, with no further wait for the lock.
func (w *writer) do(ctx context.Context, req *writeReq) result {
	if err := checkCtx(ctx); err != nil {
		return result{err: err}
	}
	req.ctx, req.out = ctx, make(chan result, 1)
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
		// The answer may have arrived at the same moment: a committed write
		// must not be reported as failed when it can be known.
		select {
		case r := <-req.out:
			return r
		default:
		}
		if req.del != nil && !req.claim.CompareAndSwap(claimOpen, claimLeft) {
			// The batch already runs this delete, holding the write lock
			// (no more waiting for another process): its answer follows
			// its COMMIT, and the rows it removed must be counted.
			return <-req.out
		}
		return result{err: checkCtx(ctx)}
	}
}

// close stops taking writes, answers every queued one and waits for the
// writer goroutines to end, and for the writes they run alone (each
// bounded by its call's timeout).
func (w *writer) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	close(w.quit)
	w.done.Wait()
}

// start runs n goroutines taking batches from the queue. SQLite has one:
// its single connection. PostgreSQL can have several batches in flight, so
// that one is sent while another waits for its commit.
func (w *writer) start(n int) {
	w.done.Add(n)
	for range n {
		go w.run()
	}
}

func (w *writer) run() {
	defer w.done.Done()
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
					if w.conn != nil {
						_ = w.conn.Close()
						w.conn = nil
					}
					return
				}
			}
		}
	}
}

// startElastic runs one dispatcher that sends a batch at a time while
// batches answer within stuckAfter, and starts the next one beside those
// still running after it, up to maxInFlight at once (see pgbatch.go).
func (w *writer) startElastic(maxInFlight int, stuckAfter time.Duration) {
	w.done.Add(1)
	go w.dispatch(maxInFlight, stuckAfter)
}

func (w *writer) dispatch(maxInFlight int, stuckAfter time.Duration) {
	defer w.done.Done()
	finished := make(chan time.Time, maxInFlight) // start times of ended batches
	inFlight := map[time.Time]int{}               // start time → batches started then
	n := 0
	var wg sync.WaitGroup
	defer wg.Wait()
	ended := func(at time.Time) {
		if inFlight[at]--; inFlight[at] == 0 {
			delete(inFlight, at)
		}
		n--
	}
	// admit waits until a batch may start: none in flight, or every one in
	// flight older than stuckAfter and fewer than maxInFlight.
	admit := func() {
		for n > 0 {
			youngest := time.Time{}
			for at := range inFlight {
				if at.After(youngest) {
					youngest = at
				}
			}
			wait := time.Until(youngest.Add(stuckAfter))
			if n < maxInFlight && wait <= 0 {
				return
			}
			if n >= maxInFlight {
				ended(<-finished)
				continue
			}
			t := time.NewTimer(wait)
			select {
			case at := <-finished:
				ended(at)
			case <-t.C:
			}
			t.Stop()
		}
	}
	start := func(first *writeReq) {
		admit()
		batch := w.collect(first)
		at := time.Now()
		inFlight[at]++
		n++
		wg.Go(func() {
			w.execute(batch)
			finished <- at
		})
	}
	for {
		select {
		case at := <-finished:
			ended(at)
		case req := <-w.queue:
			start(req)
		case <-w.quit:
			for {
				select {
				case req := <-w.queue:
					start(req)
				default:
					return
				}
			}
		}
	}
}

func (w *writer) batch(first *writeReq) { w.execute(w.collect(first)) }

// collect takes first and whatever else is queued, up to maxBatch.
func (w *writer) collect(first *writeReq) []*writeReq {
	batch := []*writeReq{first}
	for len(batch) < w.maxBatch {
		select {
		case req := <-w.queue:
			batch = append(batch, req)
		default:
			return batch
		}
	}
	return batch
}

// execute applies a batch and answers each of its writes.
func (w *writer) execute(batch []*writeReq) {
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
	results, err := w.applyFn(live)
	for i, req := range live {
		switch {
		case results != nil && results[i].deferred:
			// Answered by whoever deferred it: each write is answered
			// once, or the second send would block on its full channel.
		case err != nil:
			req.out <- result{err: err}
		default:
			req.out <- results[i]
		}
	}
}

// apply runs the batch in one transaction on one connection. The context is
// not any caller's: once begun, a batch runs to COMMIT or ROLLBACK (SQLite's
// busy_timeout bounds the wait for the lock).
func (w *writer) apply(batch []*writeReq) (results []result, err error) {
	ctx := context.Background()
	if w.checkFile != nil {
		if err := w.checkFile(ctx); err != nil {
			if w.conn != nil {
				_ = w.conn.Raw(func(any) error { return driver.ErrBadConn })
				_ = w.conn.Close()
				w.conn = nil
			}
			return nil, err
		}
	}
	c := w.conn
	if c == nil {
		if c, err = w.db.Conn(ctx); err != nil {
			return nil, unavailable("write: connect", err)
		}
	}
	defer func() {
		if err != nil {
			// Discard the connection rather than guess what state a failed
			// statement left it in; database/sql opens a new one next time.
			_, _ = c.ExecContext(ctx, "ROLLBACK")
			_ = c.Raw(func(any) error { return driver.ErrBadConn })
		}
		if err != nil || !w.keep {
			_ = c.Close()
			w.conn = nil
			return
		}
		w.conn = c
	}()
	for _, p := range w.pragmas {
		if _, err := c.ExecContext(ctx, p); err != nil {
			return nil, unavailable("write: "+p, err)
		}
	}
	// IMMEDIATE takes the write lock now, so the rows read to decide each
	// write are the rows the writes apply to, even with other processes.
	if _, err := c.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return nil, unavailable("write: begin", err)
	}
	var now int64
	if err := c.QueryRowContext(ctx, w.q.now).Scan(&now); err != nil {
		return nil, unavailable("write: clock", err)
	}
	if w.stamp != nil {
		if _, err := c.ExecContext(ctx, "SAVEPOINT "+batchSavepoint); err != nil {
			return nil, unavailable("write: savepoint", err)
		}
	}
	ids := make([]string, 0, len(batch))
	for _, req := range batch {
		if req.del == nil {
			ids = append(ids, req.id)
			for _, id := range req.extra {
				if id != "" {
					ids = append(ids, id)
				}
			}
		}
	}
	v, err := loadView(ctx, c, w.q, ids)
	if err != nil {
		return nil, err
	}
	results = make([]result, len(batch))
	for i, req := range batch {
		// BEGIN may have waited for another process's lock: a caller that
		// gave up meanwhile gets its error and its write is left out.
		if err := checkCtx(req.ctx); err != nil {
			results[i] = result{err: err}
			continue
		}
		if req.del == nil {
			results[i] = req.op(v, now)
			continue
		}
		if !req.claim.CompareAndSwap(claimOpen, claimTaken) {
			// Its caller left (claimLeft): nobody would count what it removes.
			results[i] = result{err: checkCtx(req.ctx)}
			continue
		}
		// A delete sees the writes queued before it, and those after it
		// see what it removed.
		if err := v.flush(ctx, c); err != nil {
			return nil, err
		}
		res, err := c.ExecContext(ctx, w.q.deleteExpired, req.del.before, int64(req.del.limit))
		if err != nil {
			return nil, unavailable("delete expired", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return nil, unavailable("delete expired", err)
		}
		if n > 0 {
			if _, err := c.ExecContext(ctx, w.q.reapedMark, markerID, req.del.before); err != nil {
				return nil, unavailable("delete expired: marker", err)
			}
		}
		results[i] = result{n: int(n)}
		if v, err = loadView(ctx, c, w.q, ids); err != nil {
			return nil, err
		}
	}
	if err := v.flush(ctx, c); err != nil {
		return nil, err
	}
	var (
		epoch string
		gen   int64
		lost  error
	)
	if w.stamp != nil {
		if epoch, gen, lost, err = w.stamp(ctx, c, now); err != nil {
			return nil, err
		}
	}
	if w.beforeCommit != nil {
		w.beforeCommit()
	}
	if _, err := c.ExecContext(ctx, "COMMIT"); err != nil {
		return nil, unavailable("write: commit", err)
	}
	if lost != nil {
		return nil, lost // the batch's writes were rolled back; the table is marked lost
	}
	if w.stamped != nil {
		w.stamped(epoch, gen)
	}
	return results, nil
}
