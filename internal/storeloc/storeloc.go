package storeloc

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ErrBadURL is wrapped by every error about the URL itself.
var ErrBadURL = errors.New("storeurl: bad store URL")

// Forms lists the accepted URL forms, for usage messages.
const Forms = "memory:, sqlite:PATH, postgres://…, postgresql://…, redis://…, rediss://…, redis+cluster://h1:p,h2:p/…, rediss+cluster://…"

// Schemes, as Location.Scheme holds them.
const (
	Memory   = "memory"
	SQLite   = "sqlite"
	Postgres = "postgres"
	Redis    = "redis"   // redis:// and rediss://: one node
	Cluster  = "cluster" // redis+cluster:// and rediss+cluster://
)

// The store's own parameters, by scheme; the rest of a query goes to the
// driver (SQLite has no driver parameters: anything else is refused).
var ownParams = map[string][]string{
	SQLite:   {"table", "busy_timeout", "declared_new"},
	Postgres: {"table", "async_commit", "declared_new"},
	Redis:    {"prefix", "volatile", "wait", "wait_timeout", "declared_new"},
	Cluster:  {"prefix", "volatile", "wait", "wait_timeout", "declared_new"},
}

// Location is what a store URL names.
type Location struct {
	Scheme  string                // Memory, SQLite, Postgres, Redis or Cluster
	Name    string                // the URL for messages: its password replaced
	Path    string                // SQLite: the file
	DSN     string                // Postgres: the pgx DSN, without the store's parameters
	Redis   *redis.Options        // Redis: the client's options (fail-fast set)
	Cluster *redis.ClusterOptions // Cluster: the client's options (fail-fast set)

	params map[string]string
}

// Param returns the store parameter key of the URL (the last one given).
func (l Location) Param(key string) (string, bool) {
	v, ok := l.params[key]
	return v, ok
}

// Bool returns a boolean store parameter (1, true, yes...; strconv.ParseBool);
// absent is false.
func (l Location) Bool(key string) (bool, error) {
	v, ok := l.params[key]
	if !ok {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%w: %s: %s=%q: want 1 or 0 (true or false)", ErrBadURL, l.Name, key, v)
	}
	return b, nil
}

// Reject fails when the URL sets one of keys: parameters a store of this
// scheme understands that the caller's store does not.
func (l Location) Reject(what string, keys ...string) error {
	for _, k := range keys {
		if _, ok := l.params[k]; ok {
			return fmt.Errorf("%w: %s: %s takes no %s= parameter", ErrBadURL, l.Name, what, k)
		}
	}
	return nil
}

// Redact returns rawURL with any password replaced, for messages. A string
// that does not parse as a URL is cut at its userinfo.
func Redact(rawURL string) string {
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

// Parse reads rawURL. Its errors wrap ErrBadURL and never show a password.
func Parse(rawURL string) (Location, error) {
	scheme, rest, ok := strings.Cut(rawURL, ":")
	if !ok || scheme == "" {
		return Location{}, fmt.Errorf("%w: %q has no scheme; want one of %s", ErrBadURL, Redact(rawURL), Forms)
	}
	switch strings.ToLower(scheme) {
	case "memory":
		if rest != "" && rest != "//" {
			return Location{}, fmt.Errorf("%w: memory: takes nothing after the colon, got %q", ErrBadURL, rest)
		}
		return Location{Scheme: Memory, Name: "memory:"}, nil
	case "sqlite":
		return parseSQLite(rest)
	case "postgres", "postgresql":
		return parsePostgres(rawURL)
	case "redis", "rediss":
		return parseRedis(rawURL)
	case "redis+cluster", "rediss+cluster":
		return parseCluster(rawURL)
	}
	return Location{}, fmt.Errorf("%w: unknown scheme %q; want one of %s", ErrBadURL, scheme, Forms)
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
		return nil, fmt.Errorf("%w: %s: %v", ErrBadURL, Redact(rawURL), err)
	}
	return u, nil
}

// takeParams removes the store's own parameters from u's query and returns
// them. The query is parsed strictly: url.URL.Query would silently drop a
// malformed pair (e.g. one with a semicolon), and with it a setting the user
// asked for. The rest of the query is written back with spaces as %20, not
// '+': pgx reads a '+' in its DSN's query as a plus sign
// (options=-c%20name%3Dvalue); Encode writes a literal '+' as %2B, so every
// '+' it writes is a space.
func takeParams(u *url.URL, name string, keys []string) (map[string]string, error) {
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: query: %v", ErrBadURL, name, err)
	}
	params := map[string]string{}
	for _, k := range keys {
		if vals, ok := q[k]; ok {
			params[k] = vals[len(vals)-1]
			q.Del(k)
		}
	}
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	return params, nil
}

