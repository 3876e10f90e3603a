package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// ErrAsyncCommit is wrapped by the error of Migrate, and of the first
// Create of a Store that was not migrated, on a PostgreSQL session whose
// synchronous_commit is off: a commit returns before it is on disk, so a
// server crash can lose records the Store acknowledged (SAFETY rule 13).
// AllowAsyncCommit opts out.
var ErrAsyncCommit = errors.New("sqlstore: PostgreSQL synchronous_commit is off: a record acknowledged as committed can be lost in a server crash")

// AllowAsyncCommit opts out, by name, of the check that refuses a
// PostgreSQL session with synchronous_commit off: for a database whose loss
// of the last commits is acceptable (a test or development database). A
// crash can then lose acknowledged records; the Store detects that as
// amnesia when it can (see the package documentation) and refuses Create
// until the loss is accepted. keystore/storeurl: ?async_commit=1.
func AllowAsyncCommit() Option {
	return func(c *config) error {
		c.allowAsync = true
		return nil
	}
}

// checkDurable refuses a PostgreSQL session that commits asynchronously,
// once per Store (it is read again after a failure).
func (s *Store) checkDurable(ctx context.Context) error {
	if s.dialect != Postgres || s.allowAsync || s.durableOK.Load() {
		return nil
	}
	var v string
	if err := s.db.QueryRowContext(ctx, "SHOW synchronous_commit").Scan(&v); err != nil {
		return unavailable("SHOW synchronous_commit", err)
	}
	if strings.EqualFold(strings.TrimSpace(v), "off") {
		return fmt.Errorf("%w (SHOW synchronous_commit = %q); set it on for this database or role, or pass sqlstore.AllowAsyncCommit() (storeurl: ?async_commit=1) if losing acknowledged records is acceptable", ErrAsyncCommit, v)
	}
	s.durableOK.Store(true)
	return nil
}
