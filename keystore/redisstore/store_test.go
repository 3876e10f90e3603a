package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// hashTag is the part of a key Redis Cluster hashes: the text between the
// first '{' and the next '}' when it is not empty, else the whole key.
func hashTag(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return key
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return key
	}
	return key[i+1 : i+1+j]
}

// TestKeysOfOneOperationShareASlot checks the key layout without a Cluster:
// every key a script touches for an operation (record, indexes, the
// shard's marker) hashes on the same tag, even when the operation ID
// itself contains braces; the tag holds the prefix, so two prefixes do not
// share slots.
func TestKeysOfOneOperationShareASlot(t *testing.T) {
	s := &Store{cfg: defaultConfig()}
	s.cfg.prefix = "app"
	for _, id := range []string{"pix:order-1", "{", "}", "{}", "a{b}c", "}{x}", "{{}}", "ção/%_"} {
		keys := s.scriptKeys(id)
		shard := s.shardOf(id)
		want := "app:" + fmt.Sprint(shard)
		for _, k := range append(keys, s.recordKey(id), s.recordPrefix(shard)+"other", s.markKey(shard)) {
			if got := hashTag(k); got != want {
				t.Fatalf("operation %q: key %q hashes on %q, want the shard tag %q", id, k, got, want)
			}
			if !strings.HasPrefix(k, "app:") {
				t.Fatalf("key %q does not start with the prefix", k)
			}
		}
		if keys[0] != s.recordKey(id) {
			t.Fatalf("first script key %q is not the record key %q", keys[0], s.recordKey(id))
		}
	}
	a := &Store{cfg: defaultConfig()}
	a.cfg.prefix = "tenant-a"
	b := &Store{cfg: defaultConfig()}
	b.cfg.prefix = "tenant-b"
	if hashTag(a.markKey(3)) == hashTag(b.markKey(3)) {
		t.Fatalf("two prefixes share the hash tag %q", hashTag(a.markKey(3)))
	}
}

