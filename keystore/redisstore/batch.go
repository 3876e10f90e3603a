package redisstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Concurrent calls share round trips. A Store runs at most maxBusy
// pipelines at once; a call that finds a free slot runs at once, alone, on
// its own goroutine and context, so a lone caller pays nothing extra. Calls
// arriving while every slot is busy queue up, and the next free slot sends
// up to maxBatch of them as one pipeline on one connection: one write and
// one read for the client and for Redis instead of one per call, and, with
// a durability mode, one WAIT/WAITAOF for the whole batch (Redis's
// group commit of the AOF already shares the fsync). This is what lets
// throughput grow with the number of callers on a busy machine.
const (
	defaultMaxBusy  = 4
	defaultMaxBatch = 64
)

// call is one script run.
type call struct {
	ctx     context.Context
	sc      *redis.Script
	keys    []string
	args    []any
	durable bool

	// Set before done is closed.
	res     any
	waitErr error
	err     error
	done    chan struct{}
}

type batcher struct {
	exec     func(ctx context.Context, calls []*call) // runs calls, sets their results, closes done
	maxBusy  int
	maxBatch int
	// detach runs even a call that finds a free slot on a goroutine of its
	// own, so that its caller can stop waiting when its context ends: for
	// clients that do not bound socket waits by the context.
	detach bool

	mu    sync.Mutex
	queue []*call // non-empty only while busy == maxBusy
	busy  int
}

// do runs c and returns its results, or c's context error if the context
// ends first. A call dropped from the queue was never sent; a call whose
// context ended while its batch was in flight may or may not have run
// (exactly like a network timeout), and the caller is told it is
// unavailable.
func (b *batcher) do(c *call) (res any, waitErr, err error) {
	b.mu.Lock()
	if b.busy < b.maxBusy {
		b.busy++
		b.mu.Unlock()
		if !b.detach {
			b.exec(c.ctx, []*call{c})
			b.release()
			return c.res, c.waitErr, c.err
		}
		go func() {
			b.exec(c.ctx, []*call{c})
			b.release()
		}()
	} else {
		b.queue = append(b.queue, c)
		b.mu.Unlock()
	}
	select {
	case <-c.done:
		return c.res, c.waitErr, c.err
	case <-c.ctx.Done():
		if b.remove(c) {
			return nil, nil, c.ctx.Err()
		}
		select {
		case <-c.done:
			return c.res, c.waitErr, c.err
		default:
			return nil, nil, c.ctx.Err()
		}
	}
}

// idle reports that no call is running or queued.
func (b *batcher) idle() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.busy == 0 && len(b.queue) == 0
}

func (b *batcher) remove(c *call) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, q := range b.queue {
		if q == c {
			b.queue = append(b.queue[:i], b.queue[i+1:]...)
			return true
		}
	}
	return false
}

// take removes the next batch from the queue; b.mu is held.
func (b *batcher) take() []*call {
	n := min(len(b.queue), b.maxBatch)
	batch := make([]*call, n)
	copy(batch, b.queue)
	if n == len(b.queue) {
		b.queue = nil
	} else {
		b.queue = b.queue[n:]
	}
	return batch
}

// release frees a slot, or hands it to a goroutine that drains the queue
// so the caller whose call ran can return.
func (b *batcher) release() {
	b.mu.Lock()
	if len(b.queue) == 0 {
		b.busy--
		b.mu.Unlock()
		return
	}
	batch := b.take()
	b.mu.Unlock()
	go b.drain(batch)
}

// drain runs queued batches until the queue is empty, then frees its slot
// and ends.
func (b *batcher) drain(batch []*call) {
	for {
		ctx, cancel := batchContext(batch)
		b.exec(ctx, batch)
		cancel()
		b.mu.Lock()
		if len(b.queue) == 0 {
			b.busy--
			b.mu.Unlock()
			return
		}
		batch = b.take()
		b.mu.Unlock()
	}
}

// batchContext bounds a shared pipeline by the latest deadline of its
// calls (none if one has none). It is not cancelled with any one caller:
// each caller stops waiting on its own context instead.
func batchContext(batch []*call) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, c := range batch {
		dl, ok := c.ctx.Deadline()
		if !ok {
			return context.WithCancel(context.Background())
		}
		if dl.After(latest) {
			latest = dl
		}
	}
	return context.WithDeadline(context.Background(), latest)
}

