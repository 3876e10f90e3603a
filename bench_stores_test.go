package pagpolar_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/redisstore"
	"github.com/pagpolar/pagpolar-go/keystore/sqlstore"
	"github.com/pagpolar/pagpolar-go/keystore/storetest"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// BenchmarkChargeStore measures PIX charges/s through the SDK against the
// in-process fake with each key store, at the parallelism the durability
// goals name. Compare each store's ns/op with memory's at the same
// parallelism in the same run (see BENCHMARKS.md). PostgreSQL and Redis run
// only when PAGPOLAR_TEST_POSTGRES_DSN / PAGPOLAR_TEST_REDIS_URL are set.
func BenchmarkChargeStore(b *testing.B) {
	stores := []struct {
		name string
		open func(b *testing.B) keystore.Store
	}{
		{"memory", func(b *testing.B) keystore.Store { return keystore.NewMemory() }},
		{"sqlite", func(b *testing.B) keystore.Store {
			s, err := sqlstore.OpenSQLite(filepath.Join(b.TempDir(), "keys.db"))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			if err := s.Migrate(context.Background()); err != nil {
				b.Fatal(err)
			}
			return s
		}},
		{"postgres", func(b *testing.B) keystore.Store {
			dsn := os.Getenv("PAGPOLAR_TEST_POSTGRES_DSN")
			if dsn == "" {
				b.Skip("PAGPOLAR_TEST_POSTGRES_DSN not set")
			}
			table := fmt.Sprintf("bench_ops_%d", benchSeq.Add(1000))
			s, err := sqlstore.OpenPostgres(dsn, sqlstore.WithTable(table))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				if db, err := sql.Open("pgx", dsn); err == nil {
					_, _ = db.Exec("DROP TABLE IF EXISTS " + table + ", " + table + "_meta")
					_ = db.Close()
				}
				_ = s.Close()
			})
			if err := s.Migrate(context.Background()); err != nil {
				b.Fatal(err)
			}
			return s
		}},
		{"redis", func(b *testing.B) keystore.Store {
			u := os.Getenv("PAGPOLAR_TEST_REDIS_URL")
			if u == "" {
				b.Skip("PAGPOLAR_TEST_REDIS_URL not set")
			}
			opt, err := redis.ParseURL(u)
			if err != nil {
				b.Fatal(err)
			}
			opt.PoolSize = 128
			rc := redis.NewClient(opt)
			prefix := fmt.Sprintf("pagpolar-bench-%d", benchSeq.Add(1000))
			// This machine's Redis keeps nothing on disk: the benchmark opts out
			// of the refusal, and the store's warning is kept out of the figures.
			s, err := redisstore.New(rc, redisstore.WithPrefix(prefix), redisstore.AllowVolatile(), redisstore.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				ctx := context.Background()
				iter := rc.Scan(ctx, 0, prefix+":*", 1000).Iterator()
				for iter.Next(ctx) {
					rc.Del(ctx, iter.Val())
				}
				_ = rc.Close()
			})
			return s
		}},
	}
	for _, par := range []int{1, 16, 64} {
		for _, st := range stores {
			b.Run(fmt.Sprintf("%s/p%d", st.name, par), func(b *testing.B) {
				store := st.open(b)
				storetest.DeclareNew(b, store)
				srv := pagpolartest.NewServer(b)
				c, err := pagpolar.NewClient(srv.CredentialID, pagpolar.StaticToken(srv.Token), pagpolar.WithBaseURL(srv.URL),
					pagpolar.WithHTTPClient(benchTransport()), pagpolar.WithStore(store))
				if err != nil {
					b.Fatal(err)
				}
				runParallel(b, par, func(ctx context.Context, ref string) error {
					_, err := c.Payments.Pix(ctx, pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: ref, Customer: benchCustomer})
					return err
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "charges/s")
			})
		}
	}
}
