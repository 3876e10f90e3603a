package redisinbox_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pagpolar/pagpolar-go/webhook"
	"github.com/pagpolar/pagpolar-go/webhook/inboxtest"
	"github.com/pagpolar/pagpolar-go/webhook/redisinbox"
)

// newRedis returns a store under a prefix of its own, whose keys are removed
// at the end; it skips when PAGPOLAR_TEST_REDIS_URL is unset and fails when
// Redis cannot be reached.
func newRedis(t testing.TB) *redisinbox.Store {
	t.Helper()
	url := os.Getenv("PAGPOLAR_TEST_REDIS_URL")
	if url == "" {
		t.Skip("PAGPOLAR_TEST_REDIS_URL is not set: skipping the Redis store")
	}
	o, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(o)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	prefix := "pagpolar-test:webhook:" + hex.EncodeToString(b)
	// The shared test Redis keeps nothing on disk: opted out by name.
	s, err := redisinbox.New(c, redisinbox.WithPrefix(prefix), redisinbox.AllowVolatile(), redisinbox.WithLogger(quietLogger()))
	if err != nil {
		_ = c.Close()
		t.Fatalf("Redis at PAGPOLAR_TEST_REDIS_URL: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		iter := c.Scan(ctx, 0, "{"+prefix+"}:*", 500).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Errorf("cleaning %s: %v", prefix, err)
		}
		_ = c.Close()
	})
	return s
}

func TestRedisConformance(t *testing.T) {
	if os.Getenv("PAGPOLAR_TEST_REDIS_URL") == "" {
		t.Skip("PAGPOLAR_TEST_REDIS_URL is not set: skipping the Redis store")
	}
	inboxtest.Run(t, func(t *testing.T) webhook.Store { return newRedis(t) })
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
