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
// with an error wrapping keystore.ErrUnavailable. Errors never show a
// password: URLs are quoted with their userinfo redacted.
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

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/redisstore"
	"github.com/pagpolar/pagpolar-go/keystore/sqlstore"
	"github.com/redis/go-redis/v9"
)

// ErrBadURL is wrapped by every error about the URL itself (as opposed to
// the store it names being unreachable, which wraps keystore.ErrUnavailable).
var ErrBadURL = errors.New("storeurl: bad store URL")

// Forms lists the accepted URL forms, for usage messages.
const Forms = "memory:, sqlite:PATH, postgres://…, postgresql://…, redis://…, rediss://…, redis+cluster://h1:p,h2:p/…, rediss+cluster://…"

// Open opens the store rawURL names and returns it with the function that
// closes it (and whatever Open opened for it). ctx bounds the schema
// migration and the first contact with the store.
func Open(ctx context.Context, rawURL string) (keystore.Store, func() error, error) {
	scheme, _, ok := strings.Cut(rawURL, ":")
	if !ok || scheme == "" {
		return nil, nil, fmt.Errorf("%w: %q has no scheme; want one of %s", ErrBadURL, redact(rawURL), Forms)
	}
	switch strings.ToLower(scheme) {
	case "memory":
		if rest := rawURL[len(scheme)+1:]; rest != "" && rest != "//" {
			return nil, nil, fmt.Errorf("%w: memory: takes nothing after the colon, got %q", ErrBadURL, rest)
		}
		return keystore.NewMemory(), func() error { return nil }, nil
	case "sqlite":
		return openSQLite(ctx, rawURL[len(scheme)+1:])
	case "postgres", "postgresql":
		return openPostgres(ctx, rawURL)
	case "redis", "rediss":
		return openRedis(ctx, rawURL)
	case "redis+cluster", "rediss+cluster":
		return openRedisCluster(ctx, rawURL)
	}
	return nil, nil, fmt.Errorf("%w: unknown scheme %q; want one of %s", ErrBadURL, scheme, Forms)
}

// redact returns rawURL with any password replaced, for error messages. A
// string that does not parse as a URL is cut at its userinfo.
func redact(rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil {
		return u.Redacted()
	}
	if at := strings.LastIndex(rawURL, "@"); at >= 0 {
		if i := strings.Index(rawURL, "://"); i >= 0 && i < at {
			return rawURL[:i+3] + "xxxxx" + rawURL[at:]
		}
		return "xxxxx" + rawURL[at:]
	}
	return rawURL
}

// parseURL parses rawURL without ever echoing it: url.Parse's own error
// quotes the whole string, password included.
func parseURL(rawURL string) (*url.URL, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%w: %s: %v", ErrBadURL, redact(rawURL), err)
	}
	return u, nil
}

// takeParam removes key from u's query and returns its value. The query is
// parsed strictly: url.URL.Query would silently drop a malformed pair
// (e.g. one with a semicolon), and with it a setting the user asked for.
func takeParam(u *url.URL, key string) (string, bool, error) {
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return "", false, fmt.Errorf("%w: %s: query: %v", ErrBadURL, u.Redacted(), err)
	}
	vals, ok := q[key]
	if !ok {
		return "", false, nil
	}
	q.Del(key)
	// Spaces as %20, not '+': pgx reads a '+' in its DSN's query as a plus
	// sign (options=-c%20name%3Dvalue). Encode writes a literal '+' as %2B,
	// so every '+' it writes is a space.
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	return vals[len(vals)-1], true, nil
}

func openSQLite(ctx context.Context, rest string) (keystore.Store, func() error, error) {
	pathPart, rawQuery, _ := strings.Cut(rest, "?")
	if strings.HasPrefix(pathPart, "//") {
		// URL form: sqlite:///abs/path; a host makes no sense for a file.
		if !strings.HasPrefix(pathPart, "///") {
			return nil, nil, fmt.Errorf("%w: sqlite:%s: a host is not allowed; use sqlite:PATH or sqlite:///ABS/PATH", ErrBadURL, pathPart)
		}
		pathPart = pathPart[2:]
	}
	path, err := url.PathUnescape(pathPart)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: sqlite path %q: %v", ErrBadURL, pathPart, err)
	}
	if path == "" {
		return nil, nil, fmt.Errorf("%w: sqlite: needs a file path, e.g. sqlite:/var/lib/shop/pagpolar.db", ErrBadURL)
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: sqlite query %q: %v", ErrBadURL, rawQuery, err)
	}
	var opts []sqlstore.Option
	for key, vals := range q {
		v := vals[len(vals)-1]
		switch key {
		case "table":
			opts = append(opts, sqlstore.WithTable(v))
		case "declared_new":
			opts = append(opts, sqlstore.DeclaredNew(v))
		case "busy_timeout":
			d, err := time.ParseDuration(v)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: sqlite busy_timeout %q: %v", ErrBadURL, v, err)
			}
			opts = append(opts, sqlstore.WithBusyTimeout(d))
		default:
			return nil, nil, fmt.Errorf("%w: sqlite: unknown parameter %q (known: table, busy_timeout, declared_new)", ErrBadURL, key)
		}
	}
	s, err := sqlstore.OpenSQLite(path, opts...)
	if err != nil {
		return nil, nil, badOrUnavailable("sqlite:"+path, err)
	}
	return migrated(ctx, s, "sqlite:"+path)
}

