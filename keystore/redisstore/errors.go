package redisstore

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// ErrNotDurable reports that WAIT or WAITAOF did not confirm a write within
// its timeout. The write was applied on the master and may or may not
// survive; errors wrapping it also wrap keystore.ErrUnavailable, so callers
// send nothing.
var ErrNotDurable = errors.New("redisstore: write not confirmed durable")

// ErrVolatile is wrapped by New's error on a Redis that keeps no
// append-only file (or will not say whether it does): a restart would
// forget the idempotency records it acknowledged (SAFETY rule 13).
// AllowVolatile opts out.
var ErrVolatile = errors.New("redisstore: Redis keeps no append-only file: a restart forgets the idempotency records it acknowledged")

// ErrLayout is wrapped by the error of a call that met a record, or of a
// New that met a prefix, stored in another layout than recordLayout (a
// hash, as an earlier development version of this package wrote). The
// store neither reads nor converts it: use a new prefix.
var ErrLayout = errors.New("redisstore: record stored in another layout")

// isTransient reports server errors that mean "not now" rather than "this
// call is wrong": the store is unavailable and a later call may succeed.
func isTransient(rerr redis.Error) bool {
	msg := rerr.Error()
	for _, p := range []string{
		"LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "MOVED", "ASK",
		"BUSY", "OOM", "NOREPLICAS", "MISCONF", "ERR max number of clients",
	} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// wrapErr classifies an error from go-redis. Everything that is not an
// error reply from the server (network, timeouts, pool, closed client,
// context) and transient server replies wrap keystore.ErrUnavailable; other
// server replies (a script error, ACL denial) are returned as they are,
// named by the operation.
func wrapErr(op, id string, err error) error {
	what := op
	if id != "" {
		what = fmt.Sprintf("%s %q", op, id)
	}
	var rerr redis.Error
	if errors.As(err, &rerr) && !isTransient(rerr) {
		return fmt.Errorf("redisstore: %s: %w", what, err)
	}
	return fmt.Errorf("redisstore: %s: %w: %w", what, keystore.ErrUnavailable, err)
}

func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// layoutErr returns an error wrapping ErrLayout for err when it says that a
// record key holds something this layout did not write (a script's LAYOUT
// error, or WRONGTYPE from GET on a hash), or nil.
func layoutErr(err error) error {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return nil
	}
	msg := rerr.Error()
	switch {
	case strings.HasPrefix(msg, layoutErrPrefix):
		return fmt.Errorf("%w: %s", ErrLayout, strings.TrimPrefix(msg, layoutErrPrefix))
	case strings.HasPrefix(msg, "WRONGTYPE"):
		return fmt.Errorf("%w: the key is not a string (a hash or another type), not a record of layout %s: use a new prefix", ErrLayout, recordLayout)
	}
	return nil
}
