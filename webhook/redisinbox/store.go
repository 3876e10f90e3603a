// Package redisinbox keeps a webhook inbox (webhook.Store) in Redis, for
// fleets that already share one. It accepts any redis.UniversalClient: a
// single node, Sentinel (a failover client) or Cluster.
//
// # Layout
//
// Every key of a Store shares one Cluster hash tag, its prefix, so each write
// is one Lua script that changes a record and every index that lists it
// atomically, including the check that no other event of the same sale or
// subscription is leased:
//
//	{<prefix>}:rec:<dedupe key>   the event (hash)
//	{<prefix>}:due                events Claim could take, scored by the time they become due (µs)
//	{<prefix>}:leases             per entity, the lease last granted: "<expiry µs>|<dedupe key>"
//	{<prefix>}:ix:<state>         events in that state, scored by UpdatedAt (µs)
//
// The price of one hash tag is that a Store's whole inbox lives on one
// Cluster slot; webhook volumes are small enough for that. Times come from
// the Inbox's clock, like every webhook.Store.
//
// # Durability
//
// An event must be on disk before the delivery is answered 200, or a Redis
// restart loses it while PagPolar believes it was delivered. Redis does not
// give that by default: run it with appendonly yes (appendfsync always for
// "no acknowledged event is ever lost"; everysec risks about one second of
// them on a power loss). New logs a warning when Redis says it keeps nothing
// on disk. Replication is asynchronous: a failover can lose the last
// acknowledged writes.
//
// Network failures, timeouts and a cancelled context return errors wrapping
// webhook.ErrUnavailable (the Inbox then answers 503 and PagPolar resends).
// Scripts carry a nonce, so a script that go-redis resends after a lost
// reply returns its first result instead of applying twice.
//
// # Bounded calls and logging
//
// A call is bounded by its context, which the Inbox always gives a deadline
// (PersistTimeout for storing a delivery). go-redis honours that deadline
// while it waits for a connection, dials (≥ 9.2x dials DialerRetries = 5
// times, 100 ms apart, inside each command retry) and backs off, whatever
// the client's options; a read or write on an open connection honours it
// only with ContextTimeoutEnabled (otherwise it waits the client's
// ReadTimeout; the Inbox stops waiting for an insert at PersistTimeout
// anyway). NewFromURL builds its client to fail fast, with DialerRetries 1
// and ContextTimeoutEnabled; do the same for a client of your own.
//
// go-redis logs through one process-wide logger, by default to stderr.
// Importing this package routes it, once, at init, to slog.Default() at
// debug level (attribute logger=go-redis), as keystore/redisstore does; an
// application's own redis.SetLogger call in main replaces it.
package redisinbox

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
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pagpolar/pagpolar-go/webhook"
)

// DefaultPrefix names a Store's keys unless WithPrefix says otherwise.
const DefaultPrefix = "pagpolar:webhook"

// Store is a webhook.Store in Redis, safe for concurrent use by many
// goroutines and processes sharing one Redis and prefix. The caller owns the
// client: Store never closes it.
type Store struct {
	client redis.UniversalClient
	prefix string
	log    *slog.Logger
}

var _ webhook.Store = (*Store)(nil)

// Option configures a Store.
type Option func(*Store)

// WithPrefix sets the hash tag every key starts with (default
// DefaultPrefix). Stores with different prefixes share nothing. It must not
// contain braces.
func WithPrefix(prefix string) Option { return func(s *Store) { s.prefix = prefix } }

// WithLogger sets where the start-up warning goes (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(s *Store) { s.log = l } }

// New returns a Store on client. It pings Redis (failing with an error
// wrapping webhook.ErrUnavailable if it cannot be reached within 10 s) and
// logs a warning if Redis reports that it keeps nothing on disk.
func New(client redis.UniversalClient, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, errors.New("redisinbox: client: nil")
	}
	s := &Store{client: client, prefix: DefaultPrefix, log: slog.Default()}
	for _, o := range opts {
		o(s)
	}
	if s.prefix == "" || strings.ContainsAny(s.prefix, "{}") {
		return nil, fmt.Errorf("redisinbox: prefix %q: must be non-empty, without braces", s.prefix)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		return nil, unavailable("ping", "", err)
	}
	s.checkPersistence(ctx)
	return s, nil
}

