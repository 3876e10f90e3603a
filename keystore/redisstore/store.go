package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// Store is a keystore.Store in Redis. It is safe for concurrent use by many
// goroutines and processes sharing one Redis and prefix. The caller owns the
// client: Store never closes it.
type Store struct {
	client redis.UniversalClient
	cfg    config
	batch  *batcher
	// honoursCtx: the client bounds socket waits by a command's context, so
	// calls run inline under their call timeout (see bounded).
	honoursCtx bool
	// detached counts the goroutines of bounded calls still running.
	detached atomic.Int64
	// parts is what this Store knows of each shard's marker (amnesia.go).
	parts []part
	// hist is the prefix's history as last read (history.go); openedNew:
	// New found no marker and wrote them.
	hist      histCache
	openedNew bool
	// gate fails durable writes fast on a master that cannot confirm them
	// (wait.go).
	gate waitGate
}

var (
	_ keystore.Store         = (*Store)(nil)
	_ keystore.AmnesiaGuard  = (*Store)(nil)
	_ keystore.HistoryProver = (*Store)(nil)
)

// New returns a Store on client. It checks, within a fixed 10 s bound since
// New takes no context (and within the call timeout per check):
//   - that every master it can reach keeps an append-only file (CONFIG GET
//     appendonly, or INFO persistence where CONFIG is blocked): a Redis that
//     keeps none, or will not say, is refused with an error wrapping
//     ErrVolatile unless AllowVolatile is given (SAFETY rule 13);
//   - each shard's marker (see the package documentation, "Amnesia"):
//     which record layout the prefix uses, that it was not written with
//     another shard count (WithShards), and each shard's epoch, writing the
//     markers of a new prefix;
//   - for WithWaitAOF, that the server accepts WAITAOF as configured.
//
// On a Cluster, New needs only the masters of some of the shards: shards it
// cannot reach are checked at their first use. A prefix without any marker
// is initialised only when New reaches every shard.
//
// It fails if Redis cannot be reached (an error wrapping
// keystore.ErrUnavailable), if an option is invalid, or if a durability mode
// is asked of a client that is neither *redis.Client (single node or
// Sentinel failover) nor *redis.ClusterClient.
func New(client redis.UniversalClient, opts ...Option) (*Store, error) {
	s, err := build(client, opts...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), startupTimeout)
	defer cancel()
	for _, check := range []func(context.Context) error{s.checkPersistence, s.openParts, s.probeWaitAOF, s.startHistory} {
		cctx, ccancel := s.callCtx(ctx)
		err := s.bounded(cctx, check)
		if err != nil && !errors.Is(err, keystore.ErrUnavailable) && cctx.Err() != nil {
			// Abandoned: the check did not return by the deadline.
			err = wrapErr("start", "", s.timedOut(ctx, cctx, err))
		}
		ccancel()
		if err != nil {
			return nil, err
		}
	}
	return s, nil
}

// build returns a Store on client without reaching Redis.
func build(client redis.UniversalClient, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, errors.New("redisstore: client: nil")
	}
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Store{client: client, cfg: cfg, honoursCtx: honoursContext(client), parts: make([]part, cfg.shards)}
	s.batch = &batcher{exec: s.execBatch, maxBusy: defaultMaxBusy, maxBatch: defaultMaxBatch, detach: !s.honoursCtx}
	s.gate.nodes = map[string]*gateNode{}
	if err := s.checkDurableClient(); err != nil {
		return nil, err
	}
	return s, nil
}

// indexStates lists the states with an index, in the order the write scripts
// receive their keys.
func indexStates() []keystore.State {
	return []keystore.State{
		keystore.StatePending, keystore.StateUnknown, keystore.StateSucceeded,
		keystore.StateFailed, keystore.StateNotExecuted,
	}
}

