package cases

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/internal/benchpair"
	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/redisstore"
	"github.com/pagpolar/pagpolar-go/keystore/sqlstore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// Customer is the customer of every benchmark charge.
var Customer = pagpolar.Customer{Name: "Maria Silva", Email: "maria@example.com", Document: "12345678909", Phone: "11912345678"}

// Transport is the HTTP client every benchmark client uses: enough idle
// connections for 64 callers.
func Transport() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}}
}

var ns = uuid.MustParse("5d0c6f0e-9a43-4b7e-8f5e-2b7f3f6f0a11")

// Handwritten is the baseline: what a careful hand-written client does for
// the same PIX charge — marshal the same params, send the same headers
// (with a derived idempotency key), decode the same answer. One POST, no
// store, no retries.
type Handwritten struct {
	HC    *http.Client
	URL   string
	Token string
	Cred  string
}

// Pix creates a PIX charge for the order ref.
func (h *Handwritten) Pix(ctx context.Context, ref string) (*wire.Sale, error) {
	body, err := json.Marshal(wire.PixRequest{OfferIdentifier: "offer-basic", ExternalReference: ref, Customer: wire.Customer{
		Name: Customer.Name, Email: Customer.Email, Document: Customer.Document, Phone: Customer.Phone}})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL+wire.RoutePix, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "handwritten/1")
	req.Header.Set("Authorization", "Bearer "+h.Token)
	req.Header.Set("Idempotency-Key", uuid.NewSHA1(ns, []byte(h.Cred+"\x00pix:"+ref)).String())
	resp, err := h.HC.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusCreated {
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	var s wire.Sale
	return &s, json.Unmarshal(b, &s)
}

// Ref is the order reference of benchmark operation seq.
func Ref(seq int64) string { return fmt.Sprintf("bench-%d", seq) }

func startServer(latency time.Duration) (*pagpolartest.Server, error) {
	var opts []pagpolartest.Option
	if latency > 0 {
		opts = append(opts, pagpolartest.WithLatency(latency))
	}
	srv := pagpolartest.NewUnstartedServer(opts...)
	if err := srv.Start(); err != nil {
		return nil, err
	}
	return srv, nil
}

// HandwrittenCase is the baseline against a fresh fake with the given API
// latency.
func HandwrittenCase(name string, latency time.Duration) benchpair.Case {
	return benchpair.Case{Name: name, New: func(context.Context) (benchpair.Op, func(), error) {
		srv, err := startServer(latency)
		if err != nil {
			return nil, nil, err
		}
		hc := Transport()
		h := &Handwritten{HC: hc, URL: srv.URL, Token: srv.Token, Cred: srv.CredentialID}
		return func(ctx context.Context, seq int64) error {
				_, err := h.Pix(ctx, Ref(seq))
				return err
			}, func() {
				hc.CloseIdleConnections()
				srv.Close()
			}, nil
	}}
}

// StoreOpener opens a fresh, empty store for one round; close releases it
// (and whatever it created: a table, keys).
type StoreOpener func(ctx context.Context) (s keystore.Store, close func(), err error)

// SDKCase is a PIX charge through the SDK with the store open gives,
// against a fresh fake with the given API latency.
func SDKCase(name string, latency time.Duration, open StoreOpener) benchpair.Case {
	return benchpair.Case{Name: name, New: func(ctx context.Context) (benchpair.Op, func(), error) {
		store, closeStore, err := open(ctx)
		if err != nil {
			return nil, nil, err
		}
		srv, err := startServer(latency)
		if err != nil {
			closeStore()
			return nil, nil, err
		}
		hc := Transport()
		c, err := pagpolar.NewClient(srv.CredentialID, pagpolar.StaticToken(srv.Token), pagpolar.WithBaseURL(srv.URL),
			pagpolar.WithHTTPClient(hc), pagpolar.WithStore(store))
		if err != nil {
			srv.Close()
			closeStore()
			return nil, nil, err
		}
		return func(ctx context.Context, seq int64) error {
				_, err := c.Payments.Pix(ctx, pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: Ref(seq), Customer: Customer})
				return err
			}, func() {
				hc.CloseIdleConnections()
				srv.Close()
				closeStore()
			}, nil
	}}
}

// Memory opens a memory store.
func Memory(context.Context) (keystore.Store, func(), error) {
	return keystore.NewMemory(), func() {}, nil
}

// The SQLite, Postgres and Redis openers declare each round's new file,
// table or prefix new (the stores' DeclaredNew option), as a deployment
// does once (pagpolar ops init): its history is then proven. Undeclared,
// a new store's history is unproven (keystore.HistoryProver) and the SDK
// sends nothing until a lookup before the first send can be conclusive
// (about ProofAge later).
const declareNote = "benchpair: a new file, table or prefix per round"

