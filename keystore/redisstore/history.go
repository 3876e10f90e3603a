package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// The history of a prefix (keystore.HistoryProver). A shard's marker says
// when it was written (ia) and when a loss was last accepted there (aat);
// the prefix's history is unproven from the latest of those, over every
// shard, for keystore.ProofAge, unless an operator declared it new since
// (dn, dat: DeclareNew, pagpolar ops init, or the DeclaredNew option when
// New writes the markers of a new prefix). A marker New writes for a
// prefix without any (a new one, or one Redis forgot whole: a restart
// without persistence, FLUSHALL) therefore starts an unproven history, and
// the engine looks every first send up until it is proven.

// historyRecheck is how long a Store answers an unproven history from
// what it read last (so that DeclareNew elsewhere takes effect soon).
const historyRecheck = 2 * time.Second

// DeclaredNew declares a prefix new when New finds no marker at all and
// writes them: no operation was ever sent with records under it (a new
// deployment or credential). note says who declared it and why. A prefix
// that has markers, or some shards' only, is left as it is: use
// Store.DeclareNew (pagpolar ops init) once it is known to be safe.
func DeclaredNew(note string) Option { return func(c *config) { c.declareNew = note } }

// histCache is the history as this Store last read it.
type histCache struct {
	mu     sync.Mutex
	valid  bool
	h      keystore.History
	readAt time.Time     // local clock
	skew   time.Duration // Redis clock − local clock when read
	epochs []string      // the parts' epochs when read
}

// declareScript records a declaration that the shard is new. KEYS = the
// marker; ARGV = note. A missing or lost marker is left alone. Returns
// {now µs, field, value, ...} of the marker.
var declareScript = redis.NewScript(scriptPrelude + `
local now = now_us()
if redis.call('HEXISTS', KEYS[1], 'ep') == 1 and redis.call('HGET', KEYS[1], 'st') ~= 'lost' then
  redis.call('HSET', KEYS[1], 'dn', ARGV[1], 'dat', fmt(now))
end
local r = redis.call('HGETALL', KEYS[1])
table.insert(r, 1, fmt(now))
return r
`)

// historyOf is the prefix's history from its shards' markers, at Redis
// time now (µs).
func (s *Store) historyOf(ms []marker) (keystore.History, int64) {
	var since, now int64
	var declared, reason string
	for shard, m := range ms {
		if m.err != nil || !m.exists() {
			// Unreadable, or a marker gone: nothing proves this shard
			// (Create detects a loss there); unproven from now.
			if m.now > since {
				since = m.now
				reason = s.partName(shard) + ": marker unreadable or missing"
			}
			continue
		}
		now = max(now, m.now)
		at := max(micros(m.fields["ia"]), micros(m.fields["aat"]))
		if dat := micros(m.fields["dat"]); dat != 0 && dat >= at {
			declared = m.fields["dn"]
			continue
		}
		if at > since {
			since = at
			reason = fmt.Sprintf("%s: its marker was written (or a loss accepted) at %s, and nothing proves that no record was lost before",
				s.partName(shard), time.UnixMicro(at).UTC().Format(time.RFC3339))
		}
	}
	if now == 0 {
		now = since
	}
	if since == 0 {
		return keystore.History{Declared: declared}, now
	}
	return keystore.UnprovenHistory(time.UnixMicro(since), time.UnixMicro(now), reason), now
}

func micros(v string) int64 {
	n, _ := strconv.ParseInt(v, 10, 64)
	return n
}

