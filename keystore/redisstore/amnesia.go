package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// part is what this Store knows of one shard: the epoch of its marker, when
// it last confirmed it (Redis clock, µs), and the last record it created
// there and was told was durable (its high-water mark).
type part struct {
	mu       sync.Mutex
	epoch    string // "": not known yet (the shard was unreachable at New)
	verified int64
	lastKey  string
	lastCA   string
}

type partView struct {
	epoch    string
	verified int64
	lastKey  string
	lastCA   string
}

func (p *part) view() partView {
	p.mu.Lock()
	defer p.mu.Unlock()
	return partView{epoch: p.epoch, verified: p.verified, lastKey: p.lastKey, lastCA: p.lastCA}
}

// learn records the epoch read from the marker at time now; another epoch
// than the one known (an accepted loss adopted) forgets the last record.
func (p *part) learn(epoch string, now int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if epoch != p.epoch {
		p.epoch, p.lastKey, p.lastCA = epoch, "", ""
	}
	if now > p.verified {
		p.verified = now
	}
}

// created records a Create confirmed durable: key was created at ca (µs)
// in a shard whose marker names epoch.
func (p *part) created(epoch, key, ca string) {
	n, err := strconv.ParseInt(ca, 10, 64)
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if epoch != p.epoch {
		p.epoch, p.lastKey, p.lastCA = epoch, "", ""
	}
	if last, _ := strconv.ParseInt(p.lastCA, 10, 64); p.lastCA == "" || n >= last {
		p.lastKey, p.lastCA = key, ca
	}
	if n > p.verified {
		p.verified = n
	}
}

func newEpoch() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails
	return hex.EncodeToString(b[:])
}

func (s *Store) partName(shard int) string {
	return fmt.Sprintf("shard %d of prefix %q (keys %s*)", shard, s.cfg.prefix, s.shardTag(shard))
}

// marker is a shard's marker as a script returned it.
type marker struct {
	now    int64             // Redis clock (µs) when it was read
	fields map[string]string // empty: no marker
	err    error             // the shard could not be read
}

func (m marker) exists() bool { return m.fields["ep"] != "" }

// perShard runs one script per shard in one pipeline (split by node on a
// Cluster) and returns every shard's marker. keys and args give each
// shard's KEYS and ARGV. The scripts are sent whole (EVAL): these calls are
// rare, and a script cache flushed meanwhile cannot fail them.
func (s *Store) perShard(ctx context.Context, sc *redis.Script, shards []int, keys func(shard int) []string, args func(shard int) []any) []marker {
	out := make([]marker, len(shards))
	cmds := make([]*redis.Cmd, len(shards))
	_, pipeErr := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, shard := range shards {
			cmds[i] = sc.Eval(ctx, p, keys(shard), args(shard)...)
		}
		return nil
	})
	for i, cmd := range cmds {
		if cmd.Err() == nil && cmd.Val() == nil && pipeErr != nil {
			cmd.SetErr(pipeErr)
		}
		res, err := cmd.Slice()
		if err != nil {
			out[i].err = wrapErr("shard marker", s.markKey(shards[i]), err)
			continue
		}
		if len(res) == 0 {
			out[i].err = fmt.Errorf("redisstore: shard marker %s: empty reply", s.markKey(shards[i]))
			continue
		}
		now, ok := res[0].(string)
		n, err := strconv.ParseInt(now, 10, 64)
		if !ok || err != nil {
			out[i].err = fmt.Errorf("redisstore: shard marker %s: reply starts with %v, want the time", s.markKey(shards[i]), res[0])
			continue
		}
		h, err := flatToMap(res[1:])
		if err != nil {
			out[i].err = fmt.Errorf("redisstore: shard marker %s: %w", s.markKey(shards[i]), err)
			continue
		}
		out[i] = marker{now: n, fields: h}
	}
	return out
}