// SQLite opens a SQLite store in a new file under dir (the system's
// temporary directory when "").
func SQLite(dir string) StoreOpener {
	return func(ctx context.Context) (keystore.Store, func(), error) {
		d, err := os.MkdirTemp(dir, "benchpair-sqlite-")
		if err != nil {
			return nil, nil, err
		}
		s, err := sqlstore.OpenSQLite(filepath.Join(d, "keys.db"), sqlstore.DeclaredNew(declareNote))
		if err != nil {
			_ = os.RemoveAll(d)
			return nil, nil, err
		}
		if err := s.Migrate(ctx); err != nil {
			_ = s.Close()
			_ = os.RemoveAll(d)
			return nil, nil, err
		}
		return s, func() { _ = s.Close(); _ = os.RemoveAll(d) }, nil
	}
}

// Postgres opens a PostgreSQL store in a new table of dsn's database;
// the table and the store's _meta table are dropped on close.
func Postgres(dsn string) StoreOpener {
	return func(ctx context.Context) (keystore.Store, func(), error) {
		table := fmt.Sprintf("benchpair_ops_%d_%d", os.Getpid(), benchpair.Seq())
		s, err := sqlstore.OpenPostgres(dsn, sqlstore.WithTable(table), sqlstore.DeclaredNew(declareNote))
		if err != nil {
			return nil, nil, err
		}
		drop := func() {
			if db, err := sql.Open("pgx", dsn); err == nil {
				_, _ = db.Exec("DROP TABLE IF EXISTS " + table + ", " + table + "_meta")
				_ = db.Close()
			}
		}
		if err := s.Migrate(ctx); err != nil {
			_ = s.Close()
			drop()
			return nil, nil, err
		}
		return s, func() { _ = s.Close(); drop() }, nil
	}
}

// Redis opens a Redis store under a new key prefix of url's server
// (which must keep an append-only file: the store refuses one that does
// not). Its keys are deleted on close.
func Redis(url string) StoreOpener {
	return func(ctx context.Context) (keystore.Store, func(), error) {
		opt, err := redis.ParseURL(url)
		if err != nil {
			return nil, nil, err
		}
		opt.PoolSize = 128
		rc := redis.NewClient(opt)
		prefix := fmt.Sprintf("benchpair-%d-%d", os.Getpid(), benchpair.Seq())
		s, err := redisstore.New(rc, redisstore.WithPrefix(prefix), redisstore.DeclaredNew(declareNote))
		if err != nil {
			_ = rc.Close()
			return nil, nil, err
		}
		return s, func() {
			iter := rc.Scan(ctx, 0, prefix+"*", 1000).Iterator()
			for iter.Next(ctx) {
				rc.Del(ctx, iter.Val())
			}
			_ = rc.Close()
		}, nil
	}
}

// FloorCase is the physical floor under a store's added latency: the two
// durable writes of a charge as the SDK makes them once the API's clock is
// known — Create (the record, with its attempt, before the send) and Update
// to the succeeded outcome with its result (after it), with records of the
// SDK's sizes (meta 255 B, then result 352 B and meta 95 B) — made alone,
// with no client, network or fake. With gap > 0 the two writes are
// separated by an idle pause of gap, as a charge's are by the API's
// latency (a connection or a writer that went idle may answer more
// slowly); the pause is not counted in the operation's time.
func FloorCase(name string, open StoreOpener, gap time.Duration) benchpair.Case {
	return floorCase(name, open, gap, false)
}

// FloorChargeCase is the store's floor under a charge at any parallelism:
// every store call a PIX charge answered pending makes through the SDK
// (Create, the API's latency gap as an idle wait, Update to succeeded,
// Release of the lease on the still-undecided sale), from a hand-written
// loop, with no client, network or fake. Its throughput at the SDK case's
// parallelism is what the store allows a charge that waits gap on the API.
func FloorChargeCase(name string, open StoreOpener, gap time.Duration) benchpair.Case {
	return floorCase(name, open, gap, true)
}

func floorCase(name string, open StoreOpener, gap time.Duration, release bool) benchpair.Case {
	meta := []byte(`{"v":1,"path":"/v1/sales/pix","fp":"hmac-sha256:k1:` + strings.Repeat("0", 64) + `","trust_after":"2026-12-01T12:00:00.123456789Z","window":"60s","margin":"5s","sent_at":"2026-12-01T12:00:00.123456789Z","srv":"2026-12-01T12:00:00Z","x":"` + strings.Repeat("x", 16) + `"}`)
	result := []byte(`{"identifier":"sale_0123456789abcdef","status":"pending","amount":9990,"method":"pix","external_reference":"bench-123456","created_at":"2026-12-01T12:00:00.123456789Z","pix":{"qr_code":"` + strings.Repeat("0", 120) + `","expires_at":"2026-12-01T13:00:00Z"},"customer":{"document_last4":"8909"},"x":"` + strings.Repeat("x", 24) + `"}`)
	meta2 := meta[:95]
	return benchpair.Case{Name: name, New: func(ctx context.Context) (benchpair.Op, func(), error) {
		s, closeStore, err := open(ctx)
		if err != nil {
			return nil, nil, err
		}
		return func(ctx context.Context, seq int64) error {
			id := fmt.Sprintf("floor/%d", seq)
			now := time.Now()
			rec, err := s.Create(ctx, keystore.Record{OperationID: id, Key: uuid.NewSHA1(ns, []byte(id)).String(), Kind: "pix",
				Fingerprint: "hmac-sha256:k1:0123456789abcdef0123456789abcdef", State: keystore.StatePending,
				Attempts: 1, FirstSentAt: now, LastSentAt: now, Meta: meta}, "floor-owner", time.Hour)
			if err != nil {
				return fmt.Errorf("Create: %w", err)
			}
			if gap > 0 {
				benchpair.Pause(ctx, gap)
			}
			rec.State, rec.ResultRef, rec.Result, rec.Meta = keystore.StateSucceeded, "sale_0123456789abcdef", result, meta2
			rec, err = s.Update(ctx, rec)
			if err != nil {
				return fmt.Errorf("Update: %w", err)
			}
			if release {
				if err := s.Release(ctx, rec.OperationID, rec.LeaseToken); err != nil {
					return fmt.Errorf("Release: %w", err)
				}
			}
			return nil
		}, closeStore, nil
	}}
}

