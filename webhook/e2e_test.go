package webhook_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
	"github.com/pagpolar/pagpolar-go/webhook"
	"github.com/pagpolar/pagpolar-go/webhook/redisinbox"
	"github.com/pagpolar/pagpolar-go/webhook/sqlinbox"
)

// A backend opens handles on one inbox's data: each call of open is a new
// process's view of the same events (a restart).
type backend struct {
	name string
	new  func(t testing.TB) (open func() webhook.Store)
}

func randomName() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func backends() []backend {
	return []backend{
		{"memory", func(t testing.TB) func() webhook.Store {
			s := webhook.NewMemoryStore()
			return func() webhook.Store { return s }
		}},
		{"sqlite", func(t testing.TB) func() webhook.Store {
			path := filepath.Join(t.TempDir(), "inbox.db")
			return func() webhook.Store {
				s, err := sqlinbox.OpenSQLite(path)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = s.Close() })
				if err := s.Migrate(context.Background()); err != nil {
					t.Fatal(err)
				}
				return s
			}
		}},
		{"postgres", func(t testing.TB) func() webhook.Store {
			dsn := os.Getenv("PAGPOLAR_TEST_POSTGRES_DSN")
			if dsn == "" {
				t.Skip("PAGPOLAR_TEST_POSTGRES_DSN is not set: skipping PostgreSQL")
			}
			table := "inbox_e2e_" + randomName()
			t.Cleanup(func() {
				db, err := sql.Open("pgx", dsn)
				if err == nil {
					_, err = db.Exec("DROP TABLE IF EXISTS " + table)
					_ = db.Close()
				}
				if err != nil {
					t.Errorf("drop %s: %v", table, err)
				}
			})
			return func() webhook.Store {
				s, err := sqlinbox.OpenPostgres(dsn, sqlinbox.WithTable(table))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = s.Close() })
				if err := s.Migrate(context.Background()); err != nil {
					t.Fatalf("PostgreSQL at PAGPOLAR_TEST_POSTGRES_DSN: %v", err)
				}
				return s
			}
		}},
		{"redis", func(t testing.TB) func() webhook.Store {
			url := os.Getenv("PAGPOLAR_TEST_REDIS_URL")
			if url == "" {
				t.Skip("PAGPOLAR_TEST_REDIS_URL is not set: skipping Redis")
			}
			prefix := "pagpolar-test:e2e:" + randomName()
			t.Cleanup(func() {
				o, _ := redis.ParseURL(url)
				c := redis.NewClient(o)
				defer c.Close()
				ctx := context.Background()
				iter := c.Scan(ctx, 0, "{"+prefix+"}:*", 500).Iterator()
				for iter.Next(ctx) {
					c.Del(ctx, iter.Val())
				}
			})
			return func() webhook.Store {
				// The shared test Redis keeps nothing on disk: opted out by name
				// (redisinbox's own tests check a private Redis with an AOF).
				s, err := redisinbox.NewFromURL(url, redisinbox.WithPrefix(prefix), redisinbox.WithLogger(quietLogger()), redisinbox.AllowVolatile())
				if err != nil {
					t.Fatalf("Redis at PAGPOLAR_TEST_REDIS_URL: %v", err)
				}
				t.Cleanup(func() { _ = s.Close() })
				return s
			}
		}},
		{"redis-cluster", func(t testing.TB) func() webhook.Store {
			nodes := os.Getenv("PAGPOLAR_TEST_REDIS_CLUSTER")
			if nodes == "" {
				t.Skip("PAGPOLAR_TEST_REDIS_CLUSTER is not set: skipping the Redis Cluster (.ci/run starts one)")
			}
			prefix := "pagpolar-test:e2e:" + randomName()
			t.Cleanup(func() {
				c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(nodes, ",")})
				ctx := context.Background()
				_ = c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
					iter := m.Scan(ctx, 0, "{"+prefix+"}:*", 500).Iterator()
					for iter.Next(ctx) {
						m.Del(ctx, iter.Val())
					}
					return nil
				})
				_ = c.Close()
			})
			return func() webhook.Store {
				// One client per Store (Close closes it); the CI Cluster keeps
				// an append-only file: no opt-out.
				s, err := redisinbox.New(redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(nodes, ",")}),
					redisinbox.WithPrefix(prefix), redisinbox.WithLogger(quietLogger()))
				if err != nil {
					t.Fatalf("Redis Cluster at PAGPOLAR_TEST_REDIS_CLUSTER: %v", err)
				}
				t.Cleanup(func() { _ = s.Close() })
				return s
			}
		}},
	}
}

