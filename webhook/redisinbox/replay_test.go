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
	s, err := New(c, WithPrefix(prefix), AllowVolatile()) // the shared Redis keeps nothing on disk
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
	if code, r := twice("insert", insertScript, "TRANSACTION_PAID", "sale:1", "env", []byte("{}")); code != "inserted" || r.Deliveries != 1 {
		t.Fatalf("insert = %s deliveries %d", code, r.Deliveries)
	}
	if code, r := twice("insert", insertScript, "TRANSACTION_PAID", "sale:1", "env", []byte("{}")); code != "exists" || r.Deliveries != 2 {
		t.Fatalf("duplicate insert = %s deliveries %d", code, r.Deliveries)
	}
	_, r := twice("claim", claimScript, "me", usDur(time.Minute))
	if r.LeaseToken != 1 || r.Attempts != 1 {
		t.Fatalf("claim = token %d attempts %d, want 1 1", r.LeaseToken, r.Attempts)
	}
	tok := strconv.FormatInt(r.LeaseToken, 10)
	twice("renew", renewScript, tok, usDur(2*time.Minute))
	// A hand-back that gives its attempt back gives it back once.
	if code, r := twice("complete", completeScript, tok, "received", "shutdown", "0", "1"); code != "ok" || r.State != webhook.StateReceived || r.Attempts != 0 {
		t.Fatalf("hand-back = %s %s attempts %d, want ok received 0", code, r.State, r.Attempts)
	}
	_, r = twice("claim", claimScript, "me", usDur(time.Minute))
	if r.LeaseToken != 2 || r.Attempts != 1 {
		t.Fatalf("claim after the hand-back = token %d attempts %d, want 2 1", r.LeaseToken, r.Attempts)
	}
	tok = strconv.FormatInt(r.LeaseToken, 10)
	if code, r := twice("complete", completeScript, tok, "processed", "", "0", "0"); code != "ok" || r.State != webhook.StateProcessed {
		t.Fatalf("complete = %s %s", code, r.State)
	}
}
