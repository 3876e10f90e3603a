package pagpolarriver

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
	_ "modernc.org/sqlite"

	pagpolar "github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore/storeurl"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// window is the fake API's in-processing mark in these tests, and the
// SDK's policy follows it, so a lost answer settles in about a second.
const window = 300 * time.Millisecond

func testPolicy() pagpolar.RetryPolicy {
	return pagpolar.RetryPolicy{
		MaxAttempts:       6,
		NewBackOff:        pagpolar.Exponential(window/50, window/5),
		MaxRetryAfter:     window / 4,
		AttemptTimeout:    window / 2,
		ProcessingWindow:  window,
		WindowMargin:      window / 2,
		SettleDelay:       window * 3 / 10,
		LookupInterval:    window / 10,
		LeaseTTL:          3 * window,
		LeaseWaitInterval: 10 * time.Millisecond,
		MaxSettleWait:     2 * window,
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// sqliteDSN opens path with a busy timeout and immediate transactions,
// so that River's writers, the checkout and other processes wait for
// each other instead of failing.
func sqliteDSN(path string) string {
	return "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate"
}

// shop is an application database (orders and their customers) with
// River's tables, plus the SDK's key store in a file of its own.
type shop struct {
	t      *testing.T
	db     *sql.DB
	srv    *pagpolartest.Server
	client *pagpolar.Client
	river  *river.Client[*sql.Tx]
	// settleFails makes OnSettled fail this many times before it works.
	settleFails int
	// onSettledHook, if set, is OnSettled instead of onSettled.
	onSettledHook func(ctx context.Context, tx *sql.Tx, r Result) error
}

const ordersDDL = `CREATE TABLE orders (
	id TEXT PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL, document TEXT NOT NULL, phone TEXT NOT NULL,
	card_token TEXT NOT NULL DEFAULT '', status TEXT NOT NULL DEFAULT 'awaiting_charge', effect_id TEXT, decision TEXT)`

func openSQLite(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", sqliteDSN(path))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1) // riversqlite's advice: one writer
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func migrateSQLite(t testing.TB, db *sql.DB) {
	t.Helper()
	ctx := context.Background()
	m, err := rivermigrate.New(riversqlite.New(db), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		t.Fatalf("river migrate: %v", err)
	}
	if _, err := db.ExecContext(ctx, ordersDDL); err != nil {
		t.Fatal(err)
	}
}

func keyStoreURL(dir string) string {
	return "sqlite:" + filepath.Join(dir, "keys.db") + "?declared_new=" + url.QueryEscape("test: a temporary file")
}

// newShop builds the shop against a fake API with opts, and starts River.
func newShop(t *testing.T, opts ...pagpolartest.Option) *shop {
	t.Helper()
	dir := t.TempDir()
	s := &shop{t: t}
	s.db = openSQLite(t, filepath.Join(dir, "app.db"))
	migrateSQLite(t, s.db)
	s.srv = pagpolartest.NewServer(t, append([]pagpolartest.Option{pagpolartest.WithProcessingWindow(window)}, opts...)...)
	keys, closeKeys, err := storeurl.Open(context.Background(), keyStoreURL(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closeKeys() })
	s.client, err = pagpolar.NewClient(s.srv.CredentialID, pagpolar.StaticToken(s.srv.Token), pagpolar.WithBaseURL(s.srv.URL),
		pagpolar.WithStore(keys), pagpolar.WithRetryPolicy(testPolicy()), pagpolar.WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	workers := river.NewWorkers()
	if err := AddWorkers(workers, Config[*sql.Tx]{
		Client: s.client, Resolver: ResolverFunc(s.payer), OnSettled: func(ctx context.Context, tx *sql.Tx, r Result) error {
			if s.onSettledHook != nil {
				return s.onSettledHook(ctx, tx, r)
			}
			return s.onSettled(ctx, tx, r)
		}, Logger: quiet(),
		Backoff: func(int) time.Duration { return 50 * time.Millisecond },
	}); err != nil {
		t.Fatal(err)
	}
	s.river, err = river.NewClient(riversqlite.New(s.db), &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 4}},
		Workers:           workers,
		FetchPollInterval: 20 * time.Millisecond,
		FetchCooldown:     5 * time.Millisecond,
		Logger:            quiet(),
		RetryPolicy:       fastRetry{},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fastRetry runs a failed job again after 20 ms.
type fastRetry struct{}

func (fastRetry) NextRetry(*rivertype.JobRow) time.Time { return time.Now().Add(20 * time.Millisecond) }

func (s *shop) start() {
	s.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if err := s.river.Start(ctx); err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = s.river.Stop(sctx)
		cancel()
	})
}

// payer is the shop's Resolver: the order's customer row.
func (s *shop) payer(ctx context.Context, orderID string) (Payer, error) {
	var p Payer
	err := s.db.QueryRowContext(ctx, `SELECT name, email, document, phone, card_token FROM orders WHERE id = ?`, orderID).
		Scan(&p.Customer.Name, &p.Customer.Email, &p.Customer.Document, &p.Customer.Phone, &p.CardToken)
	if err == sql.ErrNoRows {
		return Payer{}, fmt.Errorf("order %s: %w", orderID, ErrUnresolvable)
	}
	return p, err
}

func (s *shop) onSettled(ctx context.Context, tx *sql.Tx, r Result) error {
	if s.settleFails > 0 {
		s.settleFails--
		return fmt.Errorf("the order table is locked (test)")
	}
	_, err := tx.ExecContext(ctx, `UPDATE orders SET status = 'settled', effect_id = ?, decision = ? WHERE id = ?`,
		r.EffectID, string(r.Decision), r.OrderID)
	return err
}

// customer is order i's payer: personal data the job rows must never hold.
func customer(i int) pagpolar.Customer {
	return pagpolar.Customer{Name: fmt.Sprintf("Maria Secreta %d", i), Email: fmt.Sprintf("maria.%d@example.com", i),
		Document: "529.982.247-25", Phone: "11987654321"}
}

// checkout writes order id and its intent in one transaction, and rolls
// it back instead of committing when rollback is set.
func (s *shop) checkout(id string, card bool, intent Intent, rollback bool) Inserted {
	s.t.Helper()
	ctx := context.Background()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	c := customer(0)
	token := ""
	if card {
		token = "tok_" + id
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO orders (id, name, email, document, phone, card_token) VALUES (?, ?, ?, ?, ?, ?)`,
		id, c.Name, c.Email, c.Document, c.Phone, token); err != nil {
		s.t.Fatal(err)
	}
	ins, err := InsertTx(ctx, s.river, tx, intent, nil)
	if err != nil {
		_ = tx.Rollback()
		s.t.Fatalf("InsertTx(%s): %v", id, err)
	}
	if rollback {
		if err := tx.Rollback(); err != nil {
			s.t.Fatal(err)
		}
		return ins
	}
	if err := tx.Commit(); err != nil {
		s.t.Fatal(err)
	}
	return ins
}

// waitFinal waits (at most 30 s) until no job is waiting or running, and
// returns every job.
func (s *shop) waitFinal() []*rivertype.JobRow {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		jobs, err := s.river.JobList(ctx, river.NewJobListParams().First(10000))
		if err == nil {
			open := 0
			for _, j := range jobs.Jobs {
				switch j.State {
				case rivertype.JobStateCompleted, rivertype.JobStateCancelled, rivertype.JobStateDiscarded:
				default:
					open++
				}
			}
			if open == 0 {
				return jobs.Jobs
			}
		}
		select {
		case <-ctx.Done():
			s.t.Fatalf("jobs still open after 30 s (last list error: %v)", err)
		case <-tick.C:
		}
	}
}

type orderRow struct {
	status, effectID, decision string
}

func (s *shop) order(id string) (orderRow, bool) {
	s.t.Helper()
	var r orderRow
	var eff, dec sql.NullString
	err := s.db.QueryRow(`SELECT status, effect_id, decision FROM orders WHERE id = ?`, id).Scan(&r.status, &eff, &dec)
	if err == sql.ErrNoRows {
		return r, false
	}
	if err != nil {
		s.t.Fatal(err)
	}
	r.effectID, r.decision = eff.String, dec.String
	return r, true
}

// salesOf are the successful sales of external reference ref in the
// fake's ledger.
func salesOf(l pagpolartest.Ledger, ref string) []pagpolartest.Effect {
	var out []pagpolartest.Effect
	for _, e := range l.Effects() {
		if e.Kind == "sale" && e.Successful && e.ExternalReference == ref && e.SubscriptionID == "" {
			out = append(out, e)
		}
	}
	return out
}
