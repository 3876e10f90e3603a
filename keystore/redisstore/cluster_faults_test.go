package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/internal/longtest"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// privateClusterClient connects to a private Cluster as storeurl does.
func privateClusterClient(t *testing.T, pc *privateCluster) *redis.ClusterClient {
	t.Helper()
	return clusterClient(t, pc.addrs())
}

// nodeID returns a node's Cluster ID.
func nodeID(t *testing.T, addr string) string {
	t.Helper()
	c := nodeClient(addr)
	defer c.Close()
	id, err := c.Do(context.Background(), "cluster", "myid").Text()
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// migrateSlot moves slot from src to dst the way redis-cli --cluster
// reshard does (IMPORTING/MIGRATING, MIGRATE in batches, SETSLOT NODE),
// pausing between batches so that the slot stays in migration for a while
// under load. It returns how long the slot was in migration.
func migrateSlot(t *testing.T, pc *privateCluster, slot int64, src, dst string, batch int, pause time.Duration) time.Duration {
	t.Helper()
	ctx := context.Background()
	s, d := nodeClient(src), nodeClient(dst)
	defer s.Close()
	defer d.Close()
	srcID, dstID := nodeID(t, src), nodeID(t, dst)
	start := time.Now()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(d.Do(ctx, "cluster", "setslot", slot, "importing", srcID).Err())
	must(s.Do(ctx, "cluster", "setslot", slot, "migrating", dstID).Err())
	host, port, _ := net.SplitHostPort(dst)
	for {
		keys, err := s.ClusterGetKeysInSlot(ctx, int(slot), batch).Result()
		must(err)
		if len(keys) == 0 {
			break
		}
		args := []any{"migrate", host, port, "", 0, 5000, "keys"}
		for _, k := range keys {
			args = append(args, k)
		}
		must(s.Do(ctx, args...).Err())
		time.Sleep(pause) // real time: the slot stays in migration under load
	}
	for _, a := range pc.addrs() {
		c := nodeClient(a)
		role, err := c.Do(ctx, "role").Slice()
		if err == nil && len(role) > 0 && role[0] == "master" {
			must(c.Do(ctx, "cluster", "setslot", slot, "node", dstID).Err())
		}
		c.Close()
	}
	return time.Since(start)
}

// TestClusterSlotMigrationUnderLoad moves the slot of one shard to another
// master while writers create and update records in every shard. Calls
// that meet the moving slot fail as unavailable (nothing lost, nothing
// written twice); the other shards are not affected; afterwards every
// acknowledged record is there, List finds each once, and the moved shard
// takes writes on its new master without any amnesia.
func TestClusterSlotMigrationUnderLoad(t *testing.T) {
	pc := startCluster(t, 3, 0)
	c := privateClusterClient(t, pc)
	ctx := context.Background()
	s, err := New(c, WithPrefix("mig"), WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	moving := s.shardOf("target")
	slot, err := c.ClusterKeySlot(ctx, s.markKey(moving)).Result()
	if err != nil {
		t.Fatal(err)
	}
	src := masterOf(t, c, s.markKey(moving))
	var dst string
	for _, a := range pc.addrs() {
		if a != src {
			dst = a
			break
		}
	}
	// Some data in the slot before it moves.
	for i := range 300 {
		if _, err := s.Create(ctx, keystore.Record{OperationID: fmt.Sprintf("pre/%d", i)}, "w", time.Minute); err != nil {
			t.Fatal(err)
		}
	}

	type tally struct{ ok, unavailable, other atomic.Int64 }
	var inMoving, elsewhere tally
	var acked sync.Map
	var otherErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("load/%d/%d", w, i)
				tl := &elsewhere
				if s.shardOf(id) == moving {
					tl = &inMoving
				}
				rec, err := s.Create(ctx, keystore.Record{OperationID: id}, "w", time.Minute)
				if err == nil {
					acked.Store(id, true)
					rec.State = keystore.StateUnknown
					_, err = s.Update(ctx, rec)
				}
				switch {
				case err == nil:
					tl.ok.Add(1)
				case errors.Is(err, keystore.ErrUnavailable) && !errors.Is(err, keystore.ErrAmnesia):
					tl.unavailable.Add(1)
				default:
					tl.other.Add(1)
					otherErr.Store(err)
				}
			}
		})
	}
	time.Sleep(300 * time.Millisecond) // load under way (real time)
	took := migrateSlot(t, pc, slot, src, dst, 5, 40*time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	t.Logf("slot %d (shard %d) moved %s → %s in %v under load", slot, moving, src, dst, took.Round(time.Millisecond))
	t.Logf("calls in the moving shard: %d ok, %d unavailable, %d other", inMoving.ok.Load(), inMoving.unavailable.Load(), inMoving.other.Load())
	t.Logf("calls in the other 15 shards: %d ok, %d unavailable, %d other", elsewhere.ok.Load(), elsewhere.unavailable.Load(), elsewhere.other.Load())
	if n := inMoving.other.Load() + elsewhere.other.Load(); n > 0 {
		t.Fatalf("%d calls failed with an error other than unavailable, e.g. %v", n, otherErr.Load())
	}
	if elsewhere.unavailable.Load() > 0 {
		t.Fatalf("%d calls in other shards failed while one slot moved", elsewhere.unavailable.Load())
	}
	if inMoving.ok.Load() == 0 || elsewhere.ok.Load() == 0 {
		t.Fatal("no call succeeded: the load did not run")
	}
	if got := masterOf(t, c, s.markKey(moving)); got != dst {
		t.Fatalf("the shard's master is %s after the migration, want %s", got, dst)
	}
	// Every acknowledged record is there, and listed once.
	var ids []string
	acked.Range(func(k, _ any) bool { ids = append(ids, k.(string)); return true })
	for _, id := range ids {
		if _, err := s.Get(ctx, id); err != nil {
			t.Fatalf("acknowledged record %s after the migration: %v", id, err)
		}
	}
	listed, err := s.List(ctx, keystore.Filter{Prefix: "load/", Limit: len(ids) + 100})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range listed {
		seen[r.OperationID]++
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Fatalf("List shows %s %d times after the migration, want once", id, seen[id])
		}
	}
	// The moved shard takes writes on its new master, its marker intact.
	var target string
	for i := 0; target == ""; i++ {
		if id := fmt.Sprintf("after/%d", i); s.shardOf(id) == moving {
			target = id
		}
	}
	if _, err := s.Create(ctx, keystore.Record{OperationID: target}, "w", time.Minute); err != nil {
		t.Fatalf("Create in the moved shard: %v", err)
	}
	if r, err := s.Amnesia(ctx); err != nil || r.Detected() {
		t.Fatalf("Amnesia after the migration: %+v, %v", r.Lost, err)
	}
	t.Logf("%d acknowledged records checked, each listed once", len(ids))
}