func openPostgres(ctx context.Context, rawURL string) (keystore.Store, func() error, error) {
	u, err := parseURL(rawURL)
	if err != nil {
		return nil, nil, err
	}
	var opts []sqlstore.Option
	table, ok, err := takeParam(u, "table")
	if err != nil {
		return nil, nil, err
	}
	if ok {
		opts = append(opts, sqlstore.WithTable(table))
	}
	async, err := takeBool(u, "async_commit")
	if err != nil {
		return nil, nil, err
	}
	if async {
		opts = append(opts, sqlstore.AllowAsyncCommit())
	}
	if note, ok, err := takeParam(u, "declared_new"); err != nil {
		return nil, nil, err
	} else if ok {
		opts = append(opts, sqlstore.DeclaredNew(note))
	}
	s, err := sqlstore.OpenPostgres(u.String(), opts...)
	if err != nil {
		return nil, nil, badOrUnavailable(u.Redacted(), err)
	}
	return migrated(ctx, s, u.Redacted())
}

// badOrUnavailable wraps an error from opening a store: unreachable stays
// ErrUnavailable, anything else is a problem with the URL.
func badOrUnavailable(name string, err error) error {
	if errors.Is(err, keystore.ErrUnavailable) || errors.Is(err, redisstore.ErrVolatile) || errors.Is(err, sqlstore.ErrAsyncCommit) {
		return fmt.Errorf("storeurl: %s: %w", name, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrBadURL, name, err)
}

func migrated(ctx context.Context, s *sqlstore.Store, name string) (keystore.Store, func() error, error) {
	if err := s.Migrate(ctx); err != nil {
		_ = s.Close()
		return nil, nil, fmt.Errorf("storeurl: %s: %w", name, err)
	}
	if err := s.Ping(ctx); err != nil {
		_ = s.Close()
		return nil, nil, fmt.Errorf("storeurl: %s: %w", name, err)
	}
	return s, s.Close, nil
}

// takeBool removes a boolean parameter (1, true, yes...; strconv.ParseBool)
// from u's query; absent is false.
func takeBool(u *url.URL, key string) (bool, error) {
	v, ok, err := takeParam(u, key)
	if err != nil || !ok {
		return false, err
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%w: %s: %s=%q: want 1 or 0 (true or false)", ErrBadURL, u.Redacted(), key, v)
	}
	return b, nil
}

// redisOptions takes the store's own parameters out of u's query.
func redisOptions(u *url.URL) ([]redisstore.Option, error) {
	var opts []redisstore.Option
	prefix, ok, err := takeParam(u, "prefix")
	if err != nil {
		return nil, err
	}
	if ok {
		opts = append(opts, redisstore.WithPrefix(prefix))
	}
	volatile, err := takeBool(u, "volatile")
	if err != nil {
		return nil, err
	}
	if volatile {
		opts = append(opts, redisstore.AllowVolatile())
	}
	if note, ok, err := takeParam(u, "declared_new"); err != nil {
		return nil, err
	} else if ok {
		opts = append(opts, redisstore.DeclaredNew(note))
	}
	wait, hasWait, err := takeParam(u, "wait")
	if err != nil {
		return nil, err
	}
	timeout, hasTimeout, err := takeParam(u, "wait_timeout")
	if err != nil {
		return nil, err
	}
	switch {
	case hasWait:
		n, err := strconv.Atoi(wait)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%w: %s: wait=%q: want a number of replicas >= 1", ErrBadURL, u.Redacted(), wait)
		}
		d := 500 * time.Millisecond
		if hasTimeout {
			if d, err = time.ParseDuration(timeout); err != nil {
				return nil, fmt.Errorf("%w: %s: wait_timeout=%q: %v", ErrBadURL, u.Redacted(), timeout, err)
			}
		}
		opts = append(opts, redisstore.WithWait(n, d))
	case hasTimeout:
		return nil, fmt.Errorf("%w: %s: wait_timeout without wait", ErrBadURL, u.Redacted())
	}
	return opts, nil
}

