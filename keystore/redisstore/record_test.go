package redisstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// TestRecordPack_RoundTrips: what packRecord writes (the scripts' cmsgpack
// form) unpackRecord reads back, values of every length class included.
func TestRecordPack_RoundTrips(t *testing.T) {
	h := map[string]string{}
	for i, f := range recordFields {
		h[f] = strings.Repeat("x", []int{0, 1, 31, 32, 255, 256, 70000}[i%7])
	}
	got, err := unpackRecord(packRecord(h))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range recordFields {
		if got[f] != h[f] {
			t.Fatalf("field %s: %d bytes back, want %d", f, len(got[f]), len(h[f]))
		}
	}
}

// TestRecordPack_RefusesOtherValues: a value of another shape is an
// ErrLayout, never a record with empty fields.
func TestRecordPack_RefusesOtherValues(t *testing.T) {
	good := packRecord(map[string]string{"op": "x"})
	for name, v := range map[string]string{
		"empty":       "",
		"json":        `{"op":"x"}`,
		"truncated":   good[:len(good)-2],
		"trailing":    good + "z",
		"other tag":   strings.Replace(good, recordLayout, "r9", 1),
		"short array": "\xdc\x00\x02\xa2r1\xa1x",
	} {
		if _, err := unpackRecord(v); !errors.Is(err, ErrLayout) {
			t.Errorf("%s: %v, want ErrLayout", name, err)
		}
	}
}

