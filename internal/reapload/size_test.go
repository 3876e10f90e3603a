package reapload

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/redisstore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// recordSizeGoal is what a settled PIX record may cost in Redis, all in:
// its value, key, expiry entry and index entry.
const recordSizeGoal = 1300

// TestRedisRecordSize measures what a settled PIX record costs in Redis: one
// real charge through the SDK gives the record's values; then 100k records
// with those values (and IDs of the same length) are written by the store
// itself (Create, then Update to succeeded, 64 at a time) into a private
// redis-server, and the test reads MEMORY USAGE (SAMPLES 0) of every record
// key and index key, and used_memory before and after. PAGPOLAR_REAP_LOAD
// must be set, as for the other measurements here; PAGPOLAR_SIZE_N changes
// the count.
func TestRedisRecordSize(t *testing.T) {
	if os.Getenv("PAGPOLAR_REAP_LOAD") == "" {
		t.Skip("PAGPOLAR_REAP_LOAD not set (a measurement: see the package doc)")
	}
	n := 100000
	if v := os.Getenv("PAGPOLAR_SIZE_N"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	addr := startRedis(t)
	ctx := context.Background()
	rc := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64})
	defer rc.Close()
	s, err := redisstore.New(rc, redisstore.WithPrefix("size"), redisstore.AllowVolatile(), redisstore.DeclaredNew("size test: a private server started empty"),
		redisstore.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	srv := pagpolartest.NewServer(t)
	c, err := pagpolar.NewClient(srv.CredentialID, pagpolar.StaticToken(srv.Token), pagpolar.WithBaseURL(srv.URL),
		pagpolar.WithHTTPClient(&http.Client{}), pagpolar.WithStore(s))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Payments.Pix(ctx, pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: "PEDIDO-000123", Customer: customer}); err != nil {
		t.Fatal(err)
	}
	recs, err := s.List(ctx, keystore.Filter{States: []keystore.State{keystore.StateSucceeded}, Limit: 1})
	if err != nil || len(recs) != 1 {
		t.Fatal(err, len(recs))
	}
	tmpl := recs[0]
	fmt.Printf("TEMPLATE %q: result %d B, meta %d B, fingerprint %d B, key %d B\n",
		tmpl.OperationID, len(tmpl.Result), len(tmpl.Meta), len(tmpl.Fingerprint), len(tmpl.Key))

	used := func() int64 {
		info, err := rc.Info(ctx, "memory").Result()
		if err != nil {
			t.Fatal(err)
		}
		for l := range strings.SplitSeq(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "used_memory:"); ok {
				m, _ := strconv.ParseInt(v, 10, 64)
				return m
			}
		}
		t.Fatal("no used_memory")
		return 0
	}
	before := used()
	// IDs as long as the template's: its last 7 characters become x and a
	// number.
	base := tmpl.OperationID[:len(tmpl.OperationID)-7] + "x"
	ids := make(chan string)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range 64 {
		wg.Go(func() {
			for id := range ids {
				r := tmpl
				r.OperationID, r.State, r.Result, r.Error = id, keystore.StatePending, nil, ""
				got, err := s.Create(ctx, r, "size-writer", time.Minute)
				if err == nil {
					got.State, got.Result, got.ResultRef, got.Meta = keystore.StateSucceeded, tmpl.Result, tmpl.ResultRef, tmpl.Meta
					_, err = s.Update(ctx, got)
				}
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		ids <- fmt.Sprintf("%s%06d", base, i)
	}
	close(ids)
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	after := used()

	var recBytes, ixBytes int64
	var records int
	encs := map[string]int{}
	var cursor uint64
	for {
		keys, next, err := rc.Scan(ctx, cursor, "size:*", 1000).Result()
		if err != nil {
			t.Fatal(err)
		}
		pipe := rc.Pipeline()
		mem := make([]*redis.IntCmd, len(keys))
		enc := make([]*redis.StringCmd, len(keys))
		for i, k := range keys {
			mem[i] = pipe.MemoryUsage(ctx, k, 0)
			enc[i] = pipe.ObjectEncoding(ctx, k)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		for i, k := range keys {
			switch {
			case strings.Contains(k, ":op:"):
				records++
				recBytes += mem[i].Val()
				encs[enc[i].Val()]++
			case strings.Contains(k, ":ix:"):
				ixBytes += mem[i].Val()
			}
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	if records != n+1 {
		t.Fatalf("%d record keys, want %d", records, n+1)
	}
	perRec, perIx := float64(recBytes)/float64(records), float64(ixBytes)/float64(records)
	perUsed := float64(after-before) / float64(n)
	fmt.Printf("RECORDS %d: MEMORY USAGE %.0f B per record (encodings %v) + %.0f B of index per record = %.0f B; used_memory %+d B = %.0f B per record\n",
		records, perRec, encs, perIx, perRec+perIx, after-before, perUsed)
	if all := max(perRec+perIx, perUsed); all > recordSizeGoal {
		t.Errorf("a settled PIX record costs %.0f B, over the %d B goal", all, recordSizeGoal)
	}
}