func (s *Store) shardOf(id string) int {
	h := fnv.New32a()
	h.Write([]byte(id)) // never fails
	return int(h.Sum32() % uint32(s.cfg.shards))
}

// shardTag is the start of every key of a shard, <prefix>:{<prefix>:<shard>}:
// Every key of a shard carries this one Cluster hash tag, so that a
// record, its indexes and its shard's marker live in one hash slot, and the
// tag holds the prefix, so that the shards of different prefixes (tenants)
// fall in different slots.
func (s *Store) shardTag(shard int) string {
	return s.cfg.prefix + ":{" + s.cfg.prefix + ":" + strconv.Itoa(shard) + "}:"
}

func (s *Store) recordPrefix(shard int) string { return s.shardTag(shard) + "op:" }

func (s *Store) indexKey(shard int, st keystore.State) string {
	return s.shardTag(shard) + "ix:" + string(st)
}

func (s *Store) markKey(shard int) string { return s.shardTag(shard) + "mark" }

func (s *Store) recordKey(id string) string { return s.recordPrefix(s.shardOf(id)) + id }

// scriptKeys returns the KEYS of a write script: the record, then the
// shard's indexes in indexStates order.
func (s *Store) scriptKeys(id string) []string {
	shard := s.shardOf(id)
	keys := []string{s.recordPrefix(shard) + id}
	for _, st := range indexStates() {
		keys = append(keys, s.indexKey(shard, st))
	}
	return keys
}

