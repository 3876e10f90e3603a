package storeloc

import (
	"errors"
	"strings"
	"testing"
)

// TestParse_StoreParamsNeverReachTheDriver: the store's own parameters are
// taken out of the URL, the driver's stay as given (a space as %20, never
// '+'), and each form names what it opens.
func TestParse_StoreParamsNeverReachTheDriver(t *testing.T) {
	for _, c := range []struct {
		raw, scheme string
		params      map[string]string
		check       func(Location) string
	}{
		{"sqlite:/tmp/x.db?table=t&busy_timeout=2s", SQLite, map[string]string{"table": "t", "busy_timeout": "2s"},
			func(l Location) string { return l.Path }},
		{"sqlite:///tmp/x.db", SQLite, nil, func(l Location) string { return l.Path }},
		{"postgres://u:pw@h:5432/db?sslmode=disable&async_commit=1&table=t&options=-c%20search_path%3Dshop", Postgres,
			map[string]string{"async_commit": "1", "table": "t"}, func(l Location) string { return l.DSN }},
		{"postgresql://h/db?options=-c+search_path%3Dshop", Postgres, nil, func(l Location) string { return l.DSN }},
		{"redis://h:6379/2?prefix=shop&volatile=1&dial_timeout=1s", Redis, map[string]string{"prefix": "shop", "volatile": "1"},
			func(l Location) string { return l.Redis.Addr }},
		{"redis+cluster://u:pw@h1:7000,h2:7001/?prefix=shop&wait=1", Cluster, map[string]string{"prefix": "shop", "wait": "1"},
			func(l Location) string { return strings.Join(l.Cluster.Addrs, ",") }},
		{"memory:", Memory, nil, func(Location) string { return "" }},
	} {
		l, err := Parse(c.raw)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.raw, err)
			continue
		}
		if l.Scheme != c.scheme || strings.Contains(l.Name, "pw") {
			t.Errorf("Parse(%q): scheme %q name %q", c.raw, l.Scheme, l.Name)
		}
		for k, v := range c.params {
			if got, ok := l.Param(k); !ok || got != v {
				t.Errorf("Parse(%q): %s=%q, want %q", c.raw, k, got, v)
			}
		}
		got := c.check(l)
		switch c.scheme {
		case Postgres:
			if strings.Contains(got, "async_commit") || strings.Contains(got, "table=") || strings.Contains(got, "+") || !strings.Contains(got, "options=-c%20search_path%3Dshop") {
				t.Errorf("Parse(%q): DSN %q", c.raw, got)
			}
		case SQLite:
			if got != "/tmp/x.db" {
				t.Errorf("Parse(%q): path %q", c.raw, got)
			}
		case Redis:
			if got != "h:6379" || l.Redis.DB != 2 || !l.Redis.ContextTimeoutEnabled || l.Redis.DialerRetries != 1 {
				t.Errorf("Parse(%q): %+v", c.raw, l.Redis)
			}
		case Cluster:
			if got != "h1:7000,h2:7001" || l.Cluster.Password != "pw" {
				t.Errorf("Parse(%q): nodes %q", c.raw, got)
			}
		}
	}
	for _, raw := range []string{"", "x", "ftp://h", "memory:x", "sqlite:", "sqlite://h/x", "sqlite:x?colour=1", "redis://h/0?bogus=1", "redis+cluster://h/", "redis+cluster://h:1/3"} {
		if _, err := Parse(raw); !errors.Is(err, ErrBadURL) {
			t.Errorf("Parse(%q): %v, want ErrBadURL", raw, err)
		}
	}
}
