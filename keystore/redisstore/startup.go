package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// checkDurableClient rejects a durability mode the client cannot honour:
// WAIT must run on the connection of the write, which needs a client whose
// pipelines stay on one connection of the record's master, and its reply
// must arrive within the client's read timeout.
func (s *Store) checkDurableClient() error {
	d := s.cfg.durability
	if d.mode == durableNone {
		return nil
	}
	var rt time.Duration
	switch c := s.client.(type) {
	case *redis.Client:
		rt = c.Options().ReadTimeout
	case *redis.ClusterClient:
		rt = c.Options().ReadTimeout
	default:
		return fmt.Errorf("redisstore: %s: needs *redis.Client or *redis.ClusterClient, have %T", d, s.client)
	}
	if rt > 0 && d.timeout >= rt {
		return fmt.Errorf("redisstore: %s: timeout must be shorter than the client's ReadTimeout %v", d, rt)
	}
	return nil
}

// errNoParam: CONFIG GET answered without the parameter (a server that
// hides it).
var errNoParam = errors.New("parameter not returned")

// checkPersistence refuses a Redis whose reachable masters do not all keep
// an append-only file (or will not say), unless AllowVolatile was given;
// it logs what else is risky. Masters it cannot reach are skipped (a
// Cluster with a master down still starts); it fails, wrapping
// keystore.ErrUnavailable, only when no master answers.
func (s *Store) checkPersistence(ctx context.Context) error {
	var mu sync.Mutex // ForEachMaster runs its function on every master at once
	var volatile, down []string
	reached := 0
	check := func(ctx context.Context, c redis.Cmdable, addr string) {
		err := s.checkNode(ctx, c, addr)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil:
			reached++
		case errors.Is(err, keystore.ErrUnavailable):
			down = append(down, err.Error())
		default:
			reached++
			volatile = append(volatile, err.Error())
		}
	}
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		if err := c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			check(ctx, n, n.Options().Addr)
			return nil
		}); err != nil {
			return wrapErr("start: listing the Cluster's masters", "", err)
		}
	case *redis.Client:
		check(ctx, c, c.Options().Addr)
	default:
		check(ctx, s.client, fmt.Sprintf("%T", s.client))
	}
	if reached == 0 {
		return fmt.Errorf("redisstore: start: %w: no master answered: %s", keystore.ErrUnavailable, strings.Join(down, "; "))
	}
	for _, d := range down {
		s.cfg.logger.WarnContext(ctx, "redisstore: a master did not answer at start-up; its persistence settings were not checked", slog.String("error", d))
	}
	if len(volatile) == 0 {
		return nil
	}
	sort.Strings(volatile)
	reason := strings.Join(volatile, "; ")
	if s.cfg.allowVolatile {
		s.cfg.logger.WarnContext(ctx, "redisstore: AllowVolatile: running on a Redis that may keep nothing on disk; a restart forgets the idempotency records and Create then refuses until the loss is accepted (see Amnesia)",
			slog.String("reason", reason))
		return nil
	}
	return fmt.Errorf("%w: %s; set appendonly yes (appendfsync always, or everysec), or pass redisstore.AllowVolatile() (storeurl: ?volatile=1) if losing acknowledged records is acceptable", ErrVolatile, reason)
}

