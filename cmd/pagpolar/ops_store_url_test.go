package main

import "testing"

// The redisstore parameters storeurl understands (volatile, wait,
// wait_timeout) are not go-redis options: ops must not hand them to
// redis.ParseURL, or `pagpolar ops reap -store redis://...?volatile=1`
// fails before it starts.
func TestLocateRedisStoreParams(t *testing.T) {
	for _, raw := range []string{
		"redis://127.0.0.1:6379/0?prefix=shop&volatile=1",
		"redis://127.0.0.1:6379/0?wait=1&wait_timeout=200ms",
	} {
		loc, err := locateStore(raw)
		if err != nil {
			t.Errorf("locateStore(%q): %v", raw, err)
			continue
		}
		if loc.scheme != "redis" || loc.redis == nil || loc.redis.Addr != "127.0.0.1:6379" {
			t.Errorf("locateStore(%q) = %+v", raw, loc)
		}
	}
	if loc, err := locateStore("redis://127.0.0.1:6379/0?prefix=shop&volatile=1"); err == nil && loc.prefix != "shop" {
		t.Errorf("prefix %q, want shop", loc.prefix)
	}
	if _, err := locateStore("redis://127.0.0.1:6379/0?nonsense=1"); err == nil {
		t.Error("an unknown option was accepted")
	}
}
