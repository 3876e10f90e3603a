package redisinbox_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pagpolar/pagpolar-go/webhook"
	"github.com/pagpolar/pagpolar-go/webhook/inboxtest"
	"github.com/pagpolar/pagpolar-go/webhook/redisinbox"
)

// TestRedisClusterConformance runs the suite through a ClusterClient on a
// private one-node Cluster holding every slot (with an AOF, so New needs no
// opt-out): scripts that read records they do not name in KEYS (List, Due)
// rely on the one hash tag putting them in the slot of the keys they name.
func TestRedisClusterConformance(t *testing.T) {
	srv := startPrivateRedis(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--appendonly", "yes")
	admin := srv.client(t)
	ctx := context.Background()
	if err := admin.Do(ctx, "cluster", "addslotsrange", 0, 16383).Err(); err != nil {
		t.Fatalf("CLUSTER ADDSLOTSRANGE: %v", err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		info, err := admin.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster not ok after 15 s: %q %v", info, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.addr()}, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	n := 0
	inboxtest.Run(t, func(t *testing.T) webhook.Store {
		n++
		// The server is this test's own: a counter keeps the subtests apart.
		s, err := redisinbox.New(c, redisinbox.WithPrefix(fmt.Sprintf("cluster-test:%d", n)), redisinbox.WithLogger(quietLogger()))
		if err != nil {
			t.Fatalf("New on a Cluster with an AOF: %v", err)
		}
		return s
	})
}