// checkNode returns an error unless c reports an append-only file: one
// wrapping keystore.ErrUnavailable when c does not answer, another when it
// keeps no AOF or will not say. It logs the other risky settings.
func (s *Store) checkNode(ctx context.Context, c redis.Cmdable, addr string) error {
	log := s.cfg.logger.With(slog.String("redis", addr))
	aof, known, err := appendOnly(ctx, c)
	if err != nil {
		return wrapErr("start: reading persistence settings of", addr, err)
	}
	if !known {
		return fmt.Errorf("%s: cannot tell whether it keeps an append-only file (CONFIG GET and INFO persistence both refused)", addr)
	}
	if !aof {
		return fmt.Errorf("%s: appendonly no", addr)
	}
	get := func(name string) (string, error) {
		m, err := c.ConfigGet(ctx, name).Result()
		if err != nil {
			return "", err
		}
		v, ok := m[name]
		if !ok {
			return "", fmt.Errorf("CONFIG GET %s: %w", name, errNoParam)
		}
		return v, nil
	}
	// An eviction policy over all keys lets Redis drop a pending record
	// under memory pressure; the operation could then be created (and
	// charged) again. volatile-* policies only evict keys with a TTL, which
	// this store sets on terminal records alone.
	if policy, perr := get("maxmemory-policy"); perr == nil && strings.HasPrefix(policy, "allkeys-") {
		log.WarnContext(ctx, "redisstore: maxmemory-policy "+policy+" can evict unfinished idempotency records, after which an operation may be charged twice; use noeviction or a volatile-* policy",
			slog.String("maxmemory-policy", policy))
	}
	fsync, ferr := get("appendfsync")
	switch {
	case ferr != nil:
		log.DebugContext(ctx, "redisstore: cannot read appendfsync", slog.Any("error", ferr))
	case fsync == "no":
		log.WarnContext(ctx, "redisstore: appendfsync no: the OS decides when the AOF reaches disk, so a power loss can lose many seconds of records; use everysec or always",
			slog.String("appendfsync", fsync))
	case fsync == "everysec":
		// The usual setting, documented in the package: not worth a line on
		// every start of every process.
		log.DebugContext(ctx, "redisstore: appendfsync everysec: a power loss can lose about the last second of acknowledged records; use WithWaitAOF or appendfsync always where that matters",
			slog.String("appendfsync", fsync))
	default:
		log.DebugContext(ctx, "redisstore: Redis persistence", slog.String("appendfsync", fsync))
	}
	return nil
}

// appendOnly asks CONFIG GET appendonly, then INFO persistence (which
// managed services that block CONFIG usually allow). known is false when
// both were refused; err is set only when c did not answer at all.
func appendOnly(ctx context.Context, c redis.Cmdable) (aof, known bool, err error) {
	m, cerr := c.ConfigGet(ctx, "appendonly").Result()
	if v, ok := m["appendonly"]; cerr == nil && ok {
		return v == "yes", true, nil
	}
	if cerr != nil && !isServerReply(cerr) {
		return false, false, cerr
	}
	info, ierr := c.Info(ctx, "persistence").Result()
	if ierr != nil && !isServerReply(ierr) {
		return false, false, ierr
	}
	if ierr == nil {
		for line := range strings.SplitSeq(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "aof_enabled:"); ok {
				return v == "1", true, nil
			}
		}
	}
	return false, false, nil
}

// isServerReply reports an error the server answered (a refused command),
// as opposed to one that means it did not answer.
func isServerReply(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && !isTransient(rerr)
}

// probeWaitAOF fails New early when the server cannot do WAITAOF as asked
// (Redis < 7.2, or numlocal 1 with appendonly off), instead of failing every
// write later. A connection that wrote nothing is answered at once.
func (s *Store) probeWaitAOF(ctx context.Context) error {
	d := s.cfg.durability
	if d.mode != durableWaitAOF {
		return nil
	}
	probe := func(ctx context.Context, c *redis.Client) error {
		if err := c.Do(ctx, "waitaof", d.local, 0, 1).Err(); err != nil {
			return wrapErr("start: WAITAOF", c.Options().Addr, err)
		}
		return nil
	}
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		// A master that does not answer is skipped, as by checkPersistence.
		return c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			if err := probe(ctx, n); err != nil && !errors.Is(err, keystore.ErrUnavailable) {
				return err
			}
			return nil
		})
	case *redis.Client:
		return probe(ctx, c)
	}
	return nil // rejected earlier by checkDurableClient
}
