package reapload

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sort"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/redisstore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
	"io"
	"log/slog"
)

// TestRedisRecordSize prints what one settled PIX record costs in Redis:
// each hash field's size, the hash's encoding and MEMORY USAGE (a private
// redis-server; PAGPOLAR_REAP_LOAD must be set, as for the other
// measurements here).
func TestRedisRecordSize(t *testing.T) {
	if os.Getenv("PAGPOLAR_REAP_LOAD") == "" {
		t.Skip("PAGPOLAR_REAP_LOAD not set (a measurement: see the package doc)")
	}
	addr := startRedis(t)
	ctx := context.Background()
	rc := redis.NewClient(&redis.Options{Addr: addr})
	defer rc.Close()
	s, err := redisstore.New(rc, redisstore.WithPrefix("size"), redisstore.AllowVolatile(),
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
	keys, err := rc.Keys(ctx, "size:*op:*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatal(err, keys)
	}
	h, err := rc.HGetAll(ctx, keys[0]).Result()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	total := 0
	for k, v := range h {
		names = append(names, k)
		total += len(k) + len(v)
	}
	sort.Strings(names)
	for _, k := range names {
		flag := ""
		if len(h[k]) > 64 {
			flag = "  > 64 B"
		}
		t.Logf("%-5s %4d B%s", k, len(h[k]), flag)
	}
	enc, _ := rc.ObjectEncoding(ctx, keys[0]).Result()
	mem, _ := rc.MemoryUsage(ctx, keys[0], 0).Result()
	fmt.Printf("RECORD key %q: %d fields, %d B of names and values, encoding %s, MEMORY USAGE %d B\n", keys[0], len(h), total, enc, mem)
	fmt.Printf("result: %s\nmeta: %s\n", h["res"], h["meta"])

	// What the same record would cost with every value of more than 64 B
	// split into fields of at most 64 B (f, f1, f2...): not what the store
	// writes, a measurement of the option.
	split := map[string]any{}
	for k, v := range h {
		for i := 0; i*64 < len(v) || i == 0; i++ {
			name := k
			if i > 0 {
				name = fmt.Sprintf("%s%d", k, i)
			}
			split[name] = v[i*64 : min(len(v), (i+1)*64)]
		}
	}
	if err := rc.HSet(ctx, "size:split", split).Err(); err != nil {
		t.Fatal(err)
	}
	enc, _ = rc.ObjectEncoding(ctx, "size:split").Result()
	mem, _ = rc.MemoryUsage(ctx, "size:split", 0).Result()
	fmt.Printf("SPLIT: %d fields, encoding %s, MEMORY USAGE %d B\n", len(split), enc, mem)
	// Index entry: the record's member in its state's sorted set, with
	// 200 other members (skiplist encoding, as every real index has).
	ix := "size:ix"
	for i := range 200 {
		rc.ZAdd(ctx, ix, redis.Z{Score: float64(i), Member: fmt.Sprintf("%s-%d", h["op"], i)})
	}
	m200, _ := rc.MemoryUsage(ctx, ix, 0).Result()
	enc, _ = rc.ObjectEncoding(ctx, ix).Result()
	fmt.Printf("INDEX: 200 members of %d B, encoding %s, MEMORY USAGE %d B (%d B per entry)\n", len(h["op"])+4, enc, m200, m200/200)
}
