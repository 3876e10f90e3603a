package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pagpolar/pagpolar-go/keystore"
)

const (
	// deleteChunk is the most records one DeleteExpired script removes.
	deleteChunk = 32
	// defaultListLimit is List's limit when the filter sets none.
	defaultListLimit = 100
	// defaultListPage is how many index entries List reads per index and
	// round trip when an operation ID prefix filters them.
	defaultListPage = 512
)

// ceilMicros is the smallest whole microsecond not before t, so that
// "UpdatedAt < t" is "score < ceilMicros(t)" for scores in microseconds.
func ceilMicros(t time.Time) int64 {
	us := t.UnixMicro()
	if t.Nanosecond()%1000 != 0 {
		us++
	}
	return us
}

type candidate struct {
	id    string
	score float64
}

// List implements keystore.Store. It reads the state indexes of every shard
// (one pipelined round trip when no Prefix is given; with a Prefix, further
// pages until Limit matches are found or the indexes are exhausted), then the
// records, and re-checks each record against f: a record whose write
// happened while List ran may be left out, any other record matching f is
// listed, whatever its state. Records come oldest UpdatedAt first, ties by
// operation ID.
func (s *Store) List(ctx context.Context, f keystore.Filter) ([]keystore.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, wrapErr("list", f.Prefix, err)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = defaultListLimit
	}
	want := map[keystore.State]bool{}
	var states []keystore.State
	for _, st := range f.States {
		if st.Valid() && !want[st] {
			want[st] = true
			states = append(states, st)
		}
	}
	if len(f.States) == 0 {
		states = indexStates()
		for _, st := range states {
			want[st] = true
		}
	}
	if len(states) == 0 {
		return nil, nil // only invalid states asked for: nothing has them
	}
	maxScore := "+inf"
	var cutoff int64
	if !f.UpdatedBefore.IsZero() {
		cutoff = ceilMicros(f.UpdatedBefore)
		maxScore = "(" + strconv.FormatInt(cutoff, 10)
	}

	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	var cands []candidate
	var cmds []*redis.StringCmd
	err := s.bounded(cctx, func(ctx context.Context) error {
		var err error
		cands, err = s.listCandidates(ctx, f.Prefix, states, maxScore, limit)
		if err != nil || len(cands) == 0 {
			return err
		}
		pipe := s.client.Pipeline()
		cmds = make([]*redis.StringCmd, len(cands))
		for i, c := range cands {
			cmds[i] = pipe.Get(ctx, s.recordKey(c.id))
		}
		_, _ = pipe.Exec(ctx) // each command's error is read below
		for _, cmd := range cmds {
			if err := cmd.Err(); err != nil && !errors.Is(err, redis.Nil) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		if lerr := layoutErr(err); lerr != nil {
			return nil, fmt.Errorf("redisstore: list: %w", lerr)
		}
		s.noAnswer(ctx, err)
		return nil, wrapErr("list", f.Prefix, s.timedOut(ctx, cctx, err))
	}
	if len(cands) == 0 {
		return nil, nil
	}
	out := make([]keystore.Record, 0, len(cands))
	for i, cmd := range cmds {
		if errors.Is(cmd.Err(), redis.Nil) {
			continue // expired or deleted since the index was read
		}
		h, err := unpackRecord(cmd.Val())
		if err != nil {
			return nil, fmt.Errorf("redisstore: list: %s: %w", s.recordKey(cands[i].id), err)
		}
		rec, err := decodeRecord(h)
		if err != nil {
			return nil, fmt.Errorf("redisstore: list: %w", err)
		}
		// The index was read before the record: drop records that changed
		// in between and no longer match.
		if !want[rec.State] || !strings.HasPrefix(rec.OperationID, f.Prefix) ||
			(!f.UpdatedBefore.IsZero() && rec.UpdatedAt.UnixMicro() >= cutoff) {
			continue
		}
		out = append(out, rec)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].UpdatedAt.Equal(out[j].UpdatedAt) {
			return out[i].UpdatedAt.Before(out[j].UpdatedAt)
		}
		return out[i].OperationID < out[j].OperationID
	})
	return out, nil
}