// TestRecord_OneListpackFreeValue: a settled record is one string value
// holding every field, and the scripts' writes read back as what the
// caller stored.
func TestRecord_OneListpackFreeValue(t *testing.T) {
	s, admin := newTestStore(t)
	ctx := context.Background()
	rec, err := s.Create(ctx, keystore.Record{OperationID: "pix:one", Key: "k", Kind: "pix", Fingerprint: strings.Repeat("f", 67)}, "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	rec.State, rec.Result, rec.Meta = keystore.StateSucceeded, []byte(strings.Repeat("r", 400)), []byte(`{"a":1}`)
	if _, err := s.Update(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if typ := admin.Type(ctx, s.recordKey("pix:one")).Val(); typ != "string" {
		t.Fatalf("record key is a %s, want a string", typ)
	}
	if ttl := admin.PTTL(ctx, s.recordKey("pix:one")).Val(); ttl <= 0 {
		t.Fatalf("settled record TTL %v, want its retention", ttl)
	}
	if _, err := s.Acquire(ctx, "pix:one", "w", time.Minute); err != nil {
		t.Fatal(err)
	}
	if ttl := admin.PTTL(ctx, s.recordKey("pix:one")).Val(); ttl <= 0 {
		t.Fatalf("TTL after Acquire %v: the rewrite dropped it", ttl)
	}
	got, err := s.Get(ctx, "pix:one")
	if err != nil || string(got.Result) != string(rec.Result) || got.Fingerprint != rec.Fingerprint || got.LeaseToken != 2 {
		t.Fatalf("Get: %+v, %v", got, err)
	}
}

// TestRecord_HashIsRefused: a record key holding a hash (how an earlier
// version stored records) is refused by every call with an error wrapping
// ErrLayout that names what it found, and is left as it is.
func TestRecord_HashIsRefused(t *testing.T) {
	s, admin := newTestStore(t)
	ctx := context.Background()
	id := "pix:old"
	key := s.recordKey(id)
	if err := admin.HSet(ctx, key, "op", id, "st", "pending", "ver", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.ZAdd(ctx, s.indexKey(s.shardOf(id), keystore.StatePending), redis.Z{Score: 1, Member: id}).Err(); err != nil {
		t.Fatal(err)
	}
	calls := map[string]func() error{
		"Get":     func() error { _, err := s.Get(ctx, id); return err },
		"Create":  func() error { _, err := s.Create(ctx, keystore.Record{OperationID: id}, "w", time.Minute); return err },
		"Acquire": func() error { _, err := s.Acquire(ctx, id, "w", time.Minute); return err },
		"Update": func() error {
			_, err := s.Update(ctx, keystore.Record{OperationID: id, State: keystore.StateSucceeded, Version: 1, LeaseToken: 1})
			return err
		},
		"List": func() error { _, err := s.List(ctx, keystore.Filter{}); return err },
	}
	for name, call := range calls {
		err := call()
		if !errors.Is(err, ErrLayout) || !strings.Contains(err.Error(), "hash") {
			t.Errorf("%s: %v, want ErrLayout naming the hash", name, err)
		}
		if errors.Is(err, keystore.ErrUnavailable) || errors.Is(err, keystore.ErrNotFound) {
			t.Errorf("%s: %v must not read as unavailable or absent", name, err)
		}
	}
	if typ := admin.Type(ctx, key).Val(); typ != "hash" {
		t.Fatalf("the refused record became a %s", typ)
	}
}

// TestNew_RefusesAnotherLayout: a prefix whose marker names no record
// layout, or another one, is refused by New with an error wrapping
// ErrLayout that names the marker, before anything is written.
func TestNew_RefusesAnotherLayout(t *testing.T) {
	redisOptions(t)
	admin, _ := startRedis(t)
	ctx := context.Background()
	quiet := WithLogger(quietLogger())

	if _, err := New(admin, WithPrefix("fresh"), quiet); err != nil {
		t.Fatal(err)
	}
	s := &Store{cfg: defaultConfig()}
	s.cfg.prefix = "fresh"
	if err := admin.HDel(ctx, s.markKey(5), "rl").Err(); err != nil {
		t.Fatal(err)
	}
	_, err := New(admin, WithPrefix("fresh"), quiet)
	if !errors.Is(err, ErrLayout) || !strings.Contains(err.Error(), "record layout none") || !strings.Contains(err.Error(), s.markKey(5)) {
		t.Fatalf("New on a marker without a record layout: %v, want ErrLayout naming the marker", err)
	}
	if err := admin.HSet(ctx, s.markKey(5), "rl", "r0").Err(); err != nil {
		t.Fatal(err)
	}
	_, err = New(admin, WithPrefix("fresh"), quiet)
	if !errors.Is(err, ErrLayout) || !strings.Contains(err.Error(), "record layout r0") || !strings.Contains(err.Error(), s.markKey(5)) {
		t.Fatalf("New on a marker of another record layout: %v, want ErrLayout naming the marker and r0", err)
	}
	if rl := admin.HGet(ctx, s.markKey(5), "rl").Val(); rl != "r0" {
		t.Fatalf("the refused marker was rewritten: rl %q", rl)
	}
}

// TestNew_RefusesKeysWithoutMarkers: a prefix without any shard marker is
// new only if none of its indexes lists a record: records whose markers
// were deleted are refused with an error wrapping ErrLayout that names the
// index, and nothing is written. Keys of other forms that begin with the
// prefix (another prefix "acme:eu" beside "acme", a webhook inbox's) are
// not the store's, and leave it new.
func TestNew_RefusesKeysWithoutMarkers(t *testing.T) {
	redisOptions(t)
	admin, _ := startRedis(t)
	ctx := context.Background()
	quiet := WithLogger(quietLogger())

	s := &Store{cfg: defaultConfig()}
	s.cfg.prefix = "orphan"
	ix := s.indexKey(3, keystore.StatePending)
	if err := admin.ZAdd(ctx, ix, redis.Z{Score: 1, Member: "pix:order-1"}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.Set(ctx, s.recordKey("pix:order-1"), "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := New(admin, WithPrefix("orphan"), quiet, DeclaredNew("test"))
	if !errors.Is(err, ErrLayout) || !strings.Contains(err.Error(), ix) {
		t.Fatalf("New on indexed records without markers: %v, want ErrLayout naming %s", err, ix)
	}
	if admin.Exists(ctx, s.markKey(0)).Val() != 0 {
		t.Fatal("a marker was written")
	}

	if _, err := New(admin, WithPrefix("acme:eu"), quiet); err != nil {
		t.Fatal(err)
	}
	if err := admin.Set(ctx, "acme:webhook:evt_1", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := New(admin, WithPrefix("acme"), quiet); err != nil {
		t.Fatalf("New on a new prefix beside acme:eu and an inbox's keys: %v", err)
	}
}