func allShards(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// readMarkers reads every shard's marker, writing nothing.
func (s *Store) readMarkers(ctx context.Context) []marker {
	return s.perShard(ctx, markScript, allShards(s.cfg.shards),
		func(shard int) []string { return []string{s.markKey(shard)} },
		func(int) []any { return []any{"read", "", s.cfg.shards, ""} })
}

// openParts is New's check of the shard markers: it checks their shard
// count and record layout, learns each reachable shard's epoch,
// initialises the markers of a new prefix, and marks lost the shards whose
// marker vanished while others kept theirs.
func (s *Store) openParts(ctx context.Context) error {
	count := func(ms []marker) (found, failed int) {
		for _, m := range ms {
			switch {
			case m.err != nil:
				failed++
			case m.exists():
				found++
			}
		}
		return found, failed
	}
	ms := s.readMarkers(ctx)
	found, failed := count(ms)
	mode := "lost" // for shards without a marker
	if found == 0 {
		if failed > 0 {
			return fmt.Errorf("redisstore: start: prefix %q has no shard marker on the shards that answered, and %d shards could not be read, so New cannot tell a new prefix from one that holds records; try again when every shard answers: %w",
				s.cfg.prefix, failed, firstErr(ms))
		}
		// No marker anywhere: a new prefix, unless records are indexed
		// there already (records whose markers were deleted): those are
		// refused, never taken for a new prefix's.
		key, err := s.anyIndexed(ctx)
		if err != nil {
			return err
		}
		if key != "" {
			// Another process may have just initialised the prefix and
			// written records (New on several replicas at once): then its
			// markers are there now, and this one initialises the prefix
			// with it (writing a marker only where none is yet).
			ms = s.readMarkers(ctx)
			again, failed := count(ms)
			switch {
			case again == 0 && failed > 0:
				return fmt.Errorf("redisstore: start: prefix %q has no shard marker but indexes records (%s), and %d shards could not be read again; try again when every shard answers: %w",
					s.cfg.prefix, key, failed, firstErr(ms))
			case again == 0:
				return fmt.Errorf("redisstore: start: %w: prefix %q has no shard marker but indexes records (%s is not empty): its markers were deleted, so its records cannot be checked against a loss: use a new prefix",
					ErrLayout, s.cfg.prefix, key)
			}
		}
		mode = "init"
		// Only a prefix found empty is new: one another process has begun
		// writing records in is not this one's to declare.
		s.openedNew = key == ""
		s.cfg.logger.DebugContext(ctx, "redisstore: new prefix: writing its shard markers",
			slog.String("prefix", s.cfg.prefix), slog.Int("shards", s.cfg.shards))
	}
	var missing []int
	var lostShards []string
	for shard, m := range ms {
		switch {
		case m.err != nil:
			// Checked at its first use.
			s.cfg.logger.WarnContext(ctx, "redisstore: shard unreachable at start-up; it is checked at its first use",
				slog.String("shard", s.markKey(shard)), slog.Any("error", m.err))
		case m.exists():
			if sh := m.fields["sh"]; sh != "" && sh != strconv.Itoa(s.cfg.shards) {
				return fmt.Errorf("redisstore: prefix %q holds records written with %s shards, not %d: use WithShards(%s)", s.cfg.prefix, sh, s.cfg.shards, sh)
			}
			if rl := m.fields["rl"]; rl != recordLayout {
				named := "none"
				if rl != "" {
					named = rl
				}
				return fmt.Errorf("redisstore: start: %w: prefix %q shard marker %s names record layout %s; the store reads and writes only layout %s: use a new prefix",
					ErrLayout, s.cfg.prefix, s.markKey(shard), named, recordLayout)
			}
			s.parts[shard].learn(m.fields["ep"], m.now)
			if m.fields["st"] == "lost" {
				lostShards = append(lostShards, strconv.Itoa(shard))
			}
		default:
			missing = append(missing, shard)
		}
	}
	if len(missing) > 0 {
		why := "its marker is gone while other shards of the prefix kept theirs, so it lost every record it held (a failover to an empty replica, a node restarted without persistence)"
		got := s.perShard(ctx, markScript, missing,
			func(shard int) []string { return []string{s.markKey(shard)} },
			func(int) []any { return []any{mode, newEpoch(), s.cfg.shards, why} })
		for i, m := range got {
			if m.err != nil {
				return m.err
			}
			s.parts[missing[i]].learn(m.fields["ep"], m.now)
			if m.fields["st"] == "lost" {
				lostShards = append(lostShards, strconv.Itoa(missing[i]))
			}
		}
	}
	if len(lostShards) > 0 {
		s.cfg.logger.WarnContext(ctx, "redisstore: shards marked lost: Create refuses there until the loss is accepted (Amnesia, AcceptLoss)",
			slog.String("prefix", s.cfg.prefix), slog.String("shards", strings.Join(lostShards, ",")))
	}
	return nil
}

func firstErr(lists ...[]marker) error {
	for _, l := range lists {
		for _, m := range l {
			if m.err != nil {
				return m.err
			}
		}
	}
	return nil
}

// sweep runs the loss check on every shard this Store knows, marking lost
// those that lost what this Store saw them acknowledge, and adopting the
// epochs of accepted losses. It returns every shard's marker.
func (s *Store) sweep(ctx context.Context) []marker {
	views := make([]partView, s.cfg.shards)
	for i := range views {
		views[i] = s.parts[i].view()
	}
	ms := s.perShard(ctx, sweepScript, allShards(s.cfg.shards),
		func(shard int) []string {
			last := views[shard].lastKey
			if last == "" {
				last = s.markKey(shard)
			}
			return []string{s.markKey(shard), last}
		},
		func(shard int) []any {
			v := views[shard]
			return []any{v.epoch, v.lastCA, v.verified, newEpoch(), s.cfg.retention.Milliseconds(), s.cfg.shards}
		})
	for shard, m := range ms {
		if m.err == nil && m.exists() && m.fields["st"] != "lost" {
			aat, _ := strconv.ParseInt(m.fields["aat"], 10, 64)
			v := views[shard]
			if v.epoch == "" || (m.fields["ep"] != v.epoch && aat > v.verified) || m.fields["ep"] == v.epoch {
				s.parts[shard].learn(m.fields["ep"], m.now)
			}
		}
	}
	return ms
}

// afterLoss runs once a Create found a loss: the other shards are checked
// at once, so that a prefix emptied and initialised again by a process
// started after the loss is refused in every shard, not only in those this
// process happens to write to next. It is bounded by the call's own
// timeout and its errors are dropped: the Create already failed closed.
func (s *Store) afterLoss(ctx context.Context) {
	cctx, cancel := s.callCtx(context.WithoutCancel(ctx))
	defer cancel()
	_ = s.bounded(cctx, func(ctx context.Context) error { s.sweep(ctx); return nil })
}

func microsTime(v string) time.Time {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n == 0 {
		return time.Time{}
	}
	return time.UnixMicro(n)
}

// Amnesia implements keystore.AmnesiaGuard. It checks every shard against
// what this Store remembers (one pipelined round trip, split by node on a
// Cluster), within the call timeout.
func (s *Store) Amnesia(ctx context.Context) (keystore.AmnesiaReport, error) {
	if err := ctx.Err(); err != nil {
		return keystore.AmnesiaReport{}, wrapErr("amnesia", "", err)
	}
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	var ms []marker
	err := s.bounded(cctx, func(ctx context.Context) error { ms = s.sweep(ctx); return nil })
	if err != nil {
		return keystore.AmnesiaReport{}, wrapErr("amnesia", "", s.timedOut(ctx, cctx, err))
	}
	r := keystore.AmnesiaReport{Parts: s.cfg.shards}
	reached := 0
	for shard, m := range ms {
		name := s.partName(shard)
		switch {
		case m.err != nil:
			r.Unreachable = append(r.Unreachable, name)
			continue
		case !m.exists():
			// A shard this Store could not read at New, found without a
			// marker: nobody can tell whether it held anything.
			r.Lost = append(r.Lost, keystore.LostPart{Part: name, Reason: "its marker is missing and this process never saw it"})
		case m.fields["st"] == "lost":
			r.Lost = append(r.Lost, keystore.LostPart{Part: name, Reason: m.fields["why"], DetectedAt: microsTime(m.fields["lat"])})
		}
		reached++
		if at := microsTime(m.fields["aat"]); !at.IsZero() {
			r.Accepted = append(r.Accepted, keystore.AcceptedLoss{Part: name, Note: m.fields["note"], At: at})
		}
	}
	sort.SliceStable(r.Lost, func(i, j int) bool { return r.Lost[i].DetectedAt.Before(r.Lost[j].DetectedAt) })
	if reached == 0 {
		return r, wrapErr("amnesia", "", firstErr(ms))
	}
	return r, nil
}

// AcceptLoss implements keystore.AmnesiaGuard: every shard marked lost
// (after checking every shard as Amnesia does) gets a new epoch and takes
// Creates again. A shard that cannot be reached keeps its state; the error
// then names it, and AcceptLoss can be called again.
func (s *Store) AcceptLoss(ctx context.Context, note string) error {
	if strings.TrimSpace(note) == "" {
		return errors.New("redisstore: accept loss: note: empty (say who accepted the loss and why)")
	}
	if err := ctx.Err(); err != nil {
		return wrapErr("accept loss", "", err)
	}
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	var failed []string
	err := s.bounded(cctx, func(ctx context.Context) error {
		var lost []int
		for shard, m := range s.sweep(ctx) {
			switch {
			case m.err != nil:
				failed = append(failed, strconv.Itoa(shard))
			case m.fields["st"] == "lost":
				lost = append(lost, shard)
			}
		}
		if len(lost) == 0 {
			return nil
		}
		got := s.perShard(ctx, acceptScript, lost,
			func(shard int) []string { return []string{s.markKey(shard)} },
			func(int) []any { return []any{newEpoch(), note} })
		for i, m := range got {
			if m.err != nil {
				failed = append(failed, strconv.Itoa(lost[i]))
				continue
			}
			if m.fields["st"] != "lost" {
				s.parts[lost[i]].learn(m.fields["ep"], m.now)
			}
		}
		return nil
	})
	if err != nil {
		return wrapErr("accept loss", "", s.timedOut(ctx, cctx, err))
	}
	if len(failed) > 0 {
		return fmt.Errorf("redisstore: accept loss: %w: shards %s could not be reached; call AcceptLoss again", keystore.ErrUnavailable, strings.Join(failed, ","))
	}
	return nil
}

// anyIndexed returns the name of an index of this prefix that lists a
// record (each shard's ix:<state> sorted sets: every record is in one,
// written by the same script), or "" when none does. New calls it only
// for a prefix without any marker, before writing them: one EXISTS per
// shard (its indexes share its hash slot), pipelined, whatever else the
// server holds.
func (s *Store) anyIndexed(ctx context.Context) (string, error) {
	keys := make([][]string, s.cfg.shards)
	cmds := make([]*redis.IntCmd, s.cfg.shards)
	_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for shard := range keys {
			for _, st := range indexStates() {
				keys[shard] = append(keys[shard], s.indexKey(shard, st))
			}
			cmds[shard] = p.Exists(ctx, keys[shard]...)
		}
		return nil
	})
	if err != nil {
		return "", wrapErr("start: indexes", s.cfg.prefix, err)
	}
	for shard, c := range cmds {
		if c.Val() == 0 {
			continue
		}
		for _, k := range keys[shard] {
			if m, err := s.client.Exists(ctx, k).Result(); err == nil && m > 0 {
				return k, nil
			}
		}
		return keys[shard][0], nil
	}
	return "", nil
}
