package redisstore

import (
	"testing"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/storetest"
)

// BenchmarkRedisStoreOps measures one charge's store calls (Create, two
// Updates, Release) against the real Redis, at b.SetParallelism 1 and 64
// (× GOMAXPROCS goroutines; storetest.Bench reports the count as callers).
// BenchmarkMemoryStoreOps runs the same cycle on keystore.Memory in the same
// run, so the two compare as a ratio.
func BenchmarkRedisStoreOps(b *testing.B) {
	for _, p := range []struct {
		name string
		n    int
	}{{"p1", 1}, {"p64", 64}} {
		b.Run(p.name, func(b *testing.B) {
			b.SetParallelism(p.n)
			storetest.Bench(b, func(b *testing.B) keystore.Store {
				s, _ := newTestStore(b)
				return s
			})
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
