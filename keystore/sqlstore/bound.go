package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// DefaultCallTimeout bounds every Store call: a call returns, with an
// error wrapping keystore.ErrUnavailable, within this long of starting (or
// by its context's deadline, if that comes first), whatever the database
// does: a frozen or blackholed connection, a row lock held by another
// session, a pool with no free connection. See the package documentation,
// "Bounded calls".
const DefaultCallTimeout = 5 * time.Second

// WithCallTimeout sets how long one Store call may take before it gives up
// with an error wrapping keystore.ErrUnavailable (default
// DefaultCallTimeout; at least 1 ms). A call that timed out may or may not
// have been committed, like any call whose reply was lost; the caller sends
// nothing on it.
func WithCallTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Millisecond {
			return fmt.Errorf("sqlstore: call timeout %v: want at least 1ms", d)
		}
		c.callTimeout = d
		return nil
	}
}

// callCtx bounds one call by the call timeout, unless ctx ends sooner.
func (s *Store) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= s.callTimeout {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.callTimeout)
}

// timedOut names the call timeout in err when a deadline ended the call.
func (s *Store) timedOut(ctx context.Context, err error) error {
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && !errors.Is(err, errCallTimeout) {
		return fmt.Errorf("%w (%w %v)", err, errCallTimeout, s.callTimeout)
	}
	return err
}

// errCallTimeout marks errors of calls ended by a deadline.
var errCallTimeout = errors.New("no answer within the call's deadline; the store's call timeout is")