// execBatch sends calls as pipelines: one on the client, or, when a call
// must be durable, one per master followed by WAIT/WAITAOF, since a wait
// only covers the writes made on its own connection.
func (s *Store) execBatch(ctx context.Context, calls []*call) {
	live := make([]*call, 0, len(calls))
	for _, c := range calls {
		if err := c.ctx.Err(); err != nil {
			c.err = err // not sent
			close(c.done)
			continue
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	durable := false
	for _, c := range live {
		durable = durable || c.durable
	}
	if !durable {
		_ = s.pipeline(ctx, s.client.Pipelined, live, false)
		return
	}
	groups := map[*redis.Client][]*call{}
	var order []*redis.Client
	for _, c := range live {
		node, err := s.nodeFor(ctx, c.keys[0])
		if err != nil {
			c.err = err
			close(c.done)
			continue
		}
		if _, ok := groups[node]; !ok {
			order = append(order, node)
		}
		groups[node] = append(groups[node], c)
	}
	if len(order) == 1 {
		s.durablePipeline(ctx, order[0], groups[order[0]])
		return
	}
	var wg sync.WaitGroup
	for _, node := range order {
		wg.Add(1)
		go func(node *redis.Client, calls []*call) {
			defer wg.Done()
			s.durablePipeline(ctx, node, calls)
		}(node, groups[node])
	}
	wg.Wait()
}

// durablePipeline sends calls to node followed by the wait, unless the
// wait gate says node cannot confirm them: then they fail at once, not
// sent (wait.go).
func (s *Store) durablePipeline(ctx context.Context, node *redis.Client, calls []*call) {
	if err := s.admit(ctx, node); err != nil {
		if !errors.Is(err, ErrNotDurable) {
			// The master did not answer: it may have failed over. A node
			// client does not learn that by itself; the cluster client
			// does on its next use of the slot map.
			s.reloadSlots(ctx)
		}
		for _, c := range calls {
			c.err = err
			close(c.done)
		}
		return
	}
	if waitErr := s.pipeline(ctx, node.Pipelined, calls, true); waitErr != nil {
		s.fellShort(node, waitErr)
		s.reloadSlots(ctx)
	}
}

// noAnswer is told of every call that failed: when the server did not
// answer (a network error, not a refused command), a cluster client reads
// the slot map again, since the master may have failed over; go-redis
// would otherwise go on dialing the dead master until its slot map goes
// stale (10 s).
func (s *Store) noAnswer(ctx context.Context, err error) {
	var rerr redis.Error
	if err != nil && (!errors.As(err, &rerr) || isTransient(rerr)) {
		s.reloadSlots(ctx)
	}
}

// reloadSlots makes a cluster client read the slot map again (lazily).
func (s *Store) reloadSlots(ctx context.Context) {
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		cc.ReloadState(ctx)
	}
}

type pipelinedFunc func(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)

// pipeline runs calls with EVALSHA in one pipeline (plus the wait), then
// the ones Redis did not know the script for with EVAL, and delivers every
// result. It returns the wait's error, if any.
func (s *Store) pipeline(ctx context.Context, pipelined pipelinedFunc, calls []*call, wait bool) error {
	run := func(calls []*call, full bool) (cmds []*redis.Cmd, waitErr error) {
		cmds = make([]*redis.Cmd, len(calls))
		var w *redis.Cmd
		// Errors are read per command below; when no connection could be
		// had, go-redis reports it only here.
		_, pipeErr := pipelined(ctx, func(p redis.Pipeliner) error {
			for i, c := range calls {
				if full {
					cmds[i] = c.sc.Eval(ctx, p, c.keys, c.args...)
				} else {
					cmds[i] = c.sc.EvalSha(ctx, p, c.keys, c.args...)
				}
			}
			if wait {
				w = s.waitCmd(ctx, p)
			}
			return nil
		})
		for _, cmd := range cmds {
			if cmd.Err() == nil && cmd.Val() == nil && pipeErr != nil {
				cmd.SetErr(pipeErr)
			}
		}
		if wait {
			if w.Err() == nil && w.Val() == nil && pipeErr != nil {
				w.SetErr(pipeErr)
			}
			waitErr = s.checkWait(w)
		}
		return cmds, waitErr
	}
	deliver := func(c *call, cmd *redis.Cmd, waitErr error) {
		c.res, c.err = cmd.Val(), cmd.Err()
		if c.durable {
			c.waitErr = waitErr
		}
		if cc, ok := s.client.(*redis.ClusterClient); ok && wait && c.err != nil &&
			(redis.HasErrorPrefix(c.err, "MOVED") || redis.HasErrorPrefix(c.err, "ASK")) {
			// A node client does not follow redirections; let the cluster
			// client learn the new slot map for the next call.
			cc.ReloadState(ctx)
		}
		close(c.done)
	}
	cmds, waitErr := run(calls, false)
	var again []*call
	for i, c := range calls {
		if isNoScript(cmds[i].Err()) {
			again = append(again, c) // not run: safe to send again
			continue
		}
		deliver(c, cmds[i], waitErr)
	}
	if len(again) == 0 {
		return waitErr
	}
	cmds, waitErr2 := run(again, true)
	for i, c := range again {
		deliver(c, cmds[i], waitErr2)
	}
	if waitErr == nil {
		waitErr = waitErr2
	}
	return waitErr
}
