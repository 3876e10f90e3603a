package redisstore

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterEnv names the Redis Cluster CI starts for the tests (.ci/run):
// host:port of its nodes, comma separated.
const clusterEnv = "PAGPOLAR_TEST_REDIS_CLUSTER"

// sharedCluster returns the nodes of the CI's Cluster, skipping the test
// when the variable is unset. Tests never kill, migrate or flush it: those
// start their own (startCluster).
func sharedCluster(t testing.TB) []string {
	t.Helper()
	v := os.Getenv(clusterEnv)
	if v == "" {
		t.Skipf("%s is not set: skipping tests against a Redis Cluster (e.g. %s=127.0.0.1:7000,127.0.0.1:7001,...; .ci/run starts one)", clusterEnv, clusterEnv)
	}
	return strings.Split(v, ",")
}

// clusterClient connects to a Cluster as keystore/storeurl does (fail
// fast, the call's deadline bounds socket waits), and fails the test if no
// node answers.
func clusterClient(t testing.TB, addrs []string) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, DialerRetries: 1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return n.Ping(ctx).Err() }); err != nil {
		t.Fatalf("Redis Cluster at %v is unreachable: %v", addrs, err)
	}
	return c
}

// clusterPrefix returns a prefix nobody else uses on the Cluster and
// deletes its keys, master by master and one key at a time (keys of
// several slots cannot go in one DEL), when the test ends.
func clusterPrefix(t testing.TB, c *redis.ClusterClient) string {
	t.Helper()
	prefix := "pagpolartest-" + randomHex(t, 6)
	t.Cleanup(func() { deleteClusterPrefix(t, c, prefix) })
	return prefix
}

func deleteClusterPrefix(t testing.TB, c *redis.ClusterClient, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		iter := n.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		for iter.Next(ctx) {
			if err := n.Unlink(ctx, iter.Val()).Err(); err != nil && !strings.HasPrefix(err.Error(), "MOVED") {
				return err
			}
		}
		return iter.Err()
	})
	if err != nil {
		t.Errorf("clean-up of %s:* on the Cluster: %v", prefix, err)
	}
}

// privateCluster is a Redis Cluster of this test's own, on loopback.
type privateCluster struct {
	t     *testing.T
	bin   string
	mu    sync.Mutex
	nodes []*clusterNode
}

type clusterNode struct {
	addr string
	args []string
	cmd  *exec.Cmd
}

// freeClusterPort returns a loopback port p such that p and its cluster bus
// port p+10000 are both free.
func freeClusterPort(t *testing.T) int {
	t.Helper()
	for range 200 {
		p := 20000 + rand.IntN(20000)
		a, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		b, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000))
		a.Close()
		if err != nil {
			continue
		}
		b.Close()
		return p
	}
	t.Fatal("no free port pair for a Cluster node")
	return 0
}

// startCluster starts masters masters with replicas replicas each (AOF on,
// cluster-node-timeout 1 s so that a failover takes about 2 s) and waits
// until every node sees the whole Cluster ok and every replica is in sync.
// Everything is stopped when the test ends.
func startCluster(t *testing.T, masters, replicas int) *privateCluster {
	t.Helper()
	redisOptions(t) // the same switch as every other test against Redis
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not on PATH: skipping a test that needs a private Redis Cluster")
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli is not on PATH: skipping a test that needs a private Redis Cluster")
	}
	pc := &privateCluster{t: t, bin: bin}
	var addrs []string
	for range masters * (1 + replicas) {
		port := freeClusterPort(t)
		dir := t.TempDir()
		n := &clusterNode{addr: "127.0.0.1:" + strconv.Itoa(port), args: []string{
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
			"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--cluster-node-timeout", "1000", "--appendonly", "yes", "--save", "",
			"--repl-diskless-sync-delay", "0", "--cluster-replica-validity-factor", "0",
			"--cluster-require-full-coverage", "no",
		}}
		pc.nodes = append(pc.nodes, n)
		pc.start(n)
		addrs = append(addrs, n.addr)
	}
	t.Cleanup(pc.stopAll)
	for _, n := range pc.nodes {
		c := redis.NewClient(&redis.Options{Addr: n.addr})
		waitFor(t, "cluster node "+n.addr+" to answer", func() bool { return c.Ping(context.Background()).Err() == nil })
		c.Close()
	}
	var out bytes.Buffer
	create := exec.Command(cli, append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")...)
	create.Stdout, create.Stderr = &out, &out
	if err := create.Run(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out.String())
	}
	pc.waitHealthy()
	return pc
}

func (pc *privateCluster) start(n *clusterNode) {
	pc.t.Helper()
	cmd := exec.Command(pc.bin, n.args...)
	if err := cmd.Start(); err != nil {
		pc.t.Fatal(err)
	}
	pc.mu.Lock()
	n.cmd = cmd
	pc.mu.Unlock()
}

func (pc *privateCluster) stopAll() {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	for _, n := range pc.nodes {
		if n.cmd != nil {
			n.cmd.Process.Kill()
			n.cmd.Wait()
			n.cmd = nil
		}
	}
}

func (pc *privateCluster) addrs() []string {
	var out []string
	for _, n := range pc.nodes {
		out = append(out, n.addr)
	}
	return out
}

func (pc *privateCluster) node(addr string) *clusterNode {
	for _, n := range pc.nodes {
		if n.addr == addr {
			return n
		}
	}
	pc.t.Fatalf("no node %s", addr)
	return nil
}

// kill SIGKILLs a node.
func (pc *privateCluster) kill(addr string) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	n := pc.node(addr)
	if n.cmd != nil {
		n.cmd.Process.Kill()
		n.cmd.Wait()
		n.cmd = nil
	}
}

// restart starts a killed node again with its data directory (it rejoins
// as a replica if its slots were failed over meanwhile).
func (pc *privateCluster) restart(addr string) { pc.start(pc.node(addr)) }

// info returns the cluster view of one node: its CLUSTER INFO state, and
// for every node it knows, whether it is a master and whether it is failed.
func nodeClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, DialerRetries: 1, ContextTimeoutEnabled: true, MaxRetries: -1})
}

// waitHealthy waits until every running node reports cluster_state:ok and
// every running replica's link to its master is up.
func (pc *privateCluster) waitHealthy() {
	pc.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		bad := ""
		pc.mu.Lock()
		var running []string
		for _, n := range pc.nodes {
			if n.cmd != nil {
				running = append(running, n.addr)
			}
		}
		pc.mu.Unlock()
		for _, a := range running {
			c := nodeClient(a)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			info, err := c.ClusterInfo(ctx).Result()
			repl, rerr := c.Info(ctx, "replication").Result()
			cancel()
			c.Close()
			switch {
			case err != nil || rerr != nil:
				bad = fmt.Sprintf("%s: %v %v", a, err, rerr)
			case !strings.Contains(info, "cluster_state:ok"):
				bad = a + ": cluster_state not ok"
			case strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up"):
				bad = a + ": replica not in sync"
			}
			if bad != "" {
				break
			}
		}
		if bad == "" {
			return
		}
		if time.Now().After(deadline) {
			pc.t.Fatalf("Cluster not healthy after 30 s: %s", bad)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// masterOf returns the address of the master serving key, as the given
// node sees it.
func masterOf(t *testing.T, c *redis.ClusterClient, key string) string {
	t.Helper()
	n, err := c.MasterForKey(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return n.Options().Addr
}