// listCandidates returns the oldest limit index entries (by score, then
// ID) below maxScore whose ID starts with prefix, over every shard and state.
func (s *Store) listCandidates(ctx context.Context, prefix string, states []keystore.State, maxScore string, limit int) ([]candidate, error) {
	type cursor struct {
		key    string
		offset int64
		found  int
	}
	page := int64(limit)
	if prefix != "" && page < s.cfg.listPage {
		page = s.cfg.listPage
	}
	var active []*cursor
	for shard := 0; shard < s.cfg.shards; shard++ {
		for _, st := range states {
			active = append(active, &cursor{key: s.indexKey(shard, st)})
		}
	}
	var cands []candidate
	for len(active) > 0 {
		pipe := s.client.Pipeline()
		cmds := make([]*redis.ZSliceCmd, len(active))
		for i, c := range active {
			cmds[i] = pipe.ZRangeByScoreWithScores(ctx, c.key, &redis.ZRangeBy{
				Min: "-inf", Max: maxScore, Offset: c.offset, Count: page,
			})
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, err
		}
		var next []*cursor
		for i, c := range active {
			zs := cmds[i].Val()
			for _, z := range zs {
				id, ok := z.Member.(string)
				if !ok || !strings.HasPrefix(id, prefix) {
					continue
				}
				cands = append(cands, candidate{id: id, score: z.Score})
				c.found++
			}
			c.offset += int64(len(zs))
			if int64(len(zs)) == page && c.found < limit {
				next = append(next, c)
			}
		}
		active = next
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].score != cands[j].score {
			return cands[i].score < cands[j].score
		}
		return cands[i].id < cands[j].id
	})
	if len(cands) > limit {
		cands = cands[:limit]
	}
	return cands, nil
}

// DeleteExpired implements keystore.Store. It runs scripts of at most
// deleteChunk removals each, shard after shard, until limit records are
// removed, so a call does at most limit removals and no script blocks the
// server for more than deleteChunk of them (about 16 µs each, measured).
// The count includes terminal records Redis had already expired by their
// retention TTL whose index entries this call removed: from the caller's
// view those are records of the index leaving it. Pending, unknown and
// not_executed records are never touched: only the succeeded and failed
// indexes are read, and each record's state is re-checked in the script.
func (s *Store) DeleteExpired(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, wrapErr("delete expired", "", err)
	}
	if limit <= 0 {
		return 0, nil
	}
	cutoff := ceilMicros(before)
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	// n is atomic: a call abandoned by bounded reports the removals done
	// before it ran out of time, while its goroutine may still run.
	var n atomic.Int64
	err := s.bounded(cctx, func(ctx context.Context) error {
		for shard := 0; shard < s.cfg.shards && int(n.Load()) < limit; shard++ {
			keys := []string{s.indexKey(shard, keystore.StateSucceeded), s.indexKey(shard, keystore.StateFailed), s.markKey(shard)}
			for int(n.Load()) < limit {
				// A script blocks the server while it runs: short ones,
				// so that live commands run between them.
				chunk := min(limit-int(n.Load()), deleteChunk)
				m, err := deleteScript.Run(ctx, s.client, keys, cutoff, chunk, s.recordPrefix(shard)).Int()
				if err != nil {
					return err
				}
				n.Add(int64(m))
				if m < chunk {
					break // this shard has no more (or only entries it just dropped)
				}
			}
		}
		return nil
	})
	if err != nil {
		s.noAnswer(ctx, err)
		return int(n.Load()), wrapErr("delete expired", "", s.timedOut(ctx, cctx, err))
	}
	return int(n.Load()), nil
}
