package storetest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// Bench measures the store operations of one charge, without any network
// or client code: Create (which saves the record and takes the lease),
// Update to record the send, Update to the succeeded outcome, Release. One
// benchmark op is one such cycle on a new operation.
//
// It runs under b.RunParallel, so the caller chooses the concurrency with
// b.SetParallelism(p) before calling Bench: p × GOMAXPROCS goroutines. It
// reports, besides ns/op:
//
//	ops/s       charge cycles completed per second, all goroutines together
//	p99-ms      99th percentile latency of one cycle, in milliseconds
//	callers     how many goroutines ran cycles
//
// newStore is called once per benchmark round and must return an empty,
// isolated store whose clean-up is registered with b.Cleanup.
func Bench(b *testing.B, newStore func(b *testing.B) keystore.Store) {
	s := newStore(b)
	ctx := context.Background()
	prefix := "bench/" + strconv.FormatInt(time.Now().UnixNano(), 36) + "/"
	result := []byte(`{"identifier":"sale_0123456789","status":"pending","amount":9990,"method":"pix"}`)

	var (
		seq     atomic.Int64
		callers atomic.Int64
		mu      sync.Mutex
		lat     = make([]time.Duration, 0, b.N)
	)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		callers.Add(1)
		local := make([]time.Duration, 0, 256)
		for pb.Next() {
			id := prefix + strconv.FormatInt(seq.Add(1), 10)
			t0 := time.Now()
			if err := chargeCycle(ctx, s, id, result); err != nil {
				b.Error(err)
				break
			}
			local = append(local, time.Since(t0))
		}
		mu.Lock()
		lat = append(lat, local...)
		mu.Unlock()
	})
	elapsed := time.Since(start)
	b.StopTimer()
	if len(lat) == 0 || elapsed <= 0 {
		return
	}
	slices.Sort(lat)
	p99 := lat[(len(lat)*99+99)/100-1]
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "ops/s")
	b.ReportMetric(float64(p99)/float64(time.Millisecond), "p99-ms")
	b.ReportMetric(float64(callers.Load()), "callers")
}

// chargeCycle is what the client asks of the store for a charge that
// succeeds on its first attempt.
func chargeCycle(ctx context.Context, s keystore.Store, id string, result []byte) error {
	rec, err := s.Create(ctx, keystore.Record{
		OperationID: id,
		Key:         "key-" + id,
		Kind:        "pix",
		Fingerprint: "hmac-sha256:0123456789abcdef",
		State:       keystore.StatePending,
	}, "bench-owner", longTTL)
	if err != nil {
		return fmt.Errorf("Create(%s): %w", id, err)
	}
	now := time.Now()
	rec.Attempts, rec.FirstSentAt, rec.LastSentAt = 1, now, now
	if rec, err = s.Update(ctx, rec); err != nil {
		return fmt.Errorf("Update(%s) before sending: %w", id, err)
	}
	rec.State, rec.ResultRef, rec.Result = keystore.StateSucceeded, "sale_0123456789", result
	if rec, err = s.Update(ctx, rec); err != nil {
		return fmt.Errorf("Update(%s) to succeeded: %w", id, err)
	}
	if err := s.Release(ctx, id, rec.LeaseToken); err != nil {
		return fmt.Errorf("Release(%s): %w", id, err)
	}
	return nil
}
