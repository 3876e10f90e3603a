package storeurl_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/redisstore"
	"github.com/pagpolar/pagpolar-go/keystore/storeurl"
	"github.com/redis/go-redis/v9"
)

// readBack opens raw read-only and checks it holds id.
func readBack(t *testing.T, raw, id string) []string {
	t.Helper()
	var warnings []string
	r, closeFn, err := storeurl.OpenReadOnly(context.Background(), raw, func(m string) { warnings = append(warnings, m) })
	if err != nil {
		t.Fatalf("OpenReadOnly(%s): %v", raw, err)
	}
	defer closeFn()
	if _, err := r.Get(context.Background(), id); err != nil {
		t.Fatalf("Get(%s) through OpenReadOnly: %v", id, err)
	}
	return warnings
}

func create(t *testing.T, s keystore.Store, id string) {
	t.Helper()
	if _, err := s.Create(context.Background(), keystore.Record{OperationID: id, Key: "k", Kind: "pix"}, "w", time.Minute); err != nil {
		t.Fatal(err)
	}
}

// TestOpenExistingNeverCreates: a URL naming no store is ErrNoStore from
// both openers, and nothing is created; memory: is never an existing store.
func TestOpenExistingNeverCreates(t *testing.T) {
	dir := t.TempDir()
	for _, raw := range []string{"memory:", "sqlite:" + filepath.Join(dir, "typo.db"), "sqlite:" + filepath.Join(dir, "no", "dir", "x.db")} {
		if _, _, err := storeurl.OpenReadOnly(context.Background(), raw, nil); !errors.Is(err, storeurl.ErrNoStore) {
			t.Errorf("OpenReadOnly(%s): %v, want ErrNoStore", raw, err)
		}
		if _, _, err := storeurl.OpenExisting(context.Background(), raw); !errors.Is(err, storeurl.ErrNoStore) {
			t.Errorf("OpenExisting(%s): %v, want ErrNoStore", raw, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("created %v", entries)
	}
	for _, raw := range []string{"ftp://x", "sqlite:x.db?colour=blue", "redis+cluster://127.0.0.1:7000/3"} {
		if _, _, err := storeurl.OpenReadOnly(context.Background(), raw, nil); !errors.Is(err, storeurl.ErrBadURL) {
			t.Errorf("OpenReadOnly(%s): %v, want ErrBadURL", raw, err)
		}
	}
}

// TestOpenReadOnlySQLite: a closed WAL database is read without creating
// its -wal or -shm file, and OpenExisting then writes to it.
func TestOpenReadOnlySQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.db")
	raw := "sqlite:" + path + "?table=my_ops&busy_timeout=2s"
	s, closeFn, err := storeurl.Open(context.Background(), raw)
	if err != nil {
		t.Fatal(err)
	}
	create(t, s, "sqlite/1")
	_ = closeFn()
	if w := readBack(t, raw, "sqlite/1"); len(w) != 0 {
		t.Errorf("warnings %v", w)
	}
	for _, f := range []string{path + "-wal", path + "-shm"} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("a read created %s", f)
		}
	}
	ws, closeW, err := storeurl.OpenExisting(context.Background(), raw)
	if err != nil {
		t.Fatal(err)
	}
	defer closeW()
	create(t, ws, "sqlite/2")
}

// TestOpenReadOnlyPostgres: the application's own URL, with async_commit=1
// (never sent to the server) and options=-c search_path (kept with %20),
// opens the same table read-only and writable; a table that is not there
// is ErrNoStore and is not created.
func TestOpenReadOnlyPostgres(t *testing.T) {
	dsn := os.Getenv("PAGPOLAR_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Skip("PAGPOLAR_TEST_POSTGRES_DSN is not set")
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	schema := "storeurl_ro_" + suffix(t)
	if _, err := db.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.Exec("DROP SCHEMA " + schema + " CASCADE") })
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("options", "-c search_path="+schema+" -c synchronous_commit=off")
	q.Set("async_commit", "1")
	u.RawQuery = q.Encode() // options=-c+search_path...: '+' as url.Values writes it
	raw := u.String()
	if _, _, err := storeurl.OpenReadOnly(context.Background(), raw, nil); !errors.Is(err, storeurl.ErrNoStore) {
		t.Fatalf("OpenReadOnly before the table exists: %v, want ErrNoStore", err)
	}
	var n int
	if err := db.QueryRow("SELECT count(*) FROM information_schema.tables WHERE table_schema = $1", schema).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d tables after OpenReadOnly (%v)", n, err)
	}
	s, closeFn, err := storeurl.Open(context.Background(), raw)
	if err != nil {
		t.Fatalf("Open(%s): %v", u.Redacted(), err)
	}
	create(t, s, "pg/1")
	_ = closeFn()
	if err := db.QueryRow("SELECT count(*) FROM information_schema.tables WHERE table_schema = $1", schema).Scan(&n); err != nil || n == 0 {
		t.Fatalf("the store's table is not in the schema options=-c named (%d, %v)", n, err)
	}
	readBack(t, raw, "pg/1")
	ws, closeW, err := storeurl.OpenExisting(context.Background(), raw)
	if err != nil {
		t.Fatal(err)
	}
	defer closeW()
	create(t, ws, "pg/2")
}

