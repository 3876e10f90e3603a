package sqlstore_test

import (
	"fmt"
	"testing"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/storetest"
)

// BenchmarkStoreOps measures the store calls of one charge (storetest.Bench)
// on each store, so that they compare as ratios within one run:
//
//	go test -run '^$' -bench StoreOps -benchtime 2s ./keystore/sqlstore/
//
// pN is b.SetParallelism(N): N × GOMAXPROCS goroutines (see the callers metric).
func BenchmarkStoreOps(b *testing.B) {
	var pg sharedPG
	b.Cleanup(pg.close)
	stores := []struct {
		name string
		par  []int
		new  func(b *testing.B) keystore.Store
	}{
		{"memory", []int{1, 64}, func(b *testing.B) keystore.Store { return keystore.NewMemory() }},
		{"sqlite", []int{1, 64}, func(b *testing.B) keystore.Store { return newSQLite(b) }},
		{"postgres", []int{1, 16, 64}, func(b *testing.B) keystore.Store { return newPostgres(b, pg.get(b)) }},
	}
	for _, st := range stores {
		for _, p := range st.par {
			st, p := st, p
			b.Run(fmt.Sprintf("%s/p%d", st.name, p), func(b *testing.B) {
				b.SetParallelism(p)
				storetest.Bench(b, st.new)
			})
		}
	}
}
