package redisinbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// ErrVolatile is wrapped by New's error on a Redis that keeps no
// append-only file (or will not say whether it does): an event answered 200
// would be lost on a restart, and PagPolar would not send it again
// (SAFETY rule 13).
var ErrVolatile = errors.New("redisinbox: Redis keeps no append-only file: an event answered 200 can be lost on a restart")

// AllowVolatile opts out, by name, of New's refusal of a Redis without an
// append-only file: for a development or test Redis whose loss of events is
// acceptable. New then logs a warning instead.
func AllowVolatile() Option { return func(s *Store) { s.allowVolatile = true } }

// checkDurable refuses a Redis (every master of a Cluster) that does not
// keep an append-only file, unless AllowVolatile was given.
func (s *Store) checkDurable(ctx context.Context) error {
	var mu sync.Mutex // ForEachMaster runs its function on every master at once
	var errs []error
	check := func(ctx context.Context, c redis.Cmdable, addr string) error {
		if err := s.checkNode(ctx, c, addr); err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
		return nil
	}
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		if err := c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			return check(ctx, n, n.Options().Addr)
		}); err != nil {
			return unavailable("start: reading persistence settings", "", err)
		}
	case *redis.Client:
		_ = check(ctx, c, c.Options().Addr)
	default:
		_ = check(ctx, s.client, fmt.Sprintf("%T", s.client))
	}
	if len(errs) == 0 {
		return nil
	}
	err := errors.Join(errs...)
	if s.allowVolatile {
		s.log.WarnContext(ctx, "redisinbox: AllowVolatile: running on a Redis that may keep nothing on disk; a restart can lose events already answered 200", slog.Any("reason", err))
		return nil
	}
	return fmt.Errorf("%w; set appendonly yes (appendfsync always, or everysec), or pass redisinbox.AllowVolatile() if losing acknowledged events is acceptable: %w", ErrVolatile, err)
}

// checkNode returns an error unless c reports an append-only file.
func (s *Store) checkNode(ctx context.Context, c redis.Cmdable, addr string) error {
	aof, cfgErr := appendOnly(ctx, c)
	if cfgErr != nil {
		return fmt.Errorf("%s: cannot tell whether it keeps an append-only file: %w", addr, cfgErr)
	}
	if !aof {
		return fmt.Errorf("%s: appendonly no", addr)
	}
	if m, err := c.ConfigGet(ctx, "appendfsync").Result(); err == nil && m["appendfsync"] == "no" {
		s.log.WarnContext(ctx, "redisinbox: appendfsync no: the OS decides when the AOF reaches disk, so a power loss can lose many seconds of events answered 200; use everysec or always",
			slog.String("redis", addr))
	}
	return nil
}

// appendOnly asks CONFIG GET appendonly, then INFO persistence (which
// managed services that block CONFIG usually allow).
func appendOnly(ctx context.Context, c redis.Cmdable) (bool, error) {
	m, cerr := c.ConfigGet(ctx, "appendonly").Result()
	if v, ok := m["appendonly"]; cerr == nil && ok {
		return v == "yes", nil
	}
	info, ierr := c.Info(ctx, "persistence").Result()
	if ierr == nil {
		for line := range strings.SplitSeq(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "aof_enabled:"); ok {
				return v == "1", nil
			}
		}
		ierr = errors.New("INFO persistence has no aof_enabled")
	}
	if cerr == nil {
		cerr = errors.New("CONFIG GET appendonly returned nothing")
	}
	return false, fmt.Errorf("CONFIG GET: %v; INFO: %v", cerr, ierr)
}