// NewFromURL parses a redis:// or rediss:// URL, connects a single-node
// client and returns a Store that the caller closes with Close. The client
// fails fast: one dial per connection attempt (DialerRetries 1) and socket
// waits bounded by the call's context (ContextTimeoutEnabled).
func NewFromURL(url string, opts ...Option) (*Store, error) {
	o, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redisinbox: Redis URL: %w", err)
	}
	o.DialerRetries = 1
	o.ContextTimeoutEnabled = true
	c := redis.NewClient(o)
	s, err := New(c, opts...)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the client. Call it only on a Store from NewFromURL, or when
// the Store is the client's last user.
func (s *Store) Close() error { return s.client.Close() }

func (s *Store) checkPersistence(ctx context.Context) {
	m, err := s.client.ConfigGet(ctx, "appendonly").Result()
	if err != nil {
		// Managed services block CONFIG: the setting is unknown, not wrong.
		s.log.DebugContext(ctx, "redisinbox: cannot read Redis persistence settings", slog.Any("error", err))
		return
	}
	if m["appendonly"] != "yes" {
		s.log.WarnContext(ctx, "redisinbox: Redis runs without appendonly: a restart can lose events already answered 200")
	}
}

func (s *Store) key(parts ...string) string {
	return "{" + s.prefix + "}:" + strings.Join(parts, ":")
}

func (s *Store) recKey(k string) string { return s.key("rec", k) }

func (s *Store) scriptKeys(k string) []string {
	keys := []string{s.recKey(k), s.key("due"), s.key("leases")}
	for _, st := range webhook.States() {
		keys = append(keys, s.key("ix", string(st)))
	}
	return keys
}

func unavailable(op, key string, err error) error {
	if key != "" {
		op += " " + key
	}
	return fmt.Errorf("%w: redisinbox %s: %w", webhook.ErrUnavailable, op, err)
}

func checkCtx(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", webhook.ErrUnavailable, err)
	}
	return nil
}

func nonce() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // never fails on supported platforms
	return hex.EncodeToString(b)
}

func us(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return strconv.FormatInt(t.UnixMicro(), 10)
}

func fromUS(s string) (time.Time, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n == 0 {
		return time.Time{}, err
	}
	return time.UnixMicro(n).UTC(), nil
}

// run executes a write script and returns its result code and record.
func (s *Store) run(ctx context.Context, op string, sc *redis.Script, k string, args ...any) (string, webhook.Record, error) {
	return s.runNonce(ctx, nonce(), op, sc, k, args...)
}

func (s *Store) runNonce(ctx context.Context, n, op string, sc *redis.Script, k string, args ...any) (string, webhook.Record, error) {
	argv := append([]any{n, k}, args...)
	v, err := sc.Run(ctx, s.client, s.scriptKeys(k), argv...).Slice()
	if err != nil {
		return "", webhook.Record{}, unavailable(op, k, err)
	}
	code, _ := v[0].(string)
	if len(v) < 2 {
		return code, webhook.Record{}, nil
	}
	flat, _ := v[1].([]any)
	rec, err := parseFlat(k, flat)
	if err != nil {
		return "", webhook.Record{}, fmt.Errorf("redisinbox %s %s: %w", op, k, err)
	}
	return code, rec, nil
}

func parseFlat(k string, flat []any) (webhook.Record, error) {
	m := make(map[string]string, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		f, _ := flat[i].(string)
		v, _ := flat[i+1].(string)
		m[f] = v
	}
	return parseMap(k, m)
}

