package redisstore

import (
	"context"
	"testing"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/storetest"
)

// TestClusterConformance runs the store's conformance suite through a
// ClusterClient on the CI's 3-master Cluster (AOF on: no opt-out), each
// subtest under a prefix of its own.
func TestClusterConformance(t *testing.T) {
	c := clusterClient(t, sharedCluster(t))
	storetest.Run(t, func(t *testing.T) keystore.Store {
		s, err := New(c, WithPrefix(clusterPrefix(t, c)), WithLogger(quietLogger()))
		if err != nil {
			t.Fatalf("New on the Cluster: %v", err)
		}
		return s
	})
}

// TestClusterAmnesia runs the amnesia suite on the CI's Cluster: Wipe
// deletes every key of the prefix on every master (the Cluster is shared,
// so nothing is flushed), Lose deletes single records, Reopen is a Store
// on another ClusterClient.
func TestClusterAmnesia(t *testing.T) {
	addrs := sharedCluster(t)
	c := clusterClient(t, addrs)
	storetest.RunAmnesia(t, func(t *testing.T) storetest.AmnesiaBackend {
		prefix := clusterPrefix(t, c)
		open := func(t *testing.T) *Store {
			s, err := New(clusterClient(t, addrs), WithPrefix(prefix), WithLogger(quietLogger()))
			if err != nil {
				t.Fatalf("New on the Cluster: %v", err)
			}
			return s
		}
		s := open(t)
		return storetest.AmnesiaBackend{
			Store:  s,
			Wipe:   func(t *testing.T) { deleteClusterPrefix(t, c, prefix) },
			Lose:   func(t *testing.T, ids ...string) { loseRecords(t, c, s, ids...) },
			Reopen: func(t *testing.T) keystore.Store { return open(t) },
		}
	})
}

// TestClusterShardsSpreadOverMasters: with the prefix in the hash tag, the
// shards of one store, and of two stores, fall on several masters.
func TestClusterShardsSpreadOverMasters(t *testing.T) {
	c := clusterClient(t, sharedCluster(t))
	ctx := context.Background()
	masters := map[string]int{}
	slots := map[int64]bool{}
	for _, prefix := range []string{clusterPrefix(t, c), clusterPrefix(t, c)} {
		s, err := New(c, WithPrefix(prefix), WithLogger(quietLogger()))
		if err != nil {
			t.Fatal(err)
		}
		for shard := range s.cfg.shards {
			key := s.markKey(shard)
			masters[masterOf(t, c, key)]++
			slot, err := c.ClusterKeySlot(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			slots[slot] = true
		}
	}
	t.Logf("32 shards of two prefixes: %d distinct slots, masters %v", len(slots), masters)
	if len(masters) < 2 || len(slots) < 30 {
		t.Fatalf("shards of two prefixes on %d masters and %d slots; want them spread", len(masters), len(slots))
	}
}
