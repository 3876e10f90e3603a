package redisstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pagpolar/pagpolar-go/webhook"
	"github.com/pagpolar/pagpolar-go/webhook/inboxtest"
	"github.com/pagpolar/pagpolar-go/webhook/redisinbox"
)

// TestInboxConformanceOnCluster runs the webhook inbox's conformance suite
// (webhook/inboxtest, through webhook/redisinbox) on the CI's 3-master
// Redis Cluster, beside the key store's own Cluster tests: each inbox
// lives under one hash tag, so on one master, and the suite must hold
// there as on a single node. It lives here because webhook/ belongs to
// another part of the project; it only uses their public API.
func TestInboxConformanceOnCluster(t *testing.T) {
	v := os.Getenv("PAGPOLAR_TEST_REDIS_CLUSTER")
	if v == "" {
		t.Skip("PAGPOLAR_TEST_REDIS_CLUSTER is not set (e.g. 127.0.0.1:7000,127.0.0.1:7001,...; .ci/run starts one): skipping")
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(v, ","), DialerRetries: 1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	inboxtest.Run(t, func(t *testing.T) webhook.Store {
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		prefix := "pagpolar-test:webhook:" + hex.EncodeToString(b)
		s, err := redisinbox.New(c, redisinbox.WithPrefix(prefix), redisinbox.WithLogger(quiet))
		if err != nil {
			t.Fatalf("redisinbox.New on the Cluster (AOF on: no opt-out): %v", err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			n, err := c.MasterForKey(ctx, "{"+prefix+"}")
			if err != nil {
				t.Errorf("cleaning %s: %v", prefix, err)
				return
			}
			iter := n.Scan(ctx, 0, "{"+prefix+"}:*", 500).Iterator()
			for iter.Next(ctx) {
				n.Del(ctx, iter.Val())
			}
			if err := iter.Err(); err != nil {
				t.Errorf("cleaning %s: %v", prefix, err)
			}
		})
		return s
	})
}