// TestOpenReadOnlyRedis: a prefix nothing was stored under is ErrNoStore
// and gets no key; a Redis without an append-only file is read after one
// warning, while OpenExisting still needs volatile=1 to write.
func TestOpenReadOnlyRedis(t *testing.T) {
	raw := os.Getenv("PAGPOLAR_TEST_REDIS_URL")
	if raw == "" {
		t.Skip("PAGPOLAR_TEST_REDIS_URL is not set")
	}
	prefix := "storeurl_ro_" + suffix(t)
	cleanRedis(t, raw, prefix)
	sep := "?"
	if strings.Contains(raw, "?") {
		sep = "&"
	}
	at := raw + sep + "prefix=" + prefix
	if _, _, err := storeurl.OpenReadOnly(context.Background(), at, nil); !errors.Is(err, storeurl.ErrNoStore) {
		t.Fatalf("OpenReadOnly under an empty prefix: %v, want ErrNoStore", err)
	}
	opts, _ := redis.ParseURL(raw)
	c := redis.NewClient(opts)
	defer c.Close()
	if keys, _ := c.Keys(context.Background(), prefix+"*").Result(); len(keys) != 0 {
		t.Fatalf("OpenReadOnly wrote %v", keys)
	}
	s, err := redisstore.New(c, redisstore.WithPrefix(prefix), redisstore.AllowVolatile(), redisstore.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	create(t, s, "redis/1")
	w := readBack(t, at, "redis/1")
	if aof, _ := c.ConfigGet(context.Background(), "appendonly").Result(); aof["appendonly"] != "yes" &&
		(len(w) != 1 || !strings.Contains(w[0], "keeps no append-only file")) {
		t.Errorf("warnings %q, want one about the append-only file", w)
	}
	if _, _, err := storeurl.OpenExisting(context.Background(), at); !errors.Is(err, redisstore.ErrVolatile) {
		t.Errorf("OpenExisting without volatile=1: %v, want ErrVolatile", err)
	}
	ws, closeW, err := storeurl.OpenExisting(context.Background(), at+"&volatile=1")
	if err != nil {
		t.Fatal(err)
	}
	defer closeW()
	create(t, ws, "redis/2")
}

// TestOpenReadOnlyRedisCluster: the redis+cluster:// form opens read-only
// (PAGPOLAR_TEST_REDIS_CLUSTER=host:port,...; .ci/run starts one).
func TestOpenReadOnlyRedisCluster(t *testing.T) {
	nodes := os.Getenv("PAGPOLAR_TEST_REDIS_CLUSTER")
	if nodes == "" {
		t.Skip("PAGPOLAR_TEST_REDIS_CLUSTER is not set")
	}
	prefix := "storeurl_ro_" + suffix(t)
	raw := "redis+cluster://" + nodes + "/?prefix=" + prefix + "&volatile=1"
	if _, _, err := storeurl.OpenReadOnly(context.Background(), raw, nil); !errors.Is(err, storeurl.ErrNoStore) {
		t.Fatalf("OpenReadOnly under an empty prefix: %v, want ErrNoStore", err)
	}
	s := open(t, raw)
	t.Cleanup(func() {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(nodes, ",")})
		defer c.Close()
		_ = c.ForEachMaster(context.Background(), func(ctx context.Context, n *redis.Client) error {
			iter := n.Scan(ctx, 0, prefix+":*", 100).Iterator()
			for iter.Next(ctx) {
				n.Del(ctx, iter.Val())
			}
			return iter.Err()
		})
	})
	create(t, s, "cluster/1")
	readBack(t, raw, "cluster/1")
}