// refreshHistory reads every shard's marker and caches the history.
func (s *Store) refreshHistory(ctx context.Context) error {
	ms := s.perShard(ctx, markScript, allShards(s.cfg.shards),
		func(shard int) []string { return []string{s.markKey(shard)} },
		func(int) []any { return []any{"read", "", s.cfg.shards, ""} })
	if err := firstErr(ms); err != nil && len(ms) > 0 {
		all := true
		for _, m := range ms {
			all = all && m.err != nil
		}
		if all {
			return err
		}
	}
	h, now := s.historyOf(ms)
	s.hist.mu.Lock()
	defer s.hist.mu.Unlock()
	s.hist.valid, s.hist.h, s.hist.readAt = true, h, time.Now()
	s.hist.skew = time.UnixMicro(now).Sub(s.hist.readAt)
	s.hist.epochs = s.epochs()
	return nil
}

// startHistory is New's first read of the history; a Redis that cannot be
// read leaves it to the first History call.
func (s *Store) startHistory(ctx context.Context) error {
	switch {
	case s.openedNew && s.cfg.declareNew != "":
		_ = s.declareAll(ctx, s.cfg.declareNew)
	}
	_ = s.refreshHistory(ctx)
	return nil
}

func (s *Store) epochs() []string {
	out := make([]string, len(s.parts))
	for i := range s.parts {
		out[i] = s.parts[i].view().epoch
	}
	return out
}

// History implements keystore.HistoryProver. A proven history is answered
// from memory until this Store adopts another epoch (an accepted loss,
// which starts a new unproven history); an unproven one is read again at
// most every 2 s.
func (s *Store) History(ctx context.Context) (keystore.History, error) {
	s.hist.mu.Lock()
	h, fresh := s.hist.h, s.hist.valid && slicesEqual(s.hist.epochs, s.epochs()) &&
		(s.hist.h.Proven() || time.Since(s.hist.readAt) < historyRecheck)
	skew := s.hist.skew
	s.hist.mu.Unlock()
	if !fresh {
		if err := ctx.Err(); err != nil {
			return keystore.History{}, wrapErr("history", "", err)
		}
		cctx, cancel := s.callCtx(ctx)
		err := s.bounded(cctx, s.refreshHistory)
		cancel()
		if err != nil {
			return keystore.History{}, wrapErr("history", "", s.timedOut(ctx, cctx, err))
		}
		s.hist.mu.Lock()
		h, skew = s.hist.h, s.hist.skew
		s.hist.mu.Unlock()
	}
	if !h.Proven() && !time.Now().Add(skew).Before(h.ProvenAt) {
		h = keystore.History{} // proven by age
	}
	return h, nil
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// declareAll runs declareScript on every shard; it names the shards it
// could not declare (unreachable, lost or without a marker).
func (s *Store) declareAll(ctx context.Context, note string) error {
	got := s.perShard(ctx, declareScript, allShards(s.cfg.shards),
		func(shard int) []string { return []string{s.markKey(shard)} },
		func(int) []any { return []any{note} })
	var failed []string
	for shard, m := range got {
		switch {
		case m.err != nil:
			failed = append(failed, fmt.Sprintf("%d (unreachable)", shard))
		case !m.exists() || m.fields["st"] == "lost":
			failed = append(failed, fmt.Sprintf("%d (lost: settle and accept the loss first)", shard))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("redisstore: declare new: %w: shards %s were not declared; call DeclareNew again", keystore.ErrUnavailable, strings.Join(failed, ", "))
	}
	return nil
}

// DeclareNew implements keystore.HistoryProver: every shard's marker
// records note as the operator's declaration that the prefix is new.
func (s *Store) DeclareNew(ctx context.Context, note string) error {
	if strings.TrimSpace(note) == "" {
		return errors.New("redisstore: declare new: note: empty (say who declared the prefix new and why)")
	}
	if err := ctx.Err(); err != nil {
		return wrapErr("declare new", "", err)
	}
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	err := s.bounded(cctx, func(ctx context.Context) error {
		if err := s.declareAll(ctx, note); err != nil {
			return err
		}
		return s.refreshHistory(ctx)
	})
	if err != nil {
		return wrapErr("declare new", "", s.timedOut(ctx, cctx, err))
	}
	return nil
}
