//go:build !windows

package redisstore

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// TestFrozenRedisCallsReturnWithinCallTimeout freezes a private Redis
// (SIGSTOP: the kernel still accepts connections, nothing answers). A
// client with go-redis's default options waits its ReadTimeout (5 s) per
// attempt, retrying up to 3 times; the store still returns every call
// within 2× its call timeout, and the abandoned calls end once Redis
// answers again. With ContextTimeoutEnabled the call's deadline bounds the
// socket wait itself.
func TestFrozenRedisCallsReturnWithinCallTimeout(t *testing.T) {
	redisOptions(t) // the same switch as every other test against Redis
	const bound = 500 * time.Millisecond
	for _, v := range []struct {
		name       string
		ctxTimeout bool
	}{{"go-redis defaults", false}, {"ContextTimeoutEnabled", true}} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			admin, proc := startRedis(t)
			c := redis.NewClient(&redis.Options{Addr: admin.Options().Addr, ContextTimeoutEnabled: v.ctxTimeout})
			t.Cleanup(func() { c.Close() })
			s, err := New(c, WithLogger(quietLogger()), WithCallTimeout(bound))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			rec, err := s.Create(ctx, keystore.Record{OperationID: "before"}, "w", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := proc.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			thawed := false
			thaw := func() {
				if !thawed {
					thawed = true
					if err := proc.Process.Signal(syscall.SIGCONT); err != nil {
						t.Error(err)
					}
				}
			}
			defer thaw()
			for _, call := range storeCalls(s, rec) {
				took := timeToFail(t, call.name, call.call)
				t.Logf("%s gave up after %v (call timeout %v)", call.name, took.Round(time.Millisecond), bound)
				if took > 2*bound {
					t.Errorf("%s took %v against a frozen Redis, want well within 2× the call timeout %v", call.name, took, bound)
				}
			}
			thaw()
			waitDetached(t, s)
			if _, err := s.Get(ctx, "before"); err != nil {
				t.Fatalf("Get once Redis answers again: %v", err)
			}
		})
	}
}
