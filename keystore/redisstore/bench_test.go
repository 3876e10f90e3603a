package redisstore

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/storetest"
)

// BenchmarkRedisStoreOps measures one charge's store calls (Create, two
// Updates, Release) against the real Redis, at b.SetParallelism 1 and 64
// (× GOMAXPROCS goroutines; storetest.Bench reports the count as callers).
// BenchmarkMemoryStoreOps runs the same cycle on keystore.Memory, so the two
// compare as a ratio within one run. Besides storetest.Bench's ops/s and
// p99-ms, it reports the CPU time per cycle of this process and of Redis
// (which other users of the same Redis inflate).
func BenchmarkRedisStoreOps(b *testing.B) {
	for _, p := range []struct {
		name string
		n    int
	}{{"p1", 1}, {"p64", 64}} {
		b.Run(p.name, func(b *testing.B) {
			b.SetParallelism(p.n)
			benchRedis(b, nil)
		})
	}
}

// BenchmarkRedisStoreBatching compares, at parallelism 64, the store with
// pipelines shared among concurrent calls (the default) and with every call
// on its own round trip.
func BenchmarkRedisStoreBatching(b *testing.B) {
	for _, v := range []struct {
		name    string
		maxBusy int
	}{{"shared", defaultMaxBusy}, {"unshared", 1 << 30}} {
		b.Run(v.name, func(b *testing.B) {
			b.SetParallelism(64)
			benchRedis(b, func(s *Store) { s.batch.maxBusy = v.maxBusy })
		})
	}
}

func BenchmarkMemoryStoreOps(b *testing.B) {
	for _, p := range []struct {
		name string
		n    int
	}{{"p1", 1}, {"p64", 64}} {
		b.Run(p.name, func(b *testing.B) {
			b.SetParallelism(p.n)
			storetest.Bench(b, func(b *testing.B) keystore.Store { return keystore.NewMemory() })
		})
	}
}

func benchRedis(b *testing.B, tune func(*Store)) {
	var s *Store
	var cpu0, redis0 float64
	storetest.Bench(b, func(b *testing.B) keystore.Store {
		s, _ = newTestStore(b)
		if tune != nil {
			tune(s)
		}
		cpu0, redis0 = processCPU(), redisCPU(b, s)
		return s
	})
	if s == nil || b.N == 0 {
		return
	}
	b.ReportMetric((processCPU()-cpu0)*1e6/float64(b.N), "client-cpu-µs/op")
	b.ReportMetric((redisCPU(b, s)-redis0)*1e6/float64(b.N), "redis-cpu-µs/op")
}

// processCPU is this process's user+system CPU time in seconds.
func processCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// redisCPU is the Redis server's user+system CPU time in seconds.
func redisCPU(b *testing.B, s *Store) float64 {
	info, err := s.client.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatalf("INFO cpu: %v", err)
	}
	var total float64
	for line := range strings.SplitSeq(info, "\n") {
		line = strings.TrimSpace(line)
		for _, k := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(line, k); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatalf("INFO cpu %s: %v", line, err)
				}
				total += f
			}
		}
	}
	return total
}