func TestShardsSpreadOperations(t *testing.T) {
	s := &Store{cfg: defaultConfig()}
	seen := map[int]int{}
	for i := range 1600 {
		seen[s.shardOf(fmt.Sprintf("pix:order-%d", i))]++
	}
	if len(seen) != DefaultShards {
		t.Fatalf("1600 operations landed in %d of %d shards", len(seen), DefaultShards)
	}
	for shard, n := range seen {
		if n < 50 || n > 150 {
			t.Fatalf("shard %d got %d of 1600 operations; the hash does not spread them", shard, n)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	c := newClient(t)
	bad := map[string][]Option{
		"empty prefix":         {WithPrefix("")},
		"brace in prefix":      {WithPrefix("a{b")},
		"glob in prefix":       {WithPrefix("a*")},
		"zero retention":       {WithRetention(0)},
		"zero shards":          {WithShards(0)},
		"too many shards":      {WithShards(MaxShards + 1)},
		"WAIT 0 replicas":      {WithWait(0, time.Second)},
		"WAIT no timeout":      {WithWait(1, 0)},
		"WAIT past read":       {WithWait(1, time.Hour)},
		"WAITAOF nothing":      {WithWaitAOF(0, 0, time.Second)},
		"WAITAOF local 2":      {WithWaitAOF(2, 0, time.Second)},
		"WAITAOF neg replicas": {WithWaitAOF(1, -1, time.Second)},
	}
	for name, opts := range bad {
		if _, err := New(c, append(opts, WithLogger(quietLogger()))...); err == nil {
			t.Errorf("%s: New succeeded, want an error", name)
		}
	}
	if _, err := New(nil); err == nil {
		t.Error("New(nil) succeeded")
	}
}

func TestShardCountIsFixedPerPrefix(t *testing.T) {
	c := newClient(t)
	prefix := testPrefix(t, c)
	if _, err := New(c, WithPrefix(prefix), WithShards(16), WithLogger(quietLogger()), AllowVolatile()); err != nil {
		t.Fatalf("New: %v", err)
	}
	_, err := New(c, WithPrefix(prefix), WithShards(8), WithLogger(quietLogger()), AllowVolatile())
	if err == nil || !strings.Contains(err.Error(), "16 shards") {
		t.Fatalf("New with another shard count: %v, want an error naming the 16 shards in use", err)
	}
	if _, err := New(c, WithPrefix(prefix), WithShards(16), WithLogger(quietLogger()), AllowVolatile()); err != nil {
		t.Fatalf("New with the same shard count: %v", err)
	}
}

// TestPrefixesAreIsolated runs two stores with different prefixes on one
// Redis: each sees only its own records.
func TestPrefixesAreIsolated(t *testing.T) {
	a, _ := newTestStore(t)
	b, _ := newTestStore(t)
	ctx := context.Background()
	if _, err := a.Create(ctx, keystore.Record{OperationID: "op", Key: "ka"}, "w", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, "op"); !errors.Is(err, keystore.ErrNotFound) {
		t.Fatalf("store b sees store a's record: %v", err)
	}
	if got, err := b.List(ctx, keystore.Filter{}); err != nil || len(got) != 0 {
		t.Fatalf("store b lists %d records (%v), want none", len(got), err)
	}
	if _, err := b.Create(ctx, keystore.Record{OperationID: "op", Key: "kb"}, "w", time.Minute); err != nil {
		t.Fatalf("store b cannot create its own op: %v", err)
	}
}

// TestTwoStoresOneRedis plays two processes (separate clients and Stores)
// racing to create and take over the same operations: each operation is
// created once and leased by one of them at a time.
func TestTwoStoresOneRedis(t *testing.T) {
	s1, c := newTestStore(t)
	s2, err := New(newClient(t), WithPrefix(s1.cfg.prefix), WithLogger(quietLogger()), AllowVolatile())
	if err != nil {
		t.Fatal(err)
	}
	_ = c
	ctx := context.Background()
	const ops = 50
	var wg sync.WaitGroup
	results := make([][2]error, ops)
	for i := range ops {
		for j, s := range []*Store{s1, s2} {
			wg.Add(1)
			go func(i, j int, s *Store) {
				defer wg.Done()
				_, results[i][j] = s.Create(ctx, keystore.Record{OperationID: fmt.Sprintf("op-%d", i)}, fmt.Sprintf("proc-%d", j), time.Minute)
			}(i, j, s)
		}
	}
	wg.Wait()
	for i, r := range results {
		wins := 0
		for _, err := range r {
			switch {
			case err == nil:
				wins++
			case !errors.Is(err, keystore.ErrExists):
				t.Fatalf("op-%d: %v", i, err)
			}
		}
		if wins != 1 {
			t.Fatalf("op-%d created %d times", i, wins)
		}
	}
	got, err := s2.List(ctx, keystore.Filter{Limit: 1000})
	if err != nil || len(got) != ops {
		t.Fatalf("List: %d records, %v; want %d", len(got), err, ops)
	}
}

// TestScriptsAreIdempotentUnderResend replays a write script with the same
// nonce, as go-redis does when a reply is lost: the second run reports the
// first one's result instead of ErrExists, ErrConflict or a second token.
func TestScriptsAreIdempotentUnderResend(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := context.Background()
	id := "resend"
	keys := s.scriptKeys(id)
	ckeys, createSent, createArgs := s.createCall("nonce-c", keystore.Record{OperationID: id, Key: "k", Kind: "pix", Fingerprint: "fp", State: keystore.StatePending},
		"w", time.Minute, s.parts[s.shardOf(id)].view())
	updateSent := map[string]string{"st": "unknown", "att": "1", "fs": "", "ls": "", "rr": "", "res": "", "err": "", "meta": "", "fp": "fp"}
	var first scriptReply
	for i := range 2 {
		r, err := s.eval(ctx, "create", id, createSent, createScript, true, ckeys, createArgs...)
		if err != nil || r.status != "ok" {
			t.Fatalf("create run %d: status %q, %v; want ok", i, r.status, err)
		}
		if i == 0 {
			first = r
		} else if r.rec.Version != 1 || !r.rec.CreatedAt.Equal(first.rec.CreatedAt) || !r.rec.LeaseExpiresAt.Equal(first.rec.LeaseExpiresAt) {
			t.Fatalf("resent create changed the record: %+v, first %+v", r.rec, first.rec)
		}
	}
	// Another call (another nonce) is refused as usual.
	if r, _ := s.eval(ctx, "create", id, createSent, createScript, true, ckeys, append([]any{"nonce-other"}, createArgs[1:]...)...); r.status != "exists" {
		t.Fatalf("create with another nonce: %q, want exists", r.status)
	}
	for i := range 2 {
		r, err := s.eval(ctx, "acquire", id, nil, acquireScript, true, keys, "nonce-a", "w", time.Minute.Microseconds())
		if err != nil || r.status != "ok" || r.rec.LeaseToken != 2 {
			t.Fatalf("acquire run %d: status %q token %d, %v; want ok with token 2", i, r.status, r.rec.LeaseToken, err)
		}
	}
	for i := range 2 {
		r, err := s.eval(ctx, "update", id, updateSent, updateScript, true, keys,
			"nonce-u", 1, 2, "unknown", 1, "", "", "", "", "", "", "fp", s.cfg.retention.Milliseconds())
		if err != nil || r.status != "ok" || r.rec.Version != 2 || r.rec.State != keystore.StateUnknown {
			t.Fatalf("update run %d: status %q version %d state %q, %v; want ok, version 2, unknown", i, r.status, r.rec.Version, r.rec.State, err)
		}
	}
}

func TestRetentionTTL(t *testing.T) {
	s, c := newTestStore(t, WithRetention(time.Hour))
	ctx := context.Background()
	for _, st := range []keystore.State{keystore.StatePending, keystore.StateUnknown, keystore.StateNotExecuted, keystore.StateSucceeded, keystore.StateFailed} {
		id := "ttl/" + string(st)
		rec, err := s.Create(ctx, keystore.Record{OperationID: id}, "w", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if st != keystore.StatePending {
			if _, err := s.Update(ctx, keystore.Record{OperationID: id, State: st, Version: rec.Version, LeaseToken: rec.LeaseToken}); err != nil {
				t.Fatal(err)
			}
		}
		ttl, err := c.PTTL(ctx, s.recordKey(id)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if st.Terminal() {
			if ttl <= 59*time.Minute || ttl > time.Hour {
				t.Fatalf("%s record TTL = %v, want the 1h retention", st, ttl)
			}
		} else if ttl != -1 {
			// go-redis reports "no expiry" as -1 (in ns units of its Duration).
			t.Fatalf("%s record TTL = %v, want none", st, ttl)
		}
	}
}

// TestExpiredRecordsLeaveTheIndexes lets Redis expire terminal records by
// their retention TTL, then checks that List skips them, that later terminal
// writes drop their index entries, and that DeleteExpired counts the rest.
func TestExpiredRecordsLeaveTheIndexes(t *testing.T) {
	const retention = 150 * time.Millisecond
	s, c := newTestStore(t, WithRetention(retention), WithShards(1))
	ctx := context.Background()
	settle := func(id string) {
		t.Helper()
		rec, err := s.Create(ctx, keystore.Record{OperationID: id}, "w", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		rec.State = keystore.StateSucceeded
		if _, err := s.Update(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"a", "b", "c", "d"} {
		settle(id)
	}
	ix := s.indexKey(0, keystore.StateSucceeded)
	// Real time is what is under test: wait, with a bound, for Redis to
	// expire the records.
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := c.Exists(ctx, s.recordKey("a"), s.recordKey("b"), s.recordKey("c"), s.recordKey("d")).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d records still exist 10s after a %v retention", n, retention)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := c.ZCard(ctx, ix).Val(); n != 4 {
		t.Fatalf("index holds %d entries before any clean-up, want 4", n)
	}
	if got, err := s.List(ctx, keystore.Filter{}); err != nil || len(got) != 0 {
		t.Fatalf("List shows %d expired records (%v), want none", len(got), err)
	}
	settle("e") // drops the two oldest dead entries (a, b)
	if got := c.ZRange(ctx, ix, 0, -1).Val(); strings.Join(got, ",") != "c,d,e" {
		t.Fatalf("index after a terminal write = %q, want c,d,e", got)
	}
	n, err := s.DeleteExpired(ctx, time.Now().Add(time.Hour), 10)
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("DeleteExpired removed %d, want 3 (c and d expired by Redis, e deleted)", n)
	}
	if n := c.ZCard(ctx, ix).Val(); n != 0 {
		t.Fatalf("index holds %d entries after DeleteExpired, want 0", n)
	}
}

// TestRecreatedOperationHasOneIndexEntry: an operation whose terminal record
// Redis expired can be created again, and appears once, in its new state.
func TestRecreatedOperationHasOneIndexEntry(t *testing.T) {
	s, c := newTestStore(t, WithRetention(50*time.Millisecond), WithShards(1))
	ctx := context.Background()
	rec, err := s.Create(ctx, keystore.Record{OperationID: "again"}, "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	rec.State = keystore.StateFailed
	if _, err := s.Update(ctx, rec); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for c.Exists(ctx, s.recordKey("again")).Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatal("record not expired 10s after its retention")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := s.Create(ctx, keystore.Record{OperationID: "again"}, "w", time.Minute); err != nil {
		t.Fatalf("Create after expiry: %v", err)
	}
	if n := c.ZCard(ctx, s.indexKey(0, keystore.StateFailed)).Val(); n != 0 {
		t.Fatalf("failed index still holds %d entries for the re-created operation", n)
	}
	got, err := s.List(ctx, keystore.Filter{})
	if err != nil || len(got) != 1 || got[0].State != keystore.StatePending {
		t.Fatalf("List = %+v, %v; want the one pending record", got, err)
	}
	if n, err := s.DeleteExpired(ctx, time.Now().Add(time.Hour), 10); err != nil || n != 0 {
		t.Fatalf("DeleteExpired = %d, %v; want 0: the pending record stays", n, err)
	}
}

// TestListPrefixPages makes the prefix filter read several pages per index.
func TestListPrefixPages(t *testing.T) {
	s, _ := newTestStore(t, WithShards(2))
	s.cfg.listPage = 3
	ctx := context.Background()
	var want []string
	for i := range 20 {
		if _, err := s.Create(ctx, keystore.Record{OperationID: fmt.Sprintf("other/%02d", i)}, "w", time.Minute); err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("match/%02d", i)
		if _, err := s.Create(ctx, keystore.Record{OperationID: id}, "w", time.Minute); err != nil {
			t.Fatal(err)
		}
		want = append(want, id)
		time.Sleep(time.Millisecond) // distinct UpdatedAt, so the order is by creation
	}
	for _, limit := range []int{1, 5, 20, 50} {
		got, err := s.List(ctx, keystore.Filter{Prefix: "match/", Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		n := min(limit, len(want))
		var ids []string
		for _, r := range got {
			ids = append(ids, r.OperationID)
		}
		if strings.Join(ids, ",") != strings.Join(want[:n], ",") {
			t.Fatalf("List(prefix, limit %d) = %q, want %q", limit, ids, want[:n])
		}
	}
}

// TestListSkipsRecordsChangedMeanwhile: List re-checks each record it read
// from an index, so a record that moved out of the requested state between
// the index read and the record read is not reported in its old state.
func TestListSkipsRecordsChangedMeanwhile(t *testing.T) {
	s, c := newTestStore(t, WithShards(1))
	ctx := context.Background()
	rec, err := s.Create(ctx, keystore.Record{OperationID: "moved"}, "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// Simulate the interleaving: the record is unknown now, but a stale
	// pending entry is still in the index when List reads it.
	rec.State = keystore.StateUnknown
	if _, err := s.Update(ctx, rec); err != nil {
		t.Fatal(err)
	}
	c.ZAdd(ctx, s.indexKey(0, keystore.StatePending), redisZ(1, "moved"))
	got, err := s.List(ctx, keystore.Filter{States: []keystore.State{keystore.StatePending}})
	if err != nil || len(got) != 0 {
		t.Fatalf("List(pending) = %d records, %v; want none", len(got), err)
	}
	got, err = s.List(ctx, keystore.Filter{States: []keystore.State{keystore.StateUnknown}})
	if err != nil || len(got) != 1 {
		t.Fatalf("List(unknown) = %d records, %v; want 1", len(got), err)
	}
}

// DeleteExpired removes in scripts of at most deleteChunk records, and a
// call still removes exactly its limit when a shard holds more: across
// chunk boundaries within one shard, and leaving the unfinished records.
func TestDeleteExpiredInChunks(t *testing.T) {
	s, c := newTestStore(t, WithShards(1))
	ctx := context.Background()
	const settled = 3*deleteChunk + 5
	for i := range settled {
		rec, err := s.Create(ctx, keystore.Record{OperationID: fmt.Sprintf("done-%d", i)}, "w", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		rec.State = keystore.StateSucceeded
		if _, err := s.Update(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Create(ctx, keystore.Record{OperationID: "open"}, "w", time.Minute); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	first := deleteChunk + deleteChunk/2
	if n, err := s.DeleteExpired(ctx, later, first); err != nil || n != first {
		t.Fatalf("DeleteExpired(limit %d) = %d, %v", first, n, err)
	}
	if n, err := s.DeleteExpired(ctx, later, 1000); err != nil || n != settled-first {
		t.Fatalf("DeleteExpired of the rest = %d, %v; want %d", n, err, settled-first)
	}
	if n := c.ZCard(ctx, s.indexKey(0, keystore.StateSucceeded)).Val(); n != 0 {
		t.Fatalf("%d succeeded index entries left", n)
	}
	if _, err := s.Get(ctx, "open"); err != nil {
		t.Fatalf("the pending record: %v", err)
	}
}