// nonce identifies one call, so that a script resent by the client after a
// lost reply recognises its own earlier effect.
func nonce() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("redisstore: nonce: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

type scriptReply struct {
	status string
	rec    keystore.Record
	// info holds what a reply carries besides the record: the shard's
	// epoch of a "created", the reason and time of an "amnesia".
	info map[string]string
}

// parseReply decodes a script's reply: {status}, {status, stored record}
// or {status, field, value, ...}. A "created" or "updated" reply holds
// only the fields the script set; sent holds the ones the caller wrote, and
// the two together are the stored record.
func parseReply(res any, sent map[string]string) (scriptReply, error) {
	arr, ok := res.([]any)
	if !ok || len(arr) == 0 {
		return scriptReply{}, fmt.Errorf("redisstore: script reply %T, want a non-empty array", res)
	}
	status, ok := arr[0].(string)
	if !ok {
		return scriptReply{}, fmt.Errorf("redisstore: script status %T, want a string", arr[0])
	}
	r := scriptReply{status: status}
	if len(arr) == 1 {
		return r, nil
	}
	var h map[string]string
	var err error
	if len(arr) == 2 {
		v, ok := arr[1].(string)
		if !ok {
			return r, fmt.Errorf("redisstore: script record %T, want a string", arr[1])
		}
		h, err = unpackRecord(v)
	} else {
		h, err = flatToMap(arr[1:])
	}
	if err != nil {
		return r, err
	}
	if status == "amnesia" {
		r.info = h
		return r, nil
	}
	if ep, ok := h["_ep"]; ok {
		r.info = map[string]string{"ep": ep}
		delete(h, "_ep")
	}
	if status == "created" || status == "updated" {
		r.status = "ok"
		for k, v := range sent {
			if _, ok := h[k]; !ok {
				h[k] = v
			}
		}
	}
	r.rec, err = decodeRecord(h)
	return r, err
}

// eval runs a script for operation id, batched with concurrent calls (see
// batcher). When durable is set and a durability mode is configured,
// WAIT/WAITAOF follows the script on the same connection, and an "ok" that
// the wait does not confirm comes back with an error wrapping ErrNotDurable
// and keystore.ErrUnavailable.
func (s *Store) eval(ctx context.Context, op, id string, sent map[string]string, sc *redis.Script, durable bool, keys []string, args ...any) (scriptReply, error) {
	if err := ctx.Err(); err != nil {
		return scriptReply{}, wrapErr(op, id, err)
	}
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	res, waitErr, err := s.batch.do(&call{
		ctx: cctx, sc: sc, keys: keys, args: args, durable: durable && s.cfg.durability.mode != durableNone,
		done: make(chan struct{}),
	})
	if err != nil {
		if lerr := layoutErr(err); lerr != nil {
			return scriptReply{}, fmt.Errorf("redisstore: %s %q: %w", op, id, lerr)
		}
		s.noAnswer(ctx, err)
		return scriptReply{}, wrapErr(op, id, s.timedOut(ctx, cctx, err))
	}
	r, err := parseReply(res, sent)
	if err != nil {
		return r, fmt.Errorf("redisstore: %s %q: %w", op, id, err)
	}
	if r.status == "ok" && waitErr != nil {
		return r, fmt.Errorf("redisstore: %s %q: %w: %w: %w", op, id, keystore.ErrUnavailable, ErrNotDurable, waitErr)
	}
	return r, nil
}

func (s *Store) nodeFor(ctx context.Context, key string) (*redis.Client, error) {
	switch c := s.client.(type) {
	case *redis.Client:
		return c, nil
	case *redis.ClusterClient:
		return c.MasterForKey(ctx, key)
	}
	return nil, fmt.Errorf("redisstore: durability mode needs *redis.Client or *redis.ClusterClient, have %T", s.client)
}

func (s *Store) waitCmd(ctx context.Context, p redis.Pipeliner) *redis.Cmd {
	d := s.cfg.durability
	ms := d.timeout.Milliseconds()
	if d.mode == durableWaitAOF {
		return p.Do(ctx, "waitaof", d.local, d.replicas, ms)
	}
	return p.Do(ctx, "wait", d.replicas, ms)
}

func (s *Store) checkWait(wait *redis.Cmd) error {
	d := s.cfg.durability
	if d.mode == durableWaitAOF {
		n, err := wait.Int64Slice()
		if err != nil {
			return fmt.Errorf("WAITAOF: %w", err)
		}
		if len(n) != 2 {
			return fmt.Errorf("WAITAOF: reply has %d items, want 2", len(n))
		}
		if n[0] < int64(d.local) || n[1] < int64(d.replicas) {
			return fmt.Errorf("WAITAOF: fsync'd locally %d of %d, by %d of %d replicas within %s", n[0], d.local, n[1], d.replicas, d.timeout)
		}
		return nil
	}
	n, err := wait.Int64()
	if err != nil {
		return fmt.Errorf("WAIT: %w", err)
	}
	if n < int64(d.replicas) {
		return fmt.Errorf("WAIT: acknowledged by %d of %d replicas within %s", n, d.replicas, d.timeout)
	}
	return nil
}

func unexpected(op, id, status string) error {
	return fmt.Errorf("redisstore: %s %q: unexpected script status %q", op, id, status)
}

// Create implements keystore.Store. With a durability mode, it returns nil
// only once WAIT/WAITAOF confirmed the write. In a shard that lost what it
// acknowledged it refuses, writing nothing, with an error wrapping a
// *keystore.AmnesiaError (see the package documentation, "Amnesia").
func (s *Store) Create(ctx context.Context, rec keystore.Record, owner string, ttl time.Duration) (keystore.Record, error) {
	id := rec.OperationID
	if id == "" {
		return keystore.Record{}, errors.New("redisstore: create: operation ID: empty")
	}
	st := rec.State
	if st == "" {
		st = keystore.StatePending
	}
	if !st.Valid() {
		return keystore.Record{}, fmt.Errorf("redisstore: create %q: state %q: invalid", id, st)
	}
	n, err := nonce()
	if err != nil {
		return keystore.Record{}, err
	}
	rec.State = st
	shard := s.shardOf(id)
	keys, sent, args := s.createCall(n, rec, owner, ttl, s.parts[shard].view())
	r, err := s.eval(ctx, "create", id, sent, createScript, true, keys, args...)
	if err != nil {
		return r.rec, err
	}
	switch r.status {
	case "ok":
		if ep := r.info["ep"]; ep != "" {
			s.parts[shard].created(ep, keys[0], encodeMicros(r.rec.CreatedAt))
		}
		return r.rec, nil
	case "exists":
		return r.rec, fmt.Errorf("redisstore: create %q: %w", id, keystore.ErrExists)
	case "amnesia":
		s.afterLoss(ctx)
		return keystore.Record{}, fmt.Errorf("redisstore: create %q: %w", id, &keystore.AmnesiaError{
			Part: s.partName(shard), Reason: r.info["why"], DetectedAt: microsTime(r.info["lat"])})
	}
	return keystore.Record{}, unexpected("create", id, r.status)
}

// createCall returns the KEYS, the fields the caller knows and the ARGV of
// createScript for rec (whose State is set), given what this Store knows
// of the record's shard.
func (s *Store) createCall(nonce string, rec keystore.Record, owner string, ttl time.Duration, p partView) ([]string, map[string]string, []any) {
	id := rec.OperationID
	shard := s.shardOf(id)
	keys := s.scriptKeys(id)
	last := p.lastKey
	if last == "" {
		last = keys[0]
	}
	keys = append(keys, s.markKey(shard), last)
	sent := map[string]string{
		"op": id, "key": rec.Key, "kind": rec.Kind, "fp": rec.Fingerprint, "st": string(rec.State),
		"ver": "1", "att": strconv.Itoa(rec.Attempts), "fs": encodeTime(rec.FirstSentAt),
		"ls": encodeTime(rec.LastSentAt), "rr": rec.ResultRef, "res": string(rec.Result),
		"err": rec.Error, "meta": string(rec.Meta), "lo": owner, "lt": "1",
	}
	args := []any{nonce, id, rec.Key, rec.Kind, rec.Fingerprint, string(rec.State), rec.Attempts,
		sent["fs"], sent["ls"], rec.ResultRef,
		rec.Result, rec.Error, rec.Meta, owner, ttl.Microseconds(), s.cfg.retention.Milliseconds(),
		p.epoch, p.lastCA, p.verified, newEpoch(), s.cfg.shards}
	return keys, sent, args
}

// Get implements keystore.Store.
func (s *Store) Get(ctx context.Context, id string) (keystore.Record, error) {
	if err := ctx.Err(); err != nil {
		return keystore.Record{}, wrapErr("get", id, err)
	}
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	var v string
	err := s.bounded(cctx, func(ctx context.Context) (err error) {
		v, err = s.client.Get(ctx, s.recordKey(id)).Result()
		return err
	})
	if errors.Is(err, redis.Nil) {
		return keystore.Record{}, fmt.Errorf("redisstore: get %q: %w", id, keystore.ErrNotFound)
	}
	if err != nil {
		if lerr := layoutErr(err); lerr != nil {
			return keystore.Record{}, fmt.Errorf("redisstore: get %q: %s: %w", id, s.recordKey(id), lerr)
		}
		s.noAnswer(ctx, err)
		return keystore.Record{}, wrapErr("get", id, s.timedOut(ctx, cctx, err))
	}
	h, err := unpackRecord(v)
	if err != nil {
		return keystore.Record{}, fmt.Errorf("redisstore: get %q: %s: %w", id, s.recordKey(id), err)
	}
	return decodeRecord(h)
}

// Acquire implements keystore.Store. It waits for durability like Create:
// an Acquire lost in a failover would let the next one issue the same
// fencing token again.
func (s *Store) Acquire(ctx context.Context, id, owner string, ttl time.Duration) (keystore.Record, error) {
	n, err := nonce()
	if err != nil {
		return keystore.Record{}, err
	}
	r, err := s.eval(ctx, "acquire", id, nil, acquireScript, true, s.scriptKeys(id), n, owner, ttl.Microseconds())
	if err != nil {
		return r.rec, err
	}
	switch r.status {
	case "ok":
		return r.rec, nil
	case "held":
		return r.rec, fmt.Errorf("redisstore: acquire %q: %w", id, keystore.ErrLeaseHeld)
	case "notfound":
		return keystore.Record{}, fmt.Errorf("redisstore: acquire %q: %w", id, keystore.ErrNotFound)
	}
	return keystore.Record{}, unexpected("acquire", id, r.status)
}

// Renew implements keystore.Store. A Renew lost in a failover only shortens
// the lease, which the holder's next Update detects, so it does not wait for
// durability.
func (s *Store) Renew(ctx context.Context, id string, token int64, ttl time.Duration) (keystore.Record, error) {
	r, err := s.eval(ctx, "renew", id, nil, renewScript, false, s.scriptKeys(id), token, ttl.Microseconds())
	if err != nil {
		return r.rec, err
	}
	switch r.status {
	case "ok":
		return r.rec, nil
	case "lost":
		return r.rec, fmt.Errorf("redisstore: renew %q: %w", id, keystore.ErrLeaseLost)
	case "notfound":
		return keystore.Record{}, fmt.Errorf("redisstore: renew %q: %w", id, keystore.ErrNotFound)
	}
	return keystore.Record{}, unexpected("renew", id, r.status)
}

// Release implements keystore.Store. A lost Release only delays the next
// Acquire until the lease expires, so it does not wait for durability.
func (s *Store) Release(ctx context.Context, id string, token int64) error {
	r, err := s.eval(ctx, "release", id, nil, releaseScript, false, s.scriptKeys(id), token)
	if err != nil {
		return err
	}
	if r.status != "ok" {
		return unexpected("release", id, r.status)
	}
	return nil
}

// Update implements keystore.Store. With a durability mode, it returns nil
// only once WAIT/WAITAOF confirmed the write.
func (s *Store) Update(ctx context.Context, rec keystore.Record) (keystore.Record, error) {
	id := rec.OperationID
	if !rec.State.Valid() {
		return keystore.Record{}, fmt.Errorf("redisstore: update %q: state %q: invalid", id, rec.State)
	}
	n, err := nonce()
	if err != nil {
		return keystore.Record{}, err
	}
	sent := map[string]string{
		"st": string(rec.State), "att": strconv.Itoa(rec.Attempts), "fs": encodeTime(rec.FirstSentAt),
		"ls": encodeTime(rec.LastSentAt), "rr": rec.ResultRef, "res": string(rec.Result),
		"err": rec.Error, "meta": string(rec.Meta), "fp": rec.Fingerprint,
	}
	r, err := s.eval(ctx, "update", id, sent, updateScript, true, s.scriptKeys(id),
		n, rec.Version, rec.LeaseToken, string(rec.State), rec.Attempts,
		sent["fs"], sent["ls"], rec.ResultRef,
		rec.Result, rec.Error, rec.Meta, rec.Fingerprint,
		s.cfg.retention.Milliseconds())
	if err != nil {
		return r.rec, err
	}
	switch r.status {
	case "ok":
		return r.rec, nil
	case "notfound":
		return keystore.Record{}, fmt.Errorf("redisstore: update %q: %w", id, keystore.ErrNotFound)
	case "lost":
		return r.rec, fmt.Errorf("redisstore: update %q: %w", id, keystore.ErrLeaseLost)
	case "conflict":
		return r.rec, fmt.Errorf("redisstore: update %q: version %d, stored %d: %w", id, rec.Version, r.rec.Version, keystore.ErrConflict)
	case "terminal":
		return r.rec, fmt.Errorf("redisstore: update %q: %w: it is %s and cannot become %s", id, keystore.ErrConflict, r.rec.State, rec.State)
	}
	return keystore.Record{}, unexpected("update", id, r.status)
}
