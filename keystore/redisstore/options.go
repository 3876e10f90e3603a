package redisstore

import (
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Defaults.
const (
	// DefaultPrefix starts every key the store writes.
	DefaultPrefix = "pagpolar"
	// DefaultRetention is how long terminal records are kept: well past the
	// server's 24 h replay window, so a late retry still finds its record.
	DefaultRetention = 30 * 24 * time.Hour
	// DefaultShards is the number of hash-tag shards records are spread over.
	DefaultShards = 16
	// MaxShards is one shard per Cluster hash slot at most.
	MaxShards = 16384
	// DefaultCallTimeout bounds each Store call that reaches Redis: a call
	// returns, with an error wrapping keystore.ErrUnavailable, within this
	// long of starting (or by its context's deadline, if that comes first),
	// whatever the client's dial retries, command retries and timeouts (see
	// the package documentation, "Bounded calls").
	DefaultCallTimeout = 3 * time.Second
	// startupTimeout bounds New's checks (New takes no context).
	startupTimeout = 10 * time.Second
)

type durabilityMode int

const (
	durableNone durabilityMode = iota
	durableWait
	durableWaitAOF
)

type durability struct {
	mode     durabilityMode
	local    int // WAITAOF numlocal
	replicas int
	timeout  time.Duration
}

func (d durability) String() string {
	switch d.mode {
	case durableWait:
		return fmt.Sprintf("WAIT %d %s", d.replicas, d.timeout)
	case durableWaitAOF:
		return fmt.Sprintf("WAITAOF %d %d %s", d.local, d.replicas, d.timeout)
	}
	return "none"
}

type config struct {
	prefix      string
	retention   time.Duration
	shards      int
	durability  durability
	logger      *slog.Logger
	listPage    int64 // index entries List reads per index and round trip under a prefix filter
	callTimeout time.Duration
	// allowVolatile: start on a Redis without an append-only file.
	allowVolatile bool
	// waitCooldown: how long durable writes on a master fail fast after a
	// WAIT on it fell short (wait.go).
	waitCooldown time.Duration
	// declareNew: the note of DeclaredNew ("": not declared).
	declareNew string
}

func defaultConfig() config {
	return config{
		prefix: DefaultPrefix, retention: DefaultRetention, shards: DefaultShards,
		listPage: defaultListPage, callTimeout: DefaultCallTimeout, waitCooldown: defaultWaitCooldown,
	}
}

func (c *config) validate() error {
	if c.prefix == "" {
		return fmt.Errorf("redisstore: prefix: empty")
	}
	// Braces would change the Cluster hash tag and glob characters would
	// make the prefix unusable in SCAN MATCH.
	if strings.ContainsAny(c.prefix, "{}*?[]\\") {
		return fmt.Errorf("redisstore: prefix %q: must not contain any of {}*?[]\\", c.prefix)
	}
	if c.retention < time.Millisecond {
		return fmt.Errorf("redisstore: retention %s: must be at least 1ms", c.retention)
	}
	if c.shards < 1 || c.shards > MaxShards {
		return fmt.Errorf("redisstore: shards %d: must be between 1 and %d", c.shards, MaxShards)
	}
	d := c.durability
	switch d.mode {
	case durableWait:
		if d.replicas < 1 {
			return fmt.Errorf("redisstore: WAIT replicas %d: must be at least 1", d.replicas)
		}
	case durableWaitAOF:
		if d.local < 0 || d.local > 1 {
			return fmt.Errorf("redisstore: WAITAOF numlocal %d: must be 0 or 1", d.local)
		}
		if d.replicas < 0 || d.local+d.replicas < 1 {
			return fmt.Errorf("redisstore: WAITAOF numreplicas %d: must be >= 0, and numlocal+numreplicas >= 1", d.replicas)
		}
	}
	if c.callTimeout < time.Millisecond {
		return fmt.Errorf("redisstore: call timeout %s: must be at least 1ms", c.callTimeout)
	}
	if d.mode != durableNone && d.timeout < time.Millisecond {
		// WAIT with timeout 0 blocks forever on the server.
		return fmt.Errorf("redisstore: %s: timeout must be at least 1ms", d)
	}
	if d.mode != durableNone && d.timeout >= c.callTimeout {
		// Every durable write would run out of time waiting.
		return fmt.Errorf("redisstore: %s: timeout must be shorter than the call timeout %s (WithCallTimeout)", d, c.callTimeout)
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	return nil
}

// Option configures a Store.
type Option func(*config)

// WithPrefix sets the prefix of every key (default "pagpolar"). Stores with
// different prefixes share nothing. It must not contain braces or glob
// characters.
func WithPrefix(prefix string) Option { return func(c *config) { c.prefix = prefix } }

// WithRetention sets how long a terminal (succeeded or failed) record is kept
// after its last update before Redis expires it (default 30 days). Keep it
// well above the server's 24 h replay window, and equal in every process
// sharing a prefix.
func WithRetention(d time.Duration) Option { return func(c *config) { c.retention = d } }

// WithShards sets how many hash-tag shards records are spread over (default
// 16). In Redis Cluster each shard is one hash slot, so the count bounds how
// evenly the load spreads over masters. It is fixed for the life of the data
// under a prefix: New fails if the prefix was written with another count.
func WithShards(n int) Option { return func(c *config) { c.shards = n } }

// WithWait makes every Create, Update and Acquire wait (WAIT) until
// replicas replicas have acknowledged the write, for at most timeout, before
// returning. Fewer acknowledgements → an error wrapping ErrNotDurable and
// keystore.ErrUnavailable (see the package documentation). A write
// acknowledged by replicas replicas survives a failover that promotes one of
// them. A master with fewer replicas attached (ROLE), or whose last WAIT fell
// short less than a second ago, gets no durable write at all: those fail at
// once, not sent, instead of each waiting out timeout — so after a failover
// the promoted master's shards take writes again only once a replica has
// attached to it (see "WithWait and failover" in the package
// documentation). timeout must be shorter than the client's ReadTimeout and
// the call timeout (WithCallTimeout).
func WithWait(replicas int, timeout time.Duration) Option {
	return func(c *config) {
		c.durability = durability{mode: durableWait, replicas: replicas, timeout: timeout}
	}
}

// WithWaitAOF makes every Create, Update and Acquire wait (WAITAOF, Redis ≥
// 7.2) until the write is fsync'd to the local AOF (local = 1) and to the AOF
// of replicas replicas, for at most timeout. New fails if the server does
// not support it or has appendonly off while local = 1. timeout must be
// shorter than the client's ReadTimeout and the call timeout
// (WithCallTimeout).
func WithWaitAOF(local, replicas int, timeout time.Duration) Option {
	return func(c *config) {
		c.durability = durability{mode: durableWaitAOF, local: local, replicas: replicas, timeout: timeout}
	}
}

// AllowVolatile opts out, by name, of New's refusal of a Redis that keeps
// no append-only file (appendonly no, or settings New cannot read): for a
// development or test Redis whose loss of records is acceptable. New logs a
// warning instead. A restart of such a Redis forgets every record; the
// Store then refuses Create until the loss is accepted (see Amnesia), and a
// process started after the restart cannot tell the emptied Redis from a
// new one. keystore/storeurl: ?volatile=1.
func AllowVolatile() Option { return func(c *config) { c.allowVolatile = true } }

// WithLogger sets where start-up warnings go (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithCallTimeout sets how long one Store call may take before it gives up
// with an error wrapping keystore.ErrUnavailable (default
// DefaultCallTimeout; at least 1ms). A caller's context with an earlier
// deadline ends the call sooner. Keep it above Redis's worst healthy
// latency, WAIT/WAITAOF timeouts included: a call that times out may still
// have been applied, and is reported like any unreachable store.
func WithCallTimeout(d time.Duration) Option { return func(c *config) { c.callTimeout = d } }