// ackStore records the operations whose Create returned nil.
type ackStore struct {
	keystore.Store
	acked sync.Map
}

func (a *ackStore) Create(ctx context.Context, r keystore.Record, owner string, ttl time.Duration) (keystore.Record, error) {
	got, err := a.Store.Create(ctx, r, owner, ttl)
	if err == nil {
		a.acked.Store(r.OperationID, true)
	}
	return got, err
}

// TestClusterMasterKillWithWait kills a master of a 3+3 Cluster while the
// SDK charges through a Store with WithWait(1): charges on the other
// masters' shards go on, those of the dead master's shards fail closed
// (nothing sent) until its replica is promoted and, with WAIT needing a
// replica, until the killed node is back as that replica's replica. No
// acknowledged write is lost and no order is charged twice. It also shows
// New starting while the master is down.
func TestClusterMasterKillWithWait(t *testing.T) {
	longtest.Skip(t)
	pc := startCluster(t, 3, 1)
	c := privateClusterClient(t, pc)
	ctx := context.Background()
	base, err := New(c, WithPrefix("kill"), WithWait(1, 500*time.Millisecond), WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	store := &ackStore{Store: base}
	srv := pagpolartest.NewServer(t, pagpolartest.WithProcessingWindow(time.Second))
	client, err := pagpolar.NewClient(srv.CredentialID, pagpolar.StaticToken(srv.Token),
		pagpolar.WithBaseURL(srv.URL), pagpolar.WithStore(store),
		pagpolar.WithRetryPolicy(pagpolar.RetryPolicy{ProcessingWindow: time.Second, WindowMargin: 200 * time.Millisecond,
			SettleDelay: 200 * time.Millisecond, LookupInterval: 50 * time.Millisecond, AttemptTimeout: 2 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	// The victim: the master of shard 0.
	victim := masterOf(t, c, base.markKey(0))
	var onVictim int
	for shard := range base.cfg.shards {
		if masterOf(t, c, base.markKey(shard)) == victim {
			onVictim++
		}
	}

	const (
		run      = 16 * time.Second
		killAt   = 4 * time.Second
		returnAt = 9 * time.Second
		bucket   = 500 * time.Millisecond
	)
	start := time.Now()
	var mu sync.Mutex
	done := make([]int, int(run/bucket)+1)
	refused := make([]int, int(run/bucket)+1)
	var orders atomic.Int64
	// An order refused (the store unavailable: nothing sent) goes back to
	// a retry queue, as an order system's retry job would, and is tried
	// again 200 ms later with the same reference; meanwhile the worker
	// takes other orders.
	type retry struct {
		ref string
		due time.Time
	}
	var queue []retry
	next := 0
	charge := func(ref string) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := client.Payments.Pix(cctx, pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: ref, Customer: pagpolar.Customer{Name: "Ana Souza", Email: "ana@example.com", Document: "529.982.247-25"}})
		cancel()
		b := int(time.Since(start) / bucket)
		mu.Lock()
		defer mu.Unlock()
		if b < len(done) {
			if err == nil {
				done[b]++
			} else {
				refused[b]++
			}
		}
		if err != nil {
			queue = append(queue, retry{ref: ref, due: time.Now().Add(200 * time.Millisecond)})
		} else {
			orders.Add(1)
		}
	}
	var wg sync.WaitGroup
	// 12 checkout workers take new orders; 4 retry workers take the
	// refused ones again once due.
	for range 12 {
		wg.Go(func() {
			for time.Since(start) < run {
				mu.Lock()
				next++
				ref := fmt.Sprintf("kill-%d", next)
				mu.Unlock()
				charge(ref)
			}
		})
	}
	for range 4 {
		wg.Go(func() {
			for time.Since(start) < run+10*time.Second {
				mu.Lock()
				var ref string
				if len(queue) > 0 && time.Now().After(queue[0].due) {
					ref, queue = queue[0].ref, queue[1:]
				}
				left := len(queue)
				mu.Unlock()
				if ref == "" {
					if left == 0 && time.Since(start) >= run {
						return
					}
					time.Sleep(20 * time.Millisecond) // nothing due yet (real time)
					continue
				}
				charge(ref)
			}
		})
	}
	time.Sleep(killAt)
	pc.kill(victim)
	killed := time.Now()
	// New while the master is down: only the shards it can reach.
	time.Sleep(200 * time.Millisecond)
	c2 := redis.NewClusterClient(&redis.ClusterOptions{Addrs: pc.addrs(), DialerRetries: 1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c2.Close() })
	newStart := time.Now()
	_, newErr := New(c2, WithPrefix("kill"), WithLogger(quietLogger()))
	newTook := time.Since(newStart)
	time.Sleep(time.Until(start.Add(returnAt)))
	pc.restart(victim)
	wg.Wait()
	pc.waitHealthy()

	t.Logf("New while the master of %d of 16 shards was down: %v after %v", onVictim, newErr, newTook.Round(time.Millisecond))
	if newErr != nil {
		t.Fatalf("New with one master down: %v", newErr)
	}
	var line strings.Builder
	for b := range done {
		at := time.Duration(b) * bucket
		mark := ""
		switch {
		case at >= killAt && at < killAt+bucket:
			mark = " ← master killed"
		case at >= returnAt && at < returnAt+bucket:
			mark = " ← killed node restarted"
		}
		fmt.Fprintf(&line, "\n  %5.1fs %4d charges/s %4d refused/s%s", at.Seconds(), done[b]*int(time.Second/bucket), refused[b]*int(time.Second/bucket), mark)
	}
	t.Logf("charges/s over time (12 checkout workers and 4 retry workers, WithWait(1, 500ms), %d of 16 shards on the killed master, killed at %v):%s", onVictim, killed.Sub(start).Round(time.Millisecond), line.String())

	// No acknowledged write lost: every Create that returned nil is there.
	check, err := New(clusterClient(t, pc.addrs()), WithPrefix("kill"), WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	lost, acked := 0, 0
	store.acked.Range(func(k, _ any) bool {
		acked++
		if _, err := check.Get(ctx, k.(string)); err != nil {
			lost++
		}
		return true
	})
	l := srv.Ledger()
	perRef := map[string]int{}
	for _, sale := range l.Sales {
		perRef[sale.ExternalReference]++
	}
	doubles := 0
	for _, n := range perRef {
		if n > 1 {
			doubles++
		}
	}
	t.Logf("%d orders charged, %d sales; %d acknowledged Creates, %d lost; %d orders charged twice", orders.Load(), len(l.Sales), acked, lost, doubles)
	if lost != 0 || doubles != 0 {
		t.Fatalf("%d acknowledged Creates lost, %d orders charged twice; want 0 and 0", lost, doubles)
	}
	if r, err := check.Amnesia(ctx); err != nil || r.Detected() {
		t.Fatalf("Amnesia after a failover with WAIT: %+v, %v", r.Lost, err)
	}
}
