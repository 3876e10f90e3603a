package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// honoursContext reports whether client bounds its socket reads and writes
// by a command's context (ContextTimeoutEnabled). go-redis honours a
// context's deadline while it waits for a pooled connection, dials, or backs
// off between retries whatever that setting; only a read or write on an
// open connection ignores the context without it, and waits the client's
// ReadTimeout/WriteTimeout instead.
func honoursContext(client redis.UniversalClient) bool {
	switch c := client.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}

// callCtx bounds one call by the call timeout, unless ctx already ends
// sooner.
func (s *Store) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= s.cfg.callTimeout {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.cfg.callTimeout)
}

// timedOut names the call timeout in err when it, rather than the caller's
// own context, ended the call (cctx is callCtx's context derived from ctx).
func (s *Store) timedOut(ctx, cctx context.Context, err error) error {
	if cctx.Err() != nil && ctx.Err() == nil {
		return fmt.Errorf("no answer within the store's call timeout %s: %w", s.cfg.callTimeout, err)
	}
	return err
}

// bounded runs fn and returns by ctx's end even when the client does not
// honour ctx on an open connection: fn then runs on its own goroutine and
// is left to finish within the client's own timeouts, its result
// discarded. A call abandoned that way may or may not have reached Redis,
// exactly like one whose reply was lost; the caller is told ctx's error.
func (s *Store) bounded(ctx context.Context, fn func(context.Context) error) error {
	if s.honoursCtx {
		return fn(ctx)
	}
	done := make(chan error, 1)
	s.detached.Add(1)
	go func() {
		defer s.detached.Add(-1)
		done <- fn(ctx)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		select {
		case err := <-done:
			return err
		default:
			return ctx.Err()
		}
	}
}