func parseSQLite(rest string) (Location, error) {
	pathPart, rawQuery, _ := strings.Cut(rest, "?")
	if strings.HasPrefix(pathPart, "//") {
		// URL form: sqlite:///abs/path; a host makes no sense for a file.
		if !strings.HasPrefix(pathPart, "///") {
			return Location{}, fmt.Errorf("%w: sqlite:%s: a host is not allowed; use sqlite:PATH or sqlite:///ABS/PATH", ErrBadURL, pathPart)
		}
		pathPart = pathPart[2:]
	}
	path, err := url.PathUnescape(pathPart)
	if err != nil {
		return Location{}, fmt.Errorf("%w: sqlite path %q: %v", ErrBadURL, pathPart, err)
	}
	if path == "" {
		return Location{}, fmt.Errorf("%w: sqlite: needs a file path, e.g. sqlite:/var/lib/shop/pagpolar.db", ErrBadURL)
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return Location{}, fmt.Errorf("%w: sqlite query %q: %v", ErrBadURL, rawQuery, err)
	}
	l := Location{Scheme: SQLite, Name: "sqlite:" + path, Path: path, params: map[string]string{}}
	for key, vals := range q {
		if !contains(ownParams[SQLite], key) {
			return Location{}, fmt.Errorf("%w: sqlite: unknown parameter %q (known: table, busy_timeout, declared_new)", ErrBadURL, key)
		}
		l.params[key] = vals[len(vals)-1]
	}
	return l, nil
}

func parsePostgres(rawURL string) (Location, error) {
	u, err := parseURL(rawURL)
	if err != nil {
		return Location{}, err
	}
	params, err := takeParams(u, u.Redacted(), ownParams[Postgres])
	if err != nil {
		return Location{}, err
	}
	return Location{Scheme: Postgres, Name: u.Redacted(), DSN: u.String(), params: params}, nil
}

func parseRedis(rawURL string) (Location, error) {
	u, err := parseURL(rawURL)
	if err != nil {
		return Location{}, err
	}
	name := u.Redacted()
	params, err := takeParams(u, name, ownParams[Redis])
	if err != nil {
		return Location{}, err
	}
	opts, err := redis.ParseURL(u.String())
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return Location{}, fmt.Errorf("%w: %s: %v", ErrBadURL, name, err)
	}
	// Fail fast and leave retrying to the store's callers: one dial per
	// connection attempt (go-redis ≥ 9.2x dials 5 times by default, 100 ms
	// apart, inside each of its command retries), and the call's context
	// bounds socket waits too. Neither can be set in the URL.
	opts.DialerRetries = 1
	opts.ContextTimeoutEnabled = true
	return Location{Scheme: Redis, Name: name, Redis: opts, params: params}, nil
}

// parseCluster reads redis+cluster://[user[:pw]@]host:port[,host:port...][/][?query].
func parseCluster(rawURL string) (Location, error) {
	scheme, rest, _ := strings.Cut(rawURL, ":")
	if !strings.HasPrefix(rest, "//") {
		return Location{}, fmt.Errorf("%w: %s: want %s://host:port,host:port/…", ErrBadURL, Redact(rawURL), scheme)
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
		return Location{}, fmt.Errorf("%w: %s: a Cluster has no database number (path %q)", ErrBadURL, shown, path)
	}
	var hosts []string
	for h := range strings.SplitSeq(hostList, ",") {
		host, port, err := net.SplitHostPort(h)
		if err != nil || host == "" || port == "" {
			return Location{}, fmt.Errorf("%w: %s: node %q: want host:port", ErrBadURL, shown, h)
		}
		hosts = append(hosts, h)
	}
	u := &url.URL{Scheme: strings.TrimSuffix(strings.ToLower(scheme), "+cluster"), Host: hosts[0], RawQuery: rawQuery}
	if userinfo != "" {
		user, pw, hasPw := strings.Cut(userinfo, ":")
		uu, err := url.PathUnescape(user)
		if err != nil {
			return Location{}, fmt.Errorf("%w: %s: user: %v", ErrBadURL, shown, err)
		}
		if hasPw {
			p, err := url.PathUnescape(pw)
			if err != nil {
				return Location{}, fmt.Errorf("%w: %s: password: bad escape", ErrBadURL, shown)
			}
			u.User = url.UserPassword(uu, p)
		} else {
			u.User = url.User(uu)
		}
	}
	params, err := takeParams(u, shown, ownParams[Cluster])
	if err != nil {
		return Location{}, err
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Location{}, fmt.Errorf("%w: %s: query: %v", ErrBadURL, shown, err)
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
		return Location{}, fmt.Errorf("%w: %s: %v", ErrBadURL, shown, err)
	}
	copts.DialerRetries = 1
	copts.ContextTimeoutEnabled = true
	return Location{Scheme: Cluster, Name: shown, Cluster: copts, params: params}, nil
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// Client returns a new client for a Redis or Cluster location (nil for
// other schemes). The caller closes it.
func (l Location) Client() redis.UniversalClient {
	switch l.Scheme {
	case Redis:
		return redis.NewClient(l.Redis)
	case Cluster:
		return redis.NewClusterClient(l.Cluster)
	}
	return nil
}