func openRedis(ctx context.Context, rawURL string) (keystore.Store, func() error, error) {
	u, err := parseURL(rawURL)
	if err != nil {
		return nil, nil, err
	}
	opts, err := redisOptions(u)
	if err != nil {
		return nil, nil, err
	}
	ropts, err := redis.ParseURL(u.String())
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, nil, fmt.Errorf("%w: %s: %v", ErrBadURL, u.Redacted(), err)
	}
	// Fail fast and leave retrying to the store's callers: one dial per
	// connection attempt (go-redis ≥ 9.2x dials 5 times by default, 100 ms
	// apart, inside each of its command retries), and the call's context
	// bounds socket waits too (redisstore's call timeout, ctx below). Neither
	// can be set in the URL.
	ropts.DialerRetries = 1
	ropts.ContextTimeoutEnabled = true
	client := redis.NewClient(ropts)
	// New checks the options first, then reaches Redis (within its own
	// bound); the Ping after it honours ctx.
	s, err := redisstore.New(client, opts...)
	if err != nil {
		_ = client.Close()
		return nil, nil, badOrUnavailable(u.Redacted(), err)
	}
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		return nil, nil, fmt.Errorf("storeurl: %s: %w: %w", u.Redacted(), keystore.ErrUnavailable, err)
	}
	return s, client.Close, nil
}

// openRedisCluster opens redis+cluster://[user[:pw]@]host:port[,host:port...][/][?query].
func openRedisCluster(_ context.Context, rawURL string) (keystore.Store, func() error, error) {
	scheme, rest, _ := strings.Cut(rawURL, ":")
	if !strings.HasPrefix(rest, "//") {
		return nil, nil, fmt.Errorf("%w: %s: want %s://host:port,host:port/…", ErrBadURL, redact(rawURL), scheme)
	}
	rest = rest[2:]
	authority, tail := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		authority, tail = rest[:i], rest[i:]
	}
	userinfo, hostList := "", authority
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		userinfo, hostList = authority[:at], authority[at+1:]
	}
	// What errors may show: the URL with its password replaced.
	shown := scheme + "://"
	if userinfo != "" {
		user, _, hasPw := strings.Cut(userinfo, ":")
		shown += user
		if hasPw {
			shown += ":xxxxx"
		}
		shown += "@"
	}
	shown += hostList + tail
	path, rawQuery, _ := strings.Cut(tail, "?")
	if path != "" && path != "/" {
		return nil, nil, fmt.Errorf("%w: %s: a Cluster has no database number (path %q)", ErrBadURL, shown, path)
	}
	var hosts []string
	for h := range strings.SplitSeq(hostList, ",") {
		host, port, err := net.SplitHostPort(h)
		if err != nil || host == "" || port == "" {
			return nil, nil, fmt.Errorf("%w: %s: node %q: want host:port", ErrBadURL, shown, h)
		}
		hosts = append(hosts, h)
	}
	u := &url.URL{Scheme: strings.TrimSuffix(strings.ToLower(scheme), "+cluster"), Host: hosts[0], RawQuery: rawQuery}
	if userinfo != "" {
		user, pw, hasPw := strings.Cut(userinfo, ":")
		uu, err := url.PathUnescape(user)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: %s: user: %v", ErrBadURL, shown, err)
		}
		if hasPw {
			p, err := url.PathUnescape(pw)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: %s: password: bad escape", ErrBadURL, shown)
			}
			u.User = url.UserPassword(uu, p)
		} else {
			u.User = url.User(uu)
		}
	}
	opts, err := redisOptions(u)
	if err != nil {
		return nil, nil, fmt.Errorf("%w (in %s)", err, shown)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: query: %v", ErrBadURL, shown, err)
	}
	for _, h := range hosts[1:] {
		q.Add("addr", h)
	}
	u.RawQuery = q.Encode()
	copts, err := redis.ParseClusterURL(u.String())
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, nil, fmt.Errorf("%w: %s: %v", ErrBadURL, shown, err)
	}
	copts.DialerRetries = 1
	copts.ContextTimeoutEnabled = true
	client := redis.NewClusterClient(copts)
	// New reaches the Cluster within its own bound, needing only some of
	// its masters.
	s, err := redisstore.New(client, opts...)
	if err != nil {
		_ = client.Close()
		return nil, nil, badOrUnavailable(shown, err)
	}
	return s, client.Close, nil
}
