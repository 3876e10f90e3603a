// A failover to a replica that missed acknowledged writes is detected by the
// store, not taken for the record's absence.

package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// TestClusterFailoverToStaleReplicaIsDetected: without WAIT, a master's
// replica is frozen while the master acknowledges Creates; then the
// replica is killed (what it had not read of the replication stream dies
// with it), the master is killed, and the replica comes back from its own
// AOF and is promoted: those Creates are gone. The Store that made them
// refuses its next Create in those shards (amnesia) instead of letting the
// operations be created, and charged, again.
func TestClusterFailoverToStaleReplicaIsDetected(t *testing.T) {
	pc := startCluster(t, 3, 1)
	c := privateClusterClient(t, pc)
	ctx := context.Background()
	s, err := New(c, WithPrefix("stale"), WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	victim := masterOf(t, c, s.markKey(0))
	var replica string
	// A replica shows in its master's ROLE once it has connected, which
	// may be after the Cluster reports ok: ask until it does (bounded).
	vc := nodeClient(victim)
	var role []any
	for deadline := time.Now().Add(20 * time.Second); ; {
		role, err = vc.Do(ctx, "role").Slice()
		if err == nil && len(role) >= 3 && len(role[2].([]any)) > 0 {
			break
		}
		if time.Now().After(deadline) {
			vc.Close()
			t.Fatalf("ROLE of %s: %v %v (no replica connected within 20 s)", victim, role, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	vc.Close()
	r0 := role[2].([]any)[0].([]any)
	replica = net.JoinHostPort(r0[0].(string), r0[1].(string))
	rn := pc.node(replica)
	var victimShards []int
	for shard := range s.cfg.shards {
		if masterOf(t, c, s.markKey(shard)) == victim {
			victimShards = append(victimShards, shard)
		}
	}
	idIn := func(shard int, tag string) string {
		for i := 0; ; i++ {
			if id := fmt.Sprintf("%s/%d", tag, i); s.shardOf(id) == shard {
				return id
			}
		}
	}
	if err := rn.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var staleAcked []string
	for _, shard := range victimShards {
		id := idIn(shard, "acked-while-frozen")
		if _, err := s.Create(ctx, keystore.Record{OperationID: id}, "w", time.Minute); err != nil {
			t.Fatal(err)
		}
		staleAcked = append(staleAcked, id)
	}
	pc.kill(replica)
	pc.kill(victim)
	pc.restart(replica)
	promoted := time.Now()
	waitFor(t, "the stale replica to be promoted", func() bool {
		n := nodeClient(replica)
		defer n.Close()
		r, err := n.Do(ctx, "role").Slice()
		return err == nil && len(r) > 0 && r[0] == "master"
	})
	t.Logf("stale replica %s promoted %v after the master was killed", replica, time.Since(promoted).Round(time.Millisecond))
	lost := 0
	for _, id := range staleAcked {
		var err error
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err = s.Get(ctx, id)
			if !errors.Is(err, keystore.ErrUnavailable) || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond) // the client learns the new master (real time)
		}
		switch {
		case errors.Is(err, keystore.ErrNotFound):
			lost++
		case err != nil:
			t.Fatalf("Get(%s) after the failover: %v", id, err)
		}
	}
	if lost == 0 {
		t.Fatal("no acknowledged Create was lost: the replica was not stale, the test proves nothing")
	}
	// The lost operations cannot be created again, nor any other in those
	// shards; the other shards go on.
	var refusedIn time.Duration
	for i, id := range staleAcked {
		start := time.Now()
		var err error
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err = s.Create(ctx, keystore.Record{OperationID: id}, "w", time.Minute)
			if !errors.Is(err, keystore.ErrUnavailable) || errors.Is(err, keystore.ErrAmnesia) || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond) // the client learns the new master
		}
		if i == 0 {
			refusedIn = time.Since(start)
		}
		if !errors.Is(err, keystore.ErrAmnesia) {
			t.Fatalf("Create of lost operation %s after the failover: %v; want ErrAmnesia", id, err)
		}
	}
	var other int
	for shard := range s.cfg.shards {
		if !contains(victimShards, shard) {
			other = shard
			break
		}
	}
	if _, err := s.Create(ctx, keystore.Record{OperationID: idIn(other, "other")}, "w", time.Minute); err != nil {
		t.Fatalf("Create in a shard of another master: %v", err)
	}
	r, err := s.Amnesia(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, l := range r.Lost {
		parts = append(parts, l.Part[:strings.Index(l.Part, " of ")])
	}
	sort.Strings(parts)
	t.Logf("%d of %d Creates acknowledged while the replica was frozen were lost; refused (amnesia) %v after the Store reached the promoted replica; lost parts: %v",
		lost, len(staleAcked), refusedIn.Round(time.Millisecond), parts)
	if len(r.Lost) != lost {
		t.Fatalf("%d shards reported lost, want the %d that lost a Create", len(r.Lost), lost)
	}
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
