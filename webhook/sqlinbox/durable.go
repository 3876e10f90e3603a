package sqlinbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrAsyncCommit is wrapped by the error of OpenPostgres and New on a
// PostgreSQL session whose synchronous_commit is off: a commit returns
// before it is on disk, so a server crash can lose events the Inbox already
// answered 200 (SAFETY rule 13).
var ErrAsyncCommit = errors.New("sqlinbox: PostgreSQL synchronous_commit is off: an event answered 200 can be lost in a server crash")

// AllowAsyncCommit opts out, by name, of the start-up check that refuses a
// PostgreSQL session with synchronous_commit off: for a database whose loss
// of the last commits is acceptable (a test or development database). The
// Store then logs nothing and behaves as the setting says.
func AllowAsyncCommit() Option {
	return func(c *config) error {
		c.allowAsync = true
		return nil
	}
}

// durableTimeout bounds the start-up read of synchronous_commit.
const durableTimeout = 10 * time.Second

// checkDurable refuses a PostgreSQL session that commits asynchronously.
func (s *Store) checkDurable(c config) error {
	if s.dialect != Postgres || c.allowAsync {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), durableTimeout)
	defer cancel()
	var v string
	if err := s.wdb.QueryRowContext(ctx, "SHOW synchronous_commit").Scan(&v); err != nil {
		return unavailable("start: SHOW synchronous_commit", "", err)
	}
	if strings.EqualFold(strings.TrimSpace(v), "off") {
		return fmt.Errorf("%w (SHOW synchronous_commit = %q); set it on for this database or role, or pass sqlinbox.AllowAsyncCommit() if losing acknowledged events is acceptable", ErrAsyncCommit, v)
	}
	return nil
}
