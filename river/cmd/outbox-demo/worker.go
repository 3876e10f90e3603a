package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/riverqueue/river"

	pagpolar "github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore/storeurl"
	pagpolarriver "github.com/pagpolar/pagpolar-go/river"
)

// The worker process reads its settings from these variables (the token
// is not put on a command line, where ps shows it).
const (
	envWorker     = "PAGPOLAR_OUTBOX_DEMO_WORKER" // the worker's name; set: this process is a worker
	envDialect    = "PAGPOLAR_OUTBOX_DEMO_DIALECT"
	envDSN        = "PAGPOLAR_OUTBOX_DEMO_DSN"
	envKeys       = "PAGPOLAR_OUTBOX_DEMO_KEYS"
	envBaseURL    = "PAGPOLAR_OUTBOX_DEMO_BASE_URL"
	envCredential = "PAGPOLAR_OUTBOX_DEMO_CREDENTIAL"
	envToken      = "PAGPOLAR_OUTBOX_DEMO_TOKEN"
)

// window is the fake API's in-processing mark in the demo; the SDK's
// policy follows it, so lost answers settle within a second or two.
const window = 300 * time.Millisecond

func demoPolicy() pagpolar.RetryPolicy {
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
		MaxSettleWait:     3 * window,
	}
}

// River's settings in the demo: a job running longer than rescueAfter is
// taken for one whose worker died, and is run again by another.
const (
	jobTimeout  = 5 * time.Second
	rescueAfter = 6 * time.Second
)

// lines writes one line at a time to the parent, which reads the SDK's
// crash points in them ("saved OP", "sent OP") to kill mid-operation.
type lines struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lines) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format+"\n", args...)
}

func workerMain() int {
	name := os.Getenv(envWorker)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := work(ctx, name, &lines{w: os.Stdout}); err != nil {
		fmt.Fprintf(os.Stderr, "outbox-demo worker %s: %v\n", name, err)
		return 1
	}
	return 0
}

func work(ctx context.Context, name string, out *lines) error {
	a := appDB{dialect: os.Getenv(envDialect), dsn: os.Getenv(envDSN), keysURL: os.Getenv(envKeys)}
	db, err := a.open()
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	keys, closeKeys, err := storeurl.Open(ctx, a.keysURL)
	if err != nil {
		return fmt.Errorf("key store: %w", err)
	}
	defer func() { _ = closeKeys() }()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	client, err := pagpolar.NewClient(os.Getenv(envCredential), pagpolar.StaticToken(os.Getenv(envToken)),
		pagpolar.WithBaseURL(os.Getenv(envBaseURL)), pagpolar.WithStore(keys), pagpolar.WithRetryPolicy(demoPolicy()),
		pagpolar.WithOwner(fmt.Sprintf("%s-pid%d", name, os.Getpid())), pagpolar.WithLogger(logger),
		pagpolar.WithHook(func(_ context.Context, e pagpolar.Event) {
			switch e.Kind {
			case pagpolar.EventSaved, pagpolar.EventSent:
				out.printf("%s %s", e.Kind, e.OperationID)
			}
		}))
	if err != nil {
		return err
	}
	workers := river.NewWorkers()
	err = pagpolarriver.AddWorkers(workers, pagpolarriver.Config[*sql.Tx]{
		Client: client,
		Resolver: pagpolarriver.ResolverFunc(func(ctx context.Context, orderID string) (pagpolarriver.Payer, error) {
			return payerOf(ctx, a, db, orderID)
		}),
		OnSettled: func(ctx context.Context, tx *sql.Tx, r pagpolarriver.Result) error {
			_, err := tx.ExecContext(ctx, a.q(`UPDATE orders SET status = 'charged', sale_id = ?, decision = ? WHERE id = ?`),
				r.EffectID, string(r.Decision), r.OrderID)
			return err
		},
		Backoff: func(n int) time.Duration { return min(100*time.Millisecond<<min(n, 5), 2*time.Second) },
		Logger:  logger,
	})
	if err != nil {
		return err
	}
	rc, err := river.NewClient(a.driver(db), &river.Config{
		ID:                   name,
		Queues:               map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 8}},
		Workers:              workers,
		JobTimeout:           jobTimeout,
		RescueStuckJobsAfter: rescueAfter,
		FetchPollInterval:    50 * time.Millisecond,
		FetchCooldown:        10 * time.Millisecond,
		Logger:               logger,
	})
	if err != nil {
		return err
	}
	if err := rc.Start(ctx); err != nil {
		return err
	}
	out.printf("started %s", name)
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rc.Stop(sctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// payerOf is the shop's Resolver: the order's customer row.
func payerOf(ctx context.Context, a appDB, db *sql.DB, orderID string) (pagpolarriver.Payer, error) {
	var p pagpolarriver.Payer
	err := db.QueryRowContext(ctx, a.q(`SELECT name, email, document, phone, card_token FROM orders WHERE id = ?`), orderID).
		Scan(&p.Customer.Name, &p.Customer.Email, &p.Customer.Document, &p.Customer.Phone, &p.CardToken)
	if errors.Is(err, sql.ErrNoRows) {
		return p, fmt.Errorf("order %s: %w", orderID, pagpolarriver.ErrUnresolvable)
	}
	return p, err
}