func parseMap(k string, m map[string]string) (webhook.Record, error) {
	r := webhook.Record{
		Key: k, Event: m["event"], Entity: m["entity"], EnvelopeID: m["envelope_id"],
		Payload: []byte(m["payload"]), State: webhook.State(m["state"]),
		LastError: m["last_error"], LeaseOwner: m["owner"],
	}
	var err error
	ints := []struct {
		field string
		dst   *int
	}{{"attempts", &r.Attempts}, {"deliveries", &r.Deliveries}}
	for _, f := range ints {
		if *f.dst, err = strconv.Atoi(m[f.field]); err != nil {
			return r, fmt.Errorf("field %s: %w", f.field, err)
		}
	}
	if r.LeaseToken, err = strconv.ParseInt(m["token"], 10, 64); err != nil {
		return r, fmt.Errorf("field token: %w", err)
	}
	times := []struct {
		field string
		dst   *time.Time
	}{{"next_at", &r.NextAttemptAt}, {"lease_exp", &r.LeaseExpiresAt}, {"received_at", &r.ReceivedAt}, {"updated_at", &r.UpdatedAt}}
	for _, f := range times {
		if *f.dst, err = fromUS(m[f.field]); err != nil {
			return r, fmt.Errorf("field %s: %w", f.field, err)
		}
	}
	return r, nil
}

// Insert implements webhook.Store.
func (s *Store) Insert(ctx context.Context, rec webhook.Record, now time.Time) (webhook.Record, bool, error) {
	if err := checkCtx(ctx); err != nil {
		return webhook.Record{}, false, err
	}
	if rec.Key == "" {
		return webhook.Record{}, false, errors.New("redisinbox: Insert: key: empty")
	}
	code, got, err := s.run(ctx, "insert", insertScript, rec.Key, us(now), rec.Event, rec.Entity, rec.EnvelopeID, rec.Payload)
	if err != nil {
		return webhook.Record{}, false, err
	}
	return got, code == "inserted", nil
}

// Get implements webhook.Store.
func (s *Store) Get(ctx context.Context, k string) (webhook.Record, error) {
	if err := checkCtx(ctx); err != nil {
		return webhook.Record{}, err
	}
	m, err := s.client.HGetAll(ctx, s.recKey(k)).Result()
	if err != nil {
		return webhook.Record{}, unavailable("get", k, err)
	}
	if len(m) == 0 {
		return webhook.Record{}, fmt.Errorf("%w: %s", webhook.ErrNotFound, k)
	}
	r, err := parseMap(k, m)
	if err != nil {
		return webhook.Record{}, fmt.Errorf("redisinbox get %s: %w", k, err)
	}
	return r, nil
}

func codeErr(code, k string, r webhook.Record) error {
	switch code {
	case "ok", "inserted", "exists":
		return nil
	case "notfound":
		return fmt.Errorf("%w: %s", webhook.ErrNotFound, k)
	case "held":
		return fmt.Errorf("%w: %s", webhook.ErrLeaseHeld, k)
	case "busy":
		return fmt.Errorf("%w: %s (%s)", webhook.ErrEntityBusy, k, r.Entity)
	case "wrong":
		return fmt.Errorf("%w: %s is %s", webhook.ErrWrongState, k, r.State)
	case "lost":
		return fmt.Errorf("%w: %s", webhook.ErrLeaseLost, k)
	}
	return fmt.Errorf("redisinbox: %s: unexpected script result %q", k, code)
}

// Claim implements webhook.Store.
func (s *Store) Claim(ctx context.Context, k, owner string, now time.Time, ttl time.Duration) (webhook.Record, error) {
	if err := checkCtx(ctx); err != nil {
		return webhook.Record{}, err
	}
	code, r, err := s.run(ctx, "claim", claimScript, k, us(now), owner, us(now.Add(ttl)))
	if err != nil {
		return webhook.Record{}, err
	}
	return r, codeErr(code, k, r)
}

// Renew implements webhook.Store.
func (s *Store) Renew(ctx context.Context, k string, token int64, now time.Time, ttl time.Duration) (webhook.Record, error) {
	if err := checkCtx(ctx); err != nil {
		return webhook.Record{}, err
	}
	code, r, err := s.run(ctx, "renew", renewScript, k, us(now), strconv.FormatInt(token, 10), us(now.Add(ttl)))
	if err != nil {
		return webhook.Record{}, err
	}
	return r, codeErr(code, k, r)
}

