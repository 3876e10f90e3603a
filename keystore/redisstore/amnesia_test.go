package redisstore

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/storetest"
)

// loseRecords deletes records and their index entries, as a failover to a
// replica that had not received them would leave the shard.
func loseRecords(t *testing.T, c redis.UniversalClient, s *Store, ids ...string) {
	t.Helper()
	ctx := context.Background()
	for _, id := range ids {
		keys := s.scriptKeys(id)
		if err := c.Del(ctx, keys[0]).Err(); err != nil {
			t.Fatal(err)
		}
		for _, ix := range keys[1:] {
			if err := c.ZRem(ctx, ix, id).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestAmnesiaConformance runs storetest.RunAmnesia on a private Redis with
// an AOF: Wipe is FLUSHALL, Lose deletes single records, Reopen is another
// Store (another client) on the same prefix.
func TestAmnesiaConformance(t *testing.T) {
	redisOptions(t) // the same switch as every other test against Redis
	storetest.RunAmnesia(t, func(t *testing.T) storetest.AmnesiaBackend {
		// One private Redis per backend: Wipe flushes all of it.
		admin, _ := startRedis(t)
		prefix := "amnesia-" + randomHex(t, 4)
		open := func(t *testing.T) *Store {
			c := redis.NewClient(&redis.Options{Addr: admin.Options().Addr, ContextTimeoutEnabled: true, DialerRetries: 1})
			t.Cleanup(func() { c.Close() })
			s, err := New(c, WithPrefix(prefix), WithLogger(quietLogger()))
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			return s
		}
		s := open(t)
		return storetest.AmnesiaBackend{
			Store: s,
			Wipe: func(t *testing.T) {
				if err := admin.FlushAll(context.Background()).Err(); err != nil {
					t.Fatal(err)
				}
			},
			Lose:   func(t *testing.T, ids ...string) { loseRecords(t, admin, s, ids...) },
			Reopen: func(t *testing.T) keystore.Store { return open(t) },
		}
	})
}

// restartRedis kills a private redis-server and starts it again on the same
// port and directory: with appendonly no it comes back empty.
func restartRedis(t *testing.T, proc *exec.Cmd) *exec.Cmd {
	t.Helper()
	if err := proc.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = proc.Wait()
	again := exec.Command(proc.Path, proc.Args[1:]...)
	again.Stdout, again.Stderr = proc.Stdout, proc.Stderr
	if err := again.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		again.Process.Kill()
		again.Wait()
	})
	return again
}

// TestAmnesiaAfterRestartWithoutPersistence: a Redis that
// keeps nothing on disk (accepted with AllowVolatile) restarts; the first
// Create after it refuses, for a record that existed and for one that did
// not, and every shard is refused from then on.
func TestAmnesiaAfterRestartWithoutPersistence(t *testing.T) {
	redisOptions(t) // the same switch as every other test against Redis
	admin, proc := startRedis(t, "--appendonly", "no")
	c := redis.NewClient(&redis.Options{Addr: admin.Options().Addr, ContextTimeoutEnabled: true, DialerRetries: 1})
	t.Cleanup(func() { c.Close() })
	s, err := New(c, WithLogger(quietLogger()), AllowVolatile())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, id := range []string{"before-1", "before-2", "before-3"} {
		if _, err := s.Create(ctx, keystore.Record{OperationID: id}, "w", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	restartRedis(t, proc)
	waitFor(t, "the restarted Redis", func() bool { return admin.Ping(ctx).Err() == nil })
	back := time.Now()
	_, err = s.Create(ctx, keystore.Record{OperationID: "before-1"}, "w", time.Minute)
	detected := time.Since(back)
	if !errors.Is(err, keystore.ErrAmnesia) || !errors.Is(err, keystore.ErrUnavailable) {
		t.Fatalf("Create of a record the restart forgot: %v; want ErrAmnesia", err)
	}
	t.Logf("first Create after the restart refused in %v: %v", detected, err)
	// The sweep after the first detection marked every shard.
	r, err := s.Amnesia(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Lost) != s.cfg.shards {
		t.Fatalf("%d of %d shards reported lost after the restart: %+v", len(r.Lost), s.cfg.shards, r.Lost)
	}
	for _, id := range []string{"new-a", "new-b", "new-c", "new-d"} {
		if _, err := s.Create(ctx, keystore.Record{OperationID: id}, "w", time.Minute); !errors.Is(err, keystore.ErrAmnesia) {
			t.Fatalf("Create(%s) after the restart: %v; want ErrAmnesia", id, err)
		}
	}
}

// TestAmnesiaNewAfterPartialLoss: New finds some shards without their
// marker while others kept theirs (a node that came back empty holds a
// part of the shards) and marks those lost at once, even in a process that
// never used the prefix before.
func TestAmnesiaNewAfterPartialLoss(t *testing.T) {
	redisOptions(t)
	admin, _ := startRedis(t)
	ctx := context.Background()
	s, err := New(admin, WithPrefix("partial"), WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Del(ctx, s.markKey(3), s.markKey(7)).Err(); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	fresh, err := New(admin, WithPrefix("partial"), WithLogger(logs.logger()))
	if err != nil {
		t.Fatal(err)
	}
	r, err := fresh.Amnesia(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var lost []string
	for _, l := range r.Lost {
		lost = append(lost, l.Part)
	}
	if len(lost) != 2 || !strings.Contains(lost[0]+lost[1], "shard 3 ") || !strings.Contains(lost[0]+lost[1], "shard 7 ") {
		t.Fatalf("lost parts %q, want shards 3 and 7", lost)
	}
	if !strings.Contains(logs.String(), "shards marked lost") {
		t.Fatalf("New did not warn about the lost shards:\n%s", logs.String())
	}
}
