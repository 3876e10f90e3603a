// Package redisstore keeps idempotency records in Redis, for fleets that
// already share one. It implements keystore.Store on go-redis/v9 and accepts
// any redis.UniversalClient: a single node, Sentinel (a failover client) or
// Cluster.
//
// # Layout
//
// Each record is one string value: a MessagePack array (Lua's cmsgpack) of
// the record layout's name ("r1") and the record's fields, which the
// scripts unpack, change and write back whole. One compact value costs
// about half of a hash of the same fields, whose longer values (the
// result, the meta, the fingerprint) exceed hash-max-listpack-value (64 B)
// and turn it into a hashtable: a settled PIX record costs about 1.2 KB,
// index entry included (BENCHMARKS.md). Records are spread over a fixed
// number of shards (WithShards, default 16); every key of a shard carries
// the same Cluster hash tag, which holds the prefix and the shard number,
// so that the shards of different prefixes (tenants) fall in different
// hash slots:
//
//	<prefix>:{<prefix>:<shard>}:op:<operation ID>   the record (string)
//	<prefix>:{<prefix>:<shard>}:ix:<state>          index: sorted set of operation IDs, scored by UpdatedAt (µs)
//	<prefix>:{<prefix>:<shard>}:mark                the shard's marker (see Amnesia)
//
// Every marker names the record layout. New refuses, with an error
// wrapping ErrLayout that names the marker, a prefix whose markers name
// another layout or none, and, naming an index, a prefix without any
// marker whose indexes list records (its markers were deleted, so its
// records cannot be checked against a loss); a record key holding anything else than a record
// of this layout is refused the same way by every call, and left as it is.
// Nothing is converted: start a new prefix.
//
// Because a record and the indexes that list it share one hash slot, each
// write is one Lua script that changes the record and its index entries
// atomically, on a single node and in Cluster alike: List never misses a
// record whose write has returned, whatever state it is in. The price is that
// a shard's slot takes 1/shards of the load; with many Cluster masters, raise
// the shard count (which is fixed for the life of the data: New refuses a
// prefix written with another count, since records would become invisible and
// an operation could then be created twice).
//
// Create (create-if-absent), Update (compare-and-set on Version and the lease
// token, with an unexpired lease), Acquire, Renew and Release (checking the
// owner or token) are scripts run with EVALSHA, falling back to EVAL. Lease
// expiry and every timestamp the store sets come from Redis's own clock
// (TIME inside the script; Redis ≥ 5 replicates a script's effects, not the
// script, so replicas store the same values). Scripts are idempotent under
// the client's own retries: go-redis resends a command whose reply was lost,
// and a per-call nonce stored in the record turns a resent Create, Update or
// Acquire that had already been applied into a success instead of
// ErrExists/ErrConflict or a second token.
//
// Concurrent calls share round trips: a Store keeps at most four pipelines
// in flight; a call that finds one free is sent at once on its own, and
// calls arriving while all four are busy are sent together (up to 64) by the
// next free one, as one pipeline on one connection. A lone caller pays
// nothing for it; at 64 callers it cut the client's CPU per charge about
// threefold and Redis's by about 40% in this package's measurements
// (BenchmarkRedisStoreBatching). A caller whose context ends while its call
// is still queued gets the context's error and its call is never sent.
//
// Terminal records (succeeded, failed) get a TTL equal to the retention
// period (WithRetention, default 30 days) so Redis removes them on its own;
// DeleteExpired removes terminal records older than its cut-off explicitly, in
// bounded batches, and drops the index entries of records Redis has already
// expired. Pending, unknown and not_executed records never get a TTL.
//
// # What the exactly-once guarantee needs from Redis
//
// A record must outlive the process that wrote it and survive a Redis restart
// and failover, or an operation can be forgotten while its charge went through.
// Redis does not give that by default:
//
//   - Persistence. Without AOF (appendonly yes), a restart loses every write
//     since the last RDB snapshot — with "save" empty, everything. New
//     therefore refuses a Redis whose masters do not all keep an
//     append-only file (CONFIG GET appendonly, or INFO persistence where
//     CONFIG is blocked), and one that will not say, with an error wrapping
//     ErrVolatile, unless AllowVolatile is given (then it warns). With
//     appendfsync everysec (the usual setting) a power loss or kernel crash
//     loses up to about one second of acknowledged writes; appendfsync always
//     fsyncs before replying, at a cost of one disk flush per write batch.
//   - Replication is asynchronous. A master acknowledges a write before any
//     replica has it; if the master fails and a replica is promoted, the
//     acknowledged write is gone. A Create lost that way lets a later call
//     create the operation again; an Acquire lost that way lets a later
//     Acquire hand out the same fencing token twice. The Store detects the
//     lost Creates it made (see Amnesia); WithWait prevents the loss.
//   - WithWait(n, timeout) sends WAIT n after each Create, Update and Acquire
//     on the connection that ran the script (one WAIT per shared pipeline):
//     the call returns only once n replicas have the write in memory. It
//     shrinks the failover window (a promoted replica that acknowledged has
//     the write) at the cost of one replica round trip per write, and it is
//     not a disk guarantee: replicas and master can still all lose it in a
//     common power loss.
//   - WithWaitAOF(local, replicas, timeout) sends WAITAOF (Redis ≥ 7.2): the
//     call returns only once the write is fsync'd to the local AOF (local=1)
//     and/or to the AOF of that many replicas. That is the disk guarantee,
//     at the cost of an fsync (about 0.3 ms on local SSD, shared by the
//     writes of one event-loop iteration) plus the replica round trip.
//
// When WAIT or WAITAOF reports fewer acknowledgements than asked for within
// the timeout, or fails, the write has still been applied on the master: the
// call returns the record together with an error wrapping both
// keystore.ErrUnavailable and ErrNotDurable. The write may or may not survive
// (it is lost only if the master fails before it propagates), so the caller
// treats it like any unreachable store and sends nothing. That is safe either
// way: after an unconfirmed Create, Acquire, or Update made before a send, a
// later call finds the record (ErrExists, then Acquire) or does not, and no
// request was made under it; after an unconfirmed Update that records an
// outcome, the record may fall back to its earlier pending/unknown state,
// which is settled by lookup (SAFETY rules 5 and 8), never resent blind.
//
// # WithWait and failover
//
// With WithWait(n, …), a write acknowledged by n replicas survives the
// failure of its master if the replica promoted is one of them: with n
// equal to the number of replicas of each master, any promoted replica has
// it (measured: 0 acknowledged writes lost over a master kill on a
// 3-master, 3-replica Cluster, see the cluster tests). Redis Cluster
// promotes the replica with the most recent replication offset; Sentinel
// likewise prefers the most up to date one. While the master is down (until
// the Cluster or Sentinel promotes a replica: about cluster-node-timeout
// plus an election), the writes of its shards fail with
// keystore.ErrUnavailable and nothing is sent; the other masters' shards go
// on. After the promotion the new master has no replica until one attaches
// (the old master restarting as a replica, or a spare one), and a write
// there cannot be confirmed: so that it does not wait out the WAIT timeout
// for nothing, durable writes fail at once, not sent, on a master whose
// ROLE lists fewer replicas than n (checked before its first write and
// after each shortfall), and for one second after a WAIT on it fell short
// (a replica attached but frozen or lagging). Every durable write therefore
// either is confirmed, or fails within the WAIT timeout at most once per
// master and second, or fails at once; the other masters are not held up.
//
// # Amnesia
//
// The Store tells "this record never existed" from "this Redis lost what it
// acknowledged" (keystore.AmnesiaGuard, SAFETY rule 13). Each shard has a
// marker (hash <tag>mark) naming the shard's epoch, written when New
// initialises the prefix; every Store remembers each shard's epoch and the
// last record it created there and was told was durable. The Create script
// checks, atomically with the insert: the marker is there, not marked lost,
// names the epoch the Store knows, and the Store's last record in the shard
// is still there (unless DeleteExpired or the retention TTL could have
// removed it). Otherwise the shard is marked lost (its marker written again
// if it was gone), for every process, nothing is written, and Create returns
// an error wrapping a *keystore.AmnesiaError (so keystore.ErrAmnesia and
// keystore.ErrUnavailable: the SDK sends nothing). A Store that finds a loss
// checks every other shard at once too. Get, List, Acquire, Renew, Release,
// Update and DeleteExpired keep working, so that what survived can be
// settled by lookup; AcceptLoss then gives the lost shards a new epoch,
// which every Store adopts at its next Create. Detected, at the first Create
// in the shard after the loss:
//
//   - a Redis restarted without persistence (with AllowVolatile), FLUSHALL,
//     a failover to an empty replica: the marker is gone (measured: the first
//     Create after a restart refused 2 ms after Redis answered again, and
//     every shard was marked lost by the same call);
//   - a shard emptied and initialised again by a process started after the
//     loss: the marker names another epoch;
//   - acknowledged writes lost (a failover to a replica that had not
//     received them, an AOF that lost its last second): by each Store whose
//     last record in the shard is among them.
//
// New also marks lost the shards whose marker is missing while other shards
// of the prefix have theirs (a Cluster node that came back empty). Not
// detected: a prefix emptied entirely while no Store that had used it was
// running: New then sees a new prefix.
//
// Lists, the reaper and Get read through the client as configured; do not
// route reads to replicas (ClusterOptions.ReadOnly / RouteByLatency /
// RouteRandomly), or a record just written may appear missing.
//
// # Cluster
//
// On a Cluster (a *redis.ClusterClient; keystore/storeurl:
// redis+cluster://host:port,host:port/?prefix=…), each shard is one hash
// slot. New needs only the masters of some shards: shards it cannot reach
// are checked at their first use (a prefix without any marker is
// initialised only when every shard answers). A slot being migrated
// answers TRYAGAIN or ASK to the multi-key scripts while its keys move:
// those calls fail with keystore.ErrUnavailable, nothing is sent, and they
// work again once the slot has moved (go-redis follows MOVED by itself).
//
// # Errors and recovery
//
// Network failures, timeouts, a cancelled context and transient server states
// (LOADING, READONLY, MASTERDOWN, CLUSTERDOWN, TRYAGAIN, MOVED/ASK seen by the
// durable path, BUSY, OOM, NOREPLICAS) return errors wrapping
// keystore.ErrUnavailable. go-redis reconnects by itself, so the same Store
// works again once Redis is back.
//
// # Bounded calls
//
// Every call that reaches Redis returns within the call timeout
// (WithCallTimeout, default DefaultCallTimeout = 3 s) or by its context's
// deadline if that is earlier — with an error wrapping
// keystore.ErrUnavailable when Redis did not answer — whatever the client's
// own settings. That matters because go-redis ≥ 9.2x retries each failed dial
// DialerRetries times (default 5, 100 ms apart) inside each of MaxRetries+1
// command attempts: against a refused port a call with the defaults takes
// about 1.7 s to fail (BenchmarkOutageCall), and with a longer DialTimeout,
// more retries or a host that drops packets it can take far longer than
// 3 s (a Create took 40 s with MaxRetries 10 and DialerRetries 10, 200 ms
// apart, before the store bounded it). The store gives
// each call a context with the call timeout; go-redis honours a context's
// deadline while it waits for a connection, dials and backs off, whatever
// the client's options. Reads and writes on an open connection honour it
// only with ContextTimeoutEnabled: true; for a client without it (or of a
// type the store does not know) each call runs on a goroutine of its own
// and the caller stops waiting at the deadline, leaving the command to end
// within the client's ReadTimeout/WriteTimeout. A call that timed out may
// or may not have been applied, like any call whose reply was lost; the
// caller sends nothing on it (see the WAIT discussion above). New bounds
// each of its checks the same way, and all of them by 10 s.
//
// A client built for this store should fail fast and let the store and its
// callers decide about retrying:
//
//	opt.DialerRetries = 1             // one dial per connection attempt
//	opt.ContextTimeoutEnabled = true  // the call's deadline bounds socket waits too
//
// keystore/storeurl builds its clients that way; the store then fails a call
// against a refused port in under 0.1 s (go-redis still retries the command
// MaxRetries times, with backoff).
//
// # Logging
//
// go-redis logs through one process-wide logger (redis.SetLogger), which by
// default prints to stderr: during an outage, a line for every failed dial.
// Importing this package installs, once, in its init function, a logger that
// passes those lines to slog.Default() at debug level with the attribute
// logger=go-redis: the store's errors already report every failure to its
// caller, and a library should not print on its own. It is done at init, not
// in New, so that the application always has the last word: a
// redis.SetLogger (or logging.Disable / logging.Enable) call in main, or in
// the init of any package that imports this one, replaces it, and New never
// overrides it. Start-up warnings about Redis's settings go to WithLogger's
// logger.
package redisstore