// Calls counts a store's calls by method.
type Calls struct {
	Create, Get, Acquire, Renew, Release, Update, List, DeleteExpired atomic.Int64
	History                                                           atomic.Int64 // keystore.HistoryProver's History (answered from a cache once proven)
}

// Total is the number of calls counted.
func (c *Calls) Total() int64 {
	return c.Create.Load() + c.Get.Load() + c.Acquire.Load() + c.Renew.Load() + c.Release.Load() + c.Update.Load() + c.List.Load() + c.DeleteExpired.Load()
}

// String lists the counts per method, each divided by n (per charge).
func (c *Calls) String(n int64) string {
	f := func(v int64) float64 { return float64(v) / float64(n) }
	return fmt.Sprintf("Create %.2f, Get %.2f, Acquire %.2f, Renew %.2f, Update %.2f, Release %.2f, List %.2f (total %.2f); History %.2f",
		f(c.Create.Load()), f(c.Get.Load()), f(c.Acquire.Load()), f(c.Renew.Load()), f(c.Update.Load()), f(c.Release.Load()), f(c.List.Load()), f(c.Total()), f(c.History.Load()))
}

// Counted wraps open's stores so that every call is counted in calls.
func Counted(open StoreOpener, calls *Calls) StoreOpener {
	return func(ctx context.Context) (keystore.Store, func(), error) {
		s, closeStore, err := open(ctx)
		if err != nil {
			return nil, nil, err
		}
		return &countingStore{Store: s, calls: calls}, closeStore, nil
	}
}

type countingStore struct {
	keystore.Store
	calls *Calls
}

// History forwards the wrapped store's keystore.HistoryProver (a store
// without one is proven, as the SDK takes it).
func (s *countingStore) History(ctx context.Context) (keystore.History, error) {
	s.calls.History.Add(1)
	if hp, ok := s.Store.(keystore.HistoryProver); ok {
		return hp.History(ctx)
	}
	return keystore.History{}, nil
}

// DeclareNew forwards the wrapped store's keystore.HistoryProver.
func (s *countingStore) DeclareNew(ctx context.Context, note string) error {
	if hp, ok := s.Store.(keystore.HistoryProver); ok {
		return hp.DeclareNew(ctx, note)
	}
	return nil
}

func (s *countingStore) Create(ctx context.Context, rec keystore.Record, owner string, ttl time.Duration) (keystore.Record, error) {
	s.calls.Create.Add(1)
	return s.Store.Create(ctx, rec, owner, ttl)
}

func (s *countingStore) Get(ctx context.Context, id string) (keystore.Record, error) {
	s.calls.Get.Add(1)
	return s.Store.Get(ctx, id)
}

func (s *countingStore) Acquire(ctx context.Context, id, owner string, ttl time.Duration) (keystore.Record, error) {
	s.calls.Acquire.Add(1)
	return s.Store.Acquire(ctx, id, owner, ttl)
}

func (s *countingStore) Renew(ctx context.Context, id string, token int64, ttl time.Duration) (keystore.Record, error) {
	s.calls.Renew.Add(1)
	return s.Store.Renew(ctx, id, token, ttl)
}

func (s *countingStore) Release(ctx context.Context, id string, token int64) error {
	s.calls.Release.Add(1)
	return s.Store.Release(ctx, id, token)
}

func (s *countingStore) Update(ctx context.Context, rec keystore.Record) (keystore.Record, error) {
	s.calls.Update.Add(1)
	return s.Store.Update(ctx, rec)
}

func (s *countingStore) List(ctx context.Context, f keystore.Filter) ([]keystore.Record, error) {
	s.calls.List.Add(1)
	return s.Store.List(ctx, f)
}

func (s *countingStore) DeleteExpired(ctx context.Context, before time.Time, limit int) (int, error) {
	s.calls.DeleteExpired.Add(1)
	return s.Store.DeleteExpired(ctx, before, limit)
}
