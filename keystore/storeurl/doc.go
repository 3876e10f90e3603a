// Package storeurl opens a keystore.Store named by a URL, for command-line
// tools and configuration files:
//
//	memory:                                   in-process, tests only (a restart forgets every key)
//	sqlite:PATH                               SQLite file (created if absent); also sqlite:///abs/path
//	postgres://user:pw@host:5432/db?…         PostgreSQL (pgx DSN; postgresql:// too)
//	redis://user:pw@host:6379/0               Redis, single node (rediss:// for TLS)
//	redis+cluster://user:pw@h1:p1,h2:p2/?…    Redis Cluster, any of its nodes (rediss+cluster:// for TLS)
//
// Query parameters the store understands are taken out before the rest goes
// to the driver:
//
//	table=NAME              sqlite, postgres: the table (default sqlstore.DefaultTable)
//	busy_timeout=DURATION   sqlite: sqlstore.WithBusyTimeout
//	prefix=PREFIX           redis, redis+cluster: the key prefix (default "pagpolar")
//	wait=N                  redis, redis+cluster: redisstore.WithWait(N, wait_timeout)
//	wait_timeout=DURATION   with wait: WAIT's timeout (default 500ms)
//	volatile=1              redis, redis+cluster: redisstore.AllowVolatile, the opt-out
//	                        that lets a Redis without an append-only file be used
//	async_commit=1          postgres: sqlstore.AllowAsyncCommit, the opt-out that lets a
//	                        session with synchronous_commit off be used
//	declared_new=NOTE       sqlite, postgres, redis, redis+cluster: sqlstore.DeclaredNew or
//	                        redisstore.DeclaredNew: a store found empty and initialised
//	                        now is declared new (its history proven) with NOTE; for the
//	                        first deployment only (see keystore.HistoryProver)
//
// Without the opt-outs, a Redis that keeps no append-only file and a
// PostgreSQL session with synchronous_commit off are refused (SAFETY rule
// 13): they can lose records they acknowledged.
//
// Open creates the schema where there is one (sqlstore Migrate, idempotent)
// and checks that the store answers, so an unreachable store fails at once
// with an error wrapping keystore.ErrUnavailable. OpenExisting and
// OpenReadOnly read the same URLs the same way but never create a store:
// they are for operator tools (pagpolar ops), where a typo in a URL must be
// an error, not a new empty store. Errors never show a password: URLs are
// quoted with their userinfo redacted.
//
// Redis clients (single node and Cluster) are built to fail fast
// (DialerRetries 1, ContextTimeoutEnabled), so that with Redis away a store
// call fails in well under redisstore.DefaultCallTimeout; the URL's own
// go-redis parameters (dial_timeout, max_retries, read_timeout...; for a
// Cluster also max_redirects and further nodes as addr=host:port) are
// honoured. A Cluster URL has no database number; its nodes are only where
// the client starts: it learns the rest of the Cluster from them, and needs
// one of them to answer.
package storeurl
