package pagpolarriver

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	pagpolar "github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore/storeurl"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// pgSchema creates a schema of this test's own on the shared server and
// drops it when the test ends, and returns a DSN whose search_path is it:
// River's tables, the orders and the SDK's key store all live there, and
// no other schema is touched.
func pgSchema(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("PAGPOLAR_TEST_POSTGRES_DSN")
	if dsn == "" {
		t.Skip("PAGPOLAR_TEST_POSTGRES_DSN not set")
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "pagpolarriver_test_" + hex.EncodeToString(b[:])
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close() })
	if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
			t.Errorf("dropping %s: %v", schema, err)
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// pgShop is the checkout and workers of one transaction type.
type pgShop[TTx any] struct {
	driver riverdriver.Driver[TTx]
	begin  func(ctx context.Context) (TTx, error)
	exec   func(ctx context.Context, tx TTx, query string, args ...any) error
	end    func(ctx context.Context, tx TTx, commit bool) error
	query  func(ctx context.Context, query string, args ...any) (string, string, error)
}

// runPostgres checks out orders (some rolled back after InsertTx) on
// PostgreSQL with the API losing answers, and proves the ledger.
func runPostgres[TTx any](t *testing.T, dsn string, sh pgShop[TTx]) {
	ctx := context.Background()
	m, err := rivermigrate.New(sh.driver, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		t.Fatal(err)
	}
	tx, err := sh.begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := sh.exec(ctx, tx, `CREATE TABLE orders (id TEXT PRIMARY KEY, name TEXT, email TEXT, sale_id TEXT, decision TEXT)`); err != nil {
		t.Fatal(err)
	}
	if err := sh.end(ctx, tx, true); err != nil {
		t.Fatal(err)
	}
	srv := pagpolartest.NewServer(t, pagpolartest.WithProcessingWindow(window))
	srv.Inject(pagpolartest.Fault{Route: "pix", Times: 2, Action: pagpolartest.FaultCommitThenDrop})
	srv.Inject(pagpolartest.Fault{Route: "pix", Times: 1, Action: pagpolartest.FaultCommitThen500})
	keys, closeKeys, err := storeurl.Open(ctx, dsn+"&declared_new="+url.QueryEscape("test: a schema of its own"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closeKeys() })
	client, err := pagpolar.NewClient(srv.CredentialID, pagpolar.StaticToken(srv.Token), pagpolar.WithBaseURL(srv.URL),
		pagpolar.WithStore(keys), pagpolar.WithRetryPolicy(testPolicy()), pagpolar.WithLogger(quiet()))
	if err != nil {
		t.Fatal(err)
	}
	workers := river.NewWorkers()
	err = AddWorkers(workers, Config[TTx]{Client: client, Logger: quiet(), Backoff: func(int) time.Duration { return 50 * time.Millisecond },
		Resolver: ResolverFunc(func(ctx context.Context, orderID string) (Payer, error) {
			name, email, err := sh.query(ctx, `SELECT name, email FROM orders WHERE id = $1`, orderID)
			return Payer{Customer: pagpolar.Customer{Name: name, Email: email}}, err
		}),
		OnSettled: func(ctx context.Context, tx TTx, r Result) error {
			return sh.exec(ctx, tx, `UPDATE orders SET sale_id = $1, decision = $2 WHERE id = $3`, r.EffectID, string(r.Decision), r.OrderID)
		}})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := river.NewClient(sh.driver, &river.Config{Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 4}},
		Workers: workers, FetchPollInterval: 20 * time.Millisecond, FetchCooldown: 5 * time.Millisecond, Logger: quiet(), RetryPolicy: fastRetry{}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		id := fmt.Sprintf("order-%d", i)
		tx, err := sh.begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := sh.exec(ctx, tx, `INSERT INTO orders (id, name, email) VALUES ($1, 'Maria da Silva', 'maria@example.com')`, id); err != nil {
			t.Fatal(err)
		}
		for range 2 { // the second insert is the same job
			if _, err := InsertTx(ctx, rc, tx, pix(id), nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := sh.end(ctx, tx, i%4 != 3); err != nil {
			t.Fatal(err)
		}
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := rc.Start(rctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
		defer scancel()
		_ = rc.Stop(sctx)
	}()
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	var jobs []*rivertype.JobRow
	for {
		res, err := rc.JobList(wctx, river.NewJobListParams().First(100))
		if err != nil {
			t.Fatal(err)
		}
		open := 0
		for _, j := range res.Jobs {
			if j.State != rivertype.JobStateCompleted && j.State != rivertype.JobStateCancelled && j.State != rivertype.JobStateDiscarded {
				open++
			}
		}
		if open == 0 {
			jobs = res.Jobs
			break
		}
		select {
		case <-wctx.Done():
			t.Fatalf("%d jobs open after 30 s", open)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if len(jobs) != 6 {
		t.Errorf("%d jobs, want 6 (one per committed order)", len(jobs))
	}
	l := srv.Ledger()
	if d := l.Duplicates(pagpolartest.DefaultGroup); len(d) > 0 {
		t.Errorf("twice: %v", d)
	}
	for i := range 8 {
		id := fmt.Sprintf("order-%d", i)
		sales := salesOf(l, id)
		if i%4 == 3 {
			if len(sales) != 0 {
				t.Errorf("rolled-back %s charged", id)
			}
			continue
		}
		saleID, _, err := sh.query(ctx, `SELECT sale_id, decision FROM orders WHERE id = $1`, id)
		if len(sales) != 1 || err != nil || saleID != sales[0].ID {
			t.Errorf("%s: sales %v, order row sale %q (%v)", id, sales, saleID, err)
		}
	}
}

func TestPostgres_DatabaseSQLCommitsIntentWithOrder(t *testing.T) {
	dsn := pgSchema(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	runPostgres(t, dsn, pgShop[*sql.Tx]{
		driver: riverdatabasesql.New(db),
		begin:  func(ctx context.Context) (*sql.Tx, error) { return db.BeginTx(ctx, nil) },
		exec: func(ctx context.Context, tx *sql.Tx, q string, args ...any) error {
			_, err := tx.ExecContext(ctx, q, args...)
			return err
		},
		end: func(_ context.Context, tx *sql.Tx, commit bool) error {
			if commit {
				return tx.Commit()
			}
			return tx.Rollback()
		},
		query: func(ctx context.Context, q string, args ...any) (string, string, error) {
			var a, b sql.NullString
			err := db.QueryRowContext(ctx, q, args...).Scan(&a, &b)
			return a.String, b.String, err
		},
	})
}

func TestPostgres_PgxTxCommitsIntentWithOrder(t *testing.T) {
	dsn := pgSchema(t)
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	runPostgres(t, dsn, pgShop[pgx.Tx]{
		driver: riverpgxv5.New(pool),
		begin:  func(ctx context.Context) (pgx.Tx, error) { return pool.Begin(ctx) },
		exec: func(ctx context.Context, tx pgx.Tx, q string, args ...any) error {
			_, err := tx.Exec(ctx, q, args...)
			return err
		},
		end: func(ctx context.Context, tx pgx.Tx, commit bool) error {
			if commit {
				return tx.Commit(ctx)
			}
			return tx.Rollback(ctx)
		},
		query: func(ctx context.Context, q string, args ...any) (string, string, error) {
			var a, b *string
			err := pool.QueryRow(ctx, q, args...).Scan(&a, &b)
			deref := func(p *string) string {
				if p == nil {
					return ""
				}
				return *p
			}
			return deref(a), deref(b), err
		},
	})
}
