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

	allowVolatile bool
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
// refuses a Redis without an append-only file unless AllowVolatile() is
// given (see Durability in the package doc).
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
	if err := s.checkDurable(ctx); err != nil {
		return nil, err
	}
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
func (s *Store) Insert(ctx context.Context, rec webhook.Record) (webhook.Record, bool, error) {
	if err := checkCtx(ctx); err != nil {
		return webhook.Record{}, false, err
	}
	if rec.Key == "" {
		return webhook.Record{}, false, errors.New("redisinbox: Insert: key: empty")
	}
	code, got, err := s.run(ctx, "insert", insertScript, rec.Key, rec.Event, rec.Entity, rec.EnvelopeID, rec.Payload)
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

func usDur(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) }

// Claim implements webhook.Store, by Redis's clock.
func (s *Store) Claim(ctx context.Context, k, owner string, ttl time.Duration) (webhook.Record, error) {
	if err := checkCtx(ctx); err != nil {
		return webhook.Record{}, err
	}
	code, r, err := s.run(ctx, "claim", claimScript, k, owner, usDur(ttl))
	if err != nil {
		return webhook.Record{}, err
	}
	return r, codeErr(code, k, r)
}

// Renew implements webhook.Store, by Redis's clock.
func (s *Store) Renew(ctx context.Context, k string, token int64, ttl time.Duration) (webhook.Record, error) {
	if err := checkCtx(ctx); err != nil {
		return webhook.Record{}, err
	}
	code, r, err := s.run(ctx, "renew", renewScript, k, strconv.FormatInt(token, 10), usDur(ttl))
	if err != nil {
		return webhook.Record{}, err
	}
	return r, codeErr(code, k, r)
}

// Complete implements webhook.Store, by Redis's clock.
func (s *Store) Complete(ctx context.Context, k string, token int64, out webhook.Outcome) (webhook.Record, error) {
	if err := checkCtx(ctx); err != nil {
		return webhook.Record{}, err
	}
	if err := out.Check(); err != nil {
		return webhook.Record{}, fmt.Errorf("redisinbox: Complete %s: %w", k, err)
	}
	notAttempted := "0"
	if out.NotAttempted {
		notAttempted = "1"
	}
	code, r, err := s.run(ctx, "complete", completeScript, k, strconv.FormatInt(token, 10),
		string(out.State), out.Error, usDur(out.RetryAfter), notAttempted)
	if err != nil {
		return webhook.Record{}, err
	}
	return r, codeErr(code, k, r)
}

// Retry implements webhook.Store, by Redis's clock.
func (s *Store) Retry(ctx context.Context, k string) (webhook.Record, error) {
	if err := checkCtx(ctx); err != nil {
		return webhook.Record{}, err
	}
	code, r, err := s.run(ctx, "retry", retryScript, k)
	if err != nil {
		return webhook.Record{}, err
	}
	return r, codeErr(code, k, r)
}

// read runs a read script returning {key, fields, key, fields, ...}.
func (s *Store) read(ctx context.Context, op string, sc *redis.Script, keys []string, args ...any) ([]webhook.Record, error) {
	v, err := sc.Run(ctx, s.client, keys, args...).Slice()
	if err != nil {
		return nil, unavailable(op, "", err)
	}
	out := make([]webhook.Record, 0, len(v)/2)
	for i := 0; i+1 < len(v); i += 2 {
		k, _ := v[i].(string)
		flat, _ := v[i+1].([]any)
		r, err := parseFlat(k, flat)
		if err != nil {
			return nil, fmt.Errorf("redisinbox %s %s: %w", op, k, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// Due implements webhook.Store, by Redis's clock.
func (s *Store) Due(ctx context.Context, limit int) ([]webhook.Record, error) {
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = webhook.DefaultListLimit
	}
	return s.read(ctx, "due", dueScript, []string{s.key("due")}, s.recKey(""), limit)
}

// List implements webhook.Store: one script, so a snapshot.
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
		max = "(" + strconv.FormatInt(beforeUS(f.UpdatedBefore), 10)
	}
	var keys []string
	seen := map[webhook.State]bool{}
	for _, st := range states {
		if !seen[st] {
			seen[st] = true
			keys = append(keys, s.key("ix", string(st)))
		}
	}
	return s.read(ctx, "list", listScript, keys, s.recKey(""), max, limit)
}

// beforeUS converts an exclusive upper bound to microseconds so that
// "score < result" keeps "UpdatedAt < t" for a t between two microseconds.
func beforeUS(t time.Time) int64 {
	us := t.UnixMicro()
	if t.After(time.UnixMicro(us)) {
		us++
	}
	return us
}

// DeleteExpired implements webhook.Store: the oldest processed and dead
// records, one small script each.
func (s *Store) DeleteExpired(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := checkCtx(ctx); err != nil {
		return 0, err
	}
	if limit <= 0 {
		return 0, nil
	}
	bound := "(" + strconv.FormatInt(beforeUS(before), 10)
	var cands []redis.Z
	for _, st := range []webhook.State{webhook.StateProcessed, webhook.StateDead} {
		zs, err := s.client.ZRangeByScoreWithScores(ctx, s.key("ix", string(st)), &redis.ZRangeBy{
			Min: "-inf", Max: bound, Count: int64(limit),
		}).Result()
		if err != nil {
			return 0, unavailable("delete expired", "", err)
		}
		cands = append(cands, zs...)
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].Score != cands[j].Score {
			return cands[i].Score < cands[j].Score
		}
		return cands[i].Member.(string) < cands[j].Member.(string)
	})
	n := 0
	for _, c := range cands {
		if n >= limit {
			break
		}
		k := c.Member.(string)
		code, _, err := s.run(ctx, "delete expired", expireScript, k, strconv.FormatInt(beforeUS(before), 10))
		if err != nil {
			return n, err
		}
		if code == "deleted" {
			n++
		}
	}
	return n, nil
}