// TestInboxWithSender drives the handler over HTTP with the fake's webhook
// sender, on every store.
func TestInboxWithSender(t *testing.T) {
	scenarios := []struct {
		name string
		fn   func(t *testing.T, open func() webhook.Store)
	}{
		{"DuplicatesAndResendEverything", e2eDuplicates},
		{"ConcurrentDuplicates", e2eConcurrentDuplicates},
		{"CreatedAfterPaid", e2eCreatedAfterPaid},
		{"FailsThenSucceeds", e2eFailsThenSucceeds},
		{"AlwaysFailsGoesDead", e2eDead},
		{"SlowHandlerFastAnswer", e2eSlowHandler},
		{"RestartMidway", e2eRestart},
		{"StoreRefusesWrites", e2eStoreRefuses},
		{"WrongToken", e2eWrongToken},
		{"OversizedAndMalformed", e2eBadBodies},
		{"FakeServerEvents", e2eFakeServer},
		{"ShutdownHandBacksAreNotAttempts", e2eShutdownHandBacks},
		{"RenewedWithoutNextBilling", e2eRenewedFallback},
		{"PayloadSealedAtRest", e2eSealed},
		{"ReapProcessedAndDead", e2eReap},
		{"SettlesUnknownSubscribe", e2eSettlesUnknownSubscribe},
		{"SettlesHeldOperationLater", e2eSettlesHeldLater},
	}
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			for _, sc := range scenarios {
				t.Run(sc.name, func(t *testing.T) { sc.fn(t, b.new(t)) })
			}
		})
	}
}

// rig is an Inbox behind an HTTP server and a sender posting to it, on one clock.
type rig struct {
	*harness
	url    string
	sender *pagpolartest.WebhookSender
}

func newRig(t *testing.T, store webhook.Store, clock *pagpolartest.Clock, edit func(*webhook.Config), opts ...pagpolartest.SenderOption) *rig {
	t.Helper()
	if clock == nil {
		clock = pagpolartest.NewClock()
	}
	h := newHarness(t, store, clock, edit).start()
	srv := httptest.NewServer(h.in)
	t.Cleanup(srv.Close)
	s := pagpolartest.NewWebhookSender(srv.URL, token, append([]pagpolartest.SenderOption{pagpolartest.WithSenderClock(clock)}, opts...)...)
	t.Cleanup(s.Close)
	return &rig{harness: h, url: srv.URL, sender: s}
}

func (r *rig) flush() {
	r.t.Helper()
	if err := r.sender.Flush(ctxFor(r.t)); err != nil {
		r.t.Fatal(err)
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	t.Cleanup(cancel)
	return ctx
}

func txWire(event, id, status string) wire.WebhookEnvelope {
	return wire.WebhookEnvelope{Event: event, Data: wire.WebhookData{Transaction: &wire.WebhookTransaction{
		ID: id, Sale: wire.Sale{Identifier: id, Status: status, PaymentMethod: wire.MethodPix, Amount: 9990},
	}}}
}

// allOK checks that every attempt the sender made was answered 200.
func (r *rig) allOK() {
	r.t.Helper()
	for _, d := range r.sender.Deliveries() {
		if !d.OK() {
			r.t.Errorf("attempt %+v was not accepted", d)
		}
	}
}
