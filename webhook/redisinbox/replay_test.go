package redisinbox

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pagpolar/pagpolar-go/webhook"
)

// TestResentScriptAppliesOnce runs each write script twice with one nonce,
// as go-redis does when a reply is lost: the second run must return the
// first result and change nothing.
func TestResentScriptAppliesOnce(t *testing.T) {
	url := os.Getenv("PAGPOLAR_TEST_REDIS_URL")
	if url == "" {
		t.Skip("PAGPOLAR_TEST_REDIS_URL is not set: skipping the Redis store")
	}
	o, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(o)
	defer c.Close()
	prefix := "pagpolar-test:webhook:replay:" + nonce()
	s, err := New(c, WithPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	defer func() {
		keys, _ := c.Keys(ctx, "{"+prefix+"}:*").Result()
		if len(keys) > 0 {
			c.Del(ctx, keys...)
		}
	}()
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	twice := func(name string, sc *redis.Script, args ...any) (string, webhook.Record) {
		t.Helper()
		n := nonce()
		c1, r1, err := s.runNonce(ctx, n, name, sc, "k", args...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		c2, r2, err := s.runNonce(ctx, n, name, sc, "k", args...)
		if err != nil {
			t.Fatalf("%s resent: %v", name, err)
		}
		if c1 != c2 || r1.Attempts != r2.Attempts || r1.LeaseToken != r2.LeaseToken || r1.Deliveries != r2.Deliveries || r1.State != r2.State {
			t.Fatalf("%s resent: %s %+v, first %s %+v", name, c2, r2, c1, r1)
		}
		return c1, r1
	}
	if code, r := twice("insert", insertScript, us(now), "TRANSACTION_PAID", "sale:1", "env", []byte("{}")); code != "inserted" || r.Deliveries != 1 {
		t.Fatalf("insert = %s deliveries %d", code, r.Deliveries)
	}
	if code, r := twice("insert", insertScript, us(now), "TRANSACTION_PAID", "sale:1", "env", []byte("{}")); code != "exists" || r.Deliveries != 2 {
		t.Fatalf("duplicate insert = %s deliveries %d", code, r.Deliveries)
	}
	_, r := twice("claim", claimScript, us(now), "me", us(now.Add(time.Minute)))
	if r.LeaseToken != 1 || r.Attempts != 1 {
		t.Fatalf("claim = token %d attempts %d, want 1 1", r.LeaseToken, r.Attempts)
	}
	tok := strconv.FormatInt(r.LeaseToken, 10)
	twice("renew", renewScript, us(now), tok, us(now.Add(2*time.Minute)))
	if code, r := twice("complete", completeScript, us(now), tok, "processed", "", "0"); code != "ok" || r.State != webhook.StateProcessed {
		t.Fatalf("complete = %s %s", code, r.State)
	}
}