// Complete implements webhook.Store.
func (s *Store) Complete(ctx context.Context, k string, token int64, out webhook.Outcome, now time.Time) (webhook.Record, error) {
	if err := checkCtx(ctx); err != nil {
		return webhook.Record{}, err
	}
	if !webhook.ValidOutcome(out.State) {
		return webhook.Record{}, fmt.Errorf("redisinbox: Complete %s: outcome state %q: not processed, error, dead or received", k, out.State)
	}
	code, r, err := s.run(ctx, "complete", completeScript, k, us(now), strconv.FormatInt(token, 10),
		string(out.State), out.Error, us(out.NextAttemptAt))
	if err != nil {
		return webhook.Record{}, err
	}
	return r, codeErr(code, k, r)
}

// Retry implements webhook.Store.
func (s *Store) Retry(ctx context.Context, k string, now time.Time) (webhook.Record, error) {
	if err := checkCtx(ctx); err != nil {
		return webhook.Record{}, err
	}
	code, r, err := s.run(ctx, "retry", retryScript, k, us(now))
	if err != nil {
		return webhook.Record{}, err
	}
	return r, codeErr(code, k, r)
}

// fetch reads the records of keys, in order, skipping those gone meanwhile.
func (s *Store) fetch(ctx context.Context, op string, keys []string) ([]webhook.Record, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	cmds := make([]*redis.MapStringStringCmd, len(keys))
	_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.HGetAll(ctx, s.recKey(k))
		}
		return nil
	})
	if err != nil {
		return nil, unavailable(op, "", err)
	}
	out := make([]webhook.Record, 0, len(keys))
	for i, c := range cmds {
		m := c.Val()
		if len(m) == 0 {
			continue // removed between the index read and this one
		}
		r, err := parseMap(keys[i], m)
		if err != nil {
			return nil, fmt.Errorf("redisinbox %s %s: %w", op, keys[i], err)
		}
		out = append(out, r)
	}
	return out, nil
}

// Due implements webhook.Store.
func (s *Store) Due(ctx context.Context, now time.Time, limit int) ([]webhook.Record, error) {
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = webhook.DefaultListLimit
	}
	keys, err := s.client.ZRangeByScore(ctx, s.key("due"), &redis.ZRangeBy{
		Min: "-inf", Max: us(now), Count: int64(limit),
	}).Result()
	if err != nil {
		return nil, unavailable("due", "", err)
	}
	return s.fetch(ctx, "due", keys)
}

// List implements webhook.Store.
func (s *Store) List(ctx context.Context, f webhook.Filter) ([]webhook.Record, error) {
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	limit := f.Limit
	if limit <= 0 {
		limit = webhook.DefaultListLimit
	}
	states := f.States
	if len(states) == 0 {
		states = webhook.States()
	}
	max := "+inf"
	if !f.UpdatedBefore.IsZero() {
		max = "(" + us(f.UpdatedBefore)
	}
	var cands []redis.Z
	for _, st := range states {
		zs, err := s.client.ZRangeByScoreWithScores(ctx, s.key("ix", string(st)), &redis.ZRangeBy{
			Min: "-inf", Max: max, Count: int64(limit),
		}).Result()
		if err != nil {
			return nil, unavailable("list", "", err)
		}
		cands = append(cands, zs...)
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].Score != cands[j].Score {
			return cands[i].Score < cands[j].Score
		}
		return cands[i].Member.(string) < cands[j].Member.(string)
	})
	if len(cands) > limit {
		cands = cands[:limit]
	}
	keys := make([]string, len(cands))
	for i, c := range cands {
		keys[i] = c.Member.(string)
	}
	return s.fetch(ctx, "list", keys)
}

// DeleteExpired implements webhook.Store.
func (s *Store) DeleteExpired(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := checkCtx(ctx); err != nil {
		return 0, err
	}
	if limit <= 0 {
		return 0, nil
	}
	keys, err := s.client.ZRangeByScore(ctx, s.key("ix", string(webhook.StateProcessed)), &redis.ZRangeBy{
		Min: "-inf", Max: "(" + us(before), Count: int64(limit),
	}).Result()
	if err != nil {
		return 0, unavailable("delete expired", "", err)
	}
	n := 0
	for _, k := range keys {
		code, _, err := s.run(ctx, "delete expired", expireScript, k, "0", us(before))
		if err != nil {
			return n, err
		}
		if code == "deleted" {
			n++
		}
	}
	return n, nil
}
