package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
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

// checkPersistence logs what Redis keeps on disk, per master. It fails
// only when Redis cannot be reached (an error wrapping
// keystore.ErrUnavailable); a refused CONFIG is logged and skipped.
func (s *Store) checkPersistence(ctx context.Context) error {
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
			return s.checkNode(ctx, n, n.Options().Addr)
		})
	case *redis.Client:
		return s.checkNode(ctx, c, c.Options().Addr)
	default:
		return s.checkNode(ctx, s.client, fmt.Sprintf("%T", s.client))
	}
}

func (s *Store) checkNode(ctx context.Context, c redis.Cmdable, addr string) error {
	log := s.cfg.logger.With(slog.String("redis", addr))
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
	var aof, save, fsync string
	var err error
	if aof, err = get("appendonly"); err == nil {
		if save, err = get("save"); err == nil {
			fsync, err = get("appendfsync")
		}
	}
	if err != nil {
		if werr := wrapErr("start: CONFIG GET", addr, err); !errors.Is(err, errNoParam) && errors.Is(werr, keystore.ErrUnavailable) {
			return werr // unreachable, or not ready: the next checks would fail too
		}
		// Managed Redis services block CONFIG: the settings are unknown,
		// which is no reason to refuse to start.
		log.DebugContext(ctx, "redisstore: cannot read Redis persistence settings; durability unknown", slog.Any("error", err))
		return nil
	}
	// An eviction policy over all keys lets Redis drop a pending record
	// under memory pressure; the operation could then be created (and
	// charged) again. volatile-* policies only evict keys with a TTL, which
	// this store sets on terminal records alone.
	if policy, perr := get("maxmemory-policy"); perr == nil && strings.HasPrefix(policy, "allkeys-") {
		log.WarnContext(ctx, "redisstore: maxmemory-policy "+policy+" can evict unfinished idempotency records, after which an operation may be charged twice; use noeviction or a volatile-* policy",
			slog.String("maxmemory-policy", policy))
	}
	switch {
	case aof != "yes" && strings.TrimSpace(save) == "":
		log.WarnContext(ctx, "redisstore: Redis keeps nothing on disk (appendonly no, save \"\"): a restart forgets every idempotency record, and an operation may then be charged twice; set appendonly yes",
			slog.String("appendonly", aof), slog.String("save", save))
	case aof != "yes":
		log.WarnContext(ctx, "redisstore: Redis keeps only RDB snapshots (appendonly no): a restart loses the records written since the last snapshot; set appendonly yes",
			slog.String("appendonly", aof), slog.String("save", save))
	case fsync == "no":
		log.WarnContext(ctx, "redisstore: appendfsync no: the OS decides when the AOF reaches disk, so a power loss can lose many seconds of records; use everysec or always",
			slog.String("appendfsync", fsync))
	case fsync == "everysec":
		log.InfoContext(ctx, "redisstore: appendfsync everysec: a power loss can lose about the last second of acknowledged records; use WithWaitAOF or appendfsync always where that matters",
			slog.String("appendfsync", fsync))
	default:
		log.DebugContext(ctx, "redisstore: Redis persistence", slog.String("appendonly", aof), slog.String("appendfsync", fsync))
	}
	return nil
}

// checkLayout records the shard count under the prefix, or checks it
// against the one recorded: with another count, existing records would be
// looked up in the wrong shard and could be created a second time.
func (s *Store) checkLayout(ctx context.Context) error {
	key := s.metaKey()
	want := strconv.Itoa(s.cfg.shards)
	if err := s.client.HSetNX(ctx, key, "shards", want).Err(); err != nil {
		return wrapErr("start", key, err)
	}
	got, err := s.client.HGet(ctx, key, "shards").Result()
	if err != nil {
		return wrapErr("start", key, err)
	}
	if got != want {
		return fmt.Errorf("redisstore: prefix %q holds records written with %s shards, not %s: use WithShards(%s)", s.cfg.prefix, got, want, got)
	}
	return nil
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
		return c.ForEachMaster(ctx, probe)
	case *redis.Client:
		return probe(ctx, c)
	}
	return nil // rejected earlier by checkDurableClient
}
