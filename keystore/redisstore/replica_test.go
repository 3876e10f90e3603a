//go:build !windows

package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// TestWaitWithReplica runs a private master with one replica: with
// WithWait(1, …) each durable write has reached the replica when it returns,
// and a write the frozen replica cannot acknowledge comes back as not
// durable (though applied on the master).
func TestWaitWithReplica(t *testing.T) {
	redisOptions(t) // the same switch as every other test against Redis
	master, _ := startRedis(t, "--repl-diskless-sync-delay", "0")
	host, port, _ := net.SplitHostPort(master.Options().Addr)
	replica, replicaProc := startRedis(t, "--replicaof", host, port)
	waitFor(t, "the replica to sync", func() bool {
		info, err := replica.Info(context.Background(), "replication").Result()
		return err == nil && strings.Contains(info, "master_link_status:up")
	})
	// The store counts replicas by the master's ROLE, which may list the
	// replica a moment after the replica sees its link up (a CI run failed
	// there: "master has 0 replicas attached").
	waitFor(t, "the master to list its replica", func() bool {
		role, err := master.Do(context.Background(), "ROLE").Slice()
		if err != nil || len(role) < 3 {
			return false
		}
		reps, ok := role[2].([]any)
		return ok && len(reps) >= 1
	})

	s, err := New(master, WithWait(1, 2*time.Second), WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	onReplica := func(id string) map[string]string {
		t.Helper()
		v, err := replica.Get(ctx, s.recordKey(id)).Result()
		if err != nil {
			t.Fatal(err)
		}
		h, err := unpackRecord(v)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	rec, err := s.Create(ctx, keystore.Record{OperationID: "op"}, "w", time.Minute)
	if err != nil {
		t.Fatalf("Create with a replica acknowledging: %v", err)
	}
	if h := onReplica("op"); h["ver"] != "1" {
		t.Fatalf("replica has %v right after Create returned, want version 1", h)
	}
	rec.State = keystore.StateSucceeded
	if _, err := s.Update(ctx, rec); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if h := onReplica("op"); h["ver"] != "2" || h["st"] != "succeeded" {
		t.Fatalf("replica has %v right after Update returned, want version 2 succeeded", h)
	}
	if _, err := s.Acquire(ctx, "op", "w", time.Minute); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if h := onReplica("op"); h["lt"] != "2" {
		t.Fatalf("replica has token %q right after Acquire returned, want 2", h["lt"])
	}
	// The replica's copy expires with the master's: the TTL replicates too.
	if ttl := replica.PTTL(ctx, s.recordKey("op")).Val(); ttl <= 0 {
		t.Fatalf("replica's copy of a terminal record has TTL %v, want the retention", ttl)
	}

	// Concurrent writers share pipelines and one WAIT per pipeline; each
	// still returns only once its own write is on the replica.
	const writers = 32
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			id := fmt.Sprintf("conc/%d", i)
			if _, err := s.Create(ctx, keystore.Record{OperationID: id}, "w", time.Minute); err != nil {
				errs <- err
				return
			}
			if n := replica.Exists(ctx, s.recordKey(id)).Val(); n != 1 {
				errs <- fmt.Errorf("%s not on the replica when Create returned", id)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// Freeze the replica: WAIT gets no acknowledgement within its timeout.
	if err := replicaProc.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer replicaProc.Process.Signal(syscall.SIGCONT)
	short, err := New(master, WithWait(1, 100*time.Millisecond), WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	_, err = short.Create(ctx, keystore.Record{OperationID: "frozen"}, "w", time.Minute)
	if !errors.Is(err, ErrNotDurable) || !errors.Is(err, keystore.ErrUnavailable) {
		t.Fatalf("Create while the replica is frozen: %v, want ErrNotDurable and ErrUnavailable", err)
	}
	if n := master.Exists(ctx, s.recordKey("frozen")).Val(); n != 1 {
		t.Fatal("the master did not apply the unconfirmed Create")
	}
	// After the shortfall, durable writes on that master fail at once, not
	// sent, for the cool-down, instead of each waiting out the WAIT timeout.
	start := time.Now()
	_, err = short.Create(ctx, keystore.Record{OperationID: "during-cooldown"}, "w", time.Minute)
	if !errors.Is(err, ErrNotDurable) || !strings.Contains(err.Error(), "not sent") || time.Since(start) > 50*time.Millisecond {
		t.Fatalf("Create right after a shortfall: %v after %v; want ErrNotDurable, not sent, at once", err, time.Since(start))
	}
	if n := master.Exists(ctx, short.recordKey("during-cooldown")).Val(); n != 0 {
		t.Fatal("a write refused by the cool-down reached the master")
	}
	if err := replicaProc.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the thawed replica to catch up", func() bool {
		return replica.Exists(ctx, s.recordKey("frozen")).Val() == 1
	})
}
