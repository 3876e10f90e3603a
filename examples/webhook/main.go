package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/examples/internal/exampleenv"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/storeurl"
	"github.com/pagpolar/pagpolar-go/webhook"
	"github.com/pagpolar/pagpolar-go/webhook/redisinbox"
	"github.com/pagpolar/pagpolar-go/webhook/sqlinbox"
)

type config struct {
	tokens []string
	dbPath string
	addr   string
	api    webhook.API // nil: doubtful statuses are left as stored
	log    *slog.Logger

	payloadKeys []webhook.PayloadKey // seal stored bodies (the first seals)
	plaintext   bool                 // or store them as received, by name

	redisURL      string // events in this Redis instead of the SQLite file
	redisPrefix   string // the Redis keys' prefix (default redisinbox.DefaultPrefix)
	redisVolatile bool   // accept a Redis without an append-only file

	// The API client (PAGPOLAR_BASE_URL...), nil without it: it checks
	// doubtful statuses, and settles its key store's unknown operations
	// from the events (Settle).
	client  *pagpolar.Client
	keys    keystore.Store // the client's key store (PAGPOLAR_STORE)
	sent    *atomic.Int64  // requests the client has sent
	cred    string         // its credential ID
	offerID string         // -charge: the offer charged (PAGPOLAR_OFFER_ID)
	closers []func()

	onOutcome func(webhook.Record) // tests: see each recorded outcome
}

// close releases what fromEnv opened.
func (c *config) close() {
	for i := len(c.closers) - 1; i >= 0; i-- {
		c.closers[i]()
	}
	c.closers = nil
}

// defaultAddr is where the receiver listens unless PAGPOLAR_WEBHOOK_ADDR
// says otherwise: loopback, so that running the example exposes nothing.
const defaultAddr = "127.0.0.1:3000"

func main() {
	list := flag.String("list", "", "list the events in a state (received, processing, processed, error, dead) and exit")
	retry := flag.String("retry", "", "make the dead or failed event with this key due again and exit")
	charge := flag.Bool("charge", false, "charge one PIX order whose answer is lost, wait for its webhook event to settle it, and exit (against `pagpolar sim -webhook-url ... -hold 1`)")
	ref := flag.String("ref", "", "-charge: order code (default: PEDIDO-WH plus a suffix unique to this run)")
	flag.Parse()

	cfg := config{
		dbPath:        envOr("PAGPOLAR_WEBHOOK_DB", "pagpolar-webhooks.db"),
		addr:          envOr("PAGPOLAR_WEBHOOK_ADDR", defaultAddr),
		log:           slog.New(slog.NewTextHandler(os.Stderr, nil)),
		redisURL:      os.Getenv("PAGPOLAR_WEBHOOK_REDIS_URL"),
		redisPrefix:   envOr("PAGPOLAR_WEBHOOK_REDIS_PREFIX", redisinbox.DefaultPrefix),
		redisVolatile: os.Getenv("PAGPOLAR_WEBHOOK_REDIS_VOLATILE") == "yes",
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch {
	case *list != "":
		err = ops(ctx, cfg, func(s webhook.Store) error { return listEvents(ctx, s, webhook.State(*list), os.Stdout) })
	case *retry != "":
		err = ops(ctx, cfg, func(s webhook.Store) error {
			r, err := s.Retry(ctx, *retry)
			if err == nil {
				fmt.Printf("%s is due again; a running receiver picks it up\n", r.Key)
			}
			return err
		})
	case *charge:
		if err = cfg.fromEnv(); err == nil {
			err = chargeAndSettle(ctx, cfg, exampleenv.Ref("PEDIDO-WH", *ref), os.Stdout)
		}
	default:
		if err = cfg.fromEnv(); err == nil {
			err = run(ctx, cfg, nil)
		}
	}
	cfg.close()
	if err != nil {
		log.Fatal(err)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func (c *config) fromEnv() error {
	tok := os.Getenv("PAGPOLAR_WEBHOOK_TOKEN")
	if tok == "" {
		return errors.New("PAGPOLAR_WEBHOOK_TOKEN is not set (the webhook token from the PagPolar dashboard, not the API token)")
	}
	c.tokens = []string{tok}
	if next := os.Getenv("PAGPOLAR_WEBHOOK_TOKEN_NEXT"); next != "" {
		c.tokens = append(c.tokens, next)
	}
	switch keys, plain := os.Getenv("PAGPOLAR_WEBHOOK_PAYLOAD_KEYS"), os.Getenv("PAGPOLAR_WEBHOOK_PLAINTEXT") == "yes"; {
	case keys != "":
		k, err := webhook.ParsePayloadKeys(keys)
		if err != nil {
			return fmt.Errorf("PAGPOLAR_WEBHOOK_PAYLOAD_KEYS: %w", err)
		}
		c.payloadKeys = k
	case plain:
		c.plaintext = true
	default:
		return errors.New(`PAGPOLAR_WEBHOOK_PAYLOAD_KEYS is not set: stored events can hold the customer's name, e-mail and document; ` +
			`give a key to seal them (PAGPOLAR_WEBHOOK_PAYLOAD_KEYS="k1:$(openssl rand -base64 32)", and keep it: without it stored events cannot be processed) ` +
			`or set PAGPOLAR_WEBHOOK_PLAINTEXT=yes to store them in clear`)
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	base, cred, apiTok := os.Getenv(exampleenv.EnvBaseURL), os.Getenv(exampleenv.EnvCredential), os.Getenv(exampleenv.EnvToken)
	switch {
	case base != "" && cred != "" && apiTok != "":
		keysURL, where := os.Getenv("PAGPOLAR_STORE"), "PAGPOLAR_STORE"
		if keysURL == "" {
			where = "a temporary SQLite file (PAGPOLAR_STORE names another)"
			dir, err := os.MkdirTemp("", "pagpolar-keys-")
			if err != nil {
				return err
			}
			c.closers = append(c.closers, func() { _ = os.RemoveAll(dir) })
			keysURL = "sqlite:" + filepath.Join(dir, "keys.db") + "?declared_new=" + url.QueryEscape("example: a temporary file created for this run")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		keys, closeKeys, err := storeurl.Open(ctx, keysURL)
		if err != nil {
			return fmt.Errorf("PAGPOLAR_STORE: %w", err)
		}
		c.closers = append(c.closers, func() { _ = closeKeys() })
		client, sent, err := newClient(base, cred, pagpolar.StaticToken(apiTok), keys, c.log)
		if err != nil {
			return err
		}
		c.client, c.keys, c.sent, c.cred = client, keys, sent, cred
		c.offerID = envOr(exampleenv.EnvOfferID, exampleenv.SimOfferID)
		c.api = webhook.FromClient(client)
		c.log.Info("checking doubtful statuses against the API at "+base+" (PAGPOLAR_BASE_URL, PAGPOLAR_CREDENTIAL_ID and PAGPOLAR_TOKEN are set); "+
			"events settle the unknown operations of the key store in "+where, "base_url", base)
	case base != "" || cred != "" || apiTok != "":
		return errors.New("set all of PAGPOLAR_BASE_URL, PAGPOLAR_CREDENTIAL_ID and PAGPOLAR_TOKEN (statuses are then checked with the API) or none of them")
	default:
		c.log.Info("doubtful statuses are left as stored: set PAGPOLAR_BASE_URL, PAGPOLAR_CREDENTIAL_ID and PAGPOLAR_TOKEN to check them with the API")
	}
	return nil
}

// openInbox returns where events are kept: the Redis of cfg.redisURL, or
// the SQLite inbox beside the orders (fallback).
func openInbox(cfg config, fallback webhook.Store) (webhook.Store, func(), error) {
	if cfg.redisURL == "" {
		return fallback, func() {}, nil
	}
	opts := []redisinbox.Option{redisinbox.WithLogger(cfg.log)}
	if cfg.redisPrefix != "" {
		opts = append(opts, redisinbox.WithPrefix(cfg.redisPrefix))
	}
	if cfg.redisVolatile {
		// Explicitly accepted: a Redis that keeps nothing on disk (a shared
		// development Redis) forgets every event on a restart, including
		// events already answered 200 that PagPolar will not send again.
		// Never set this in production.
		opts = append(opts, redisinbox.AllowVolatile())
	}
	s, err := redisinbox.NewFromURL(cfg.redisURL, opts...)
	if errors.Is(err, redisinbox.ErrVolatile) {
		return nil, nil, fmt.Errorf("%w\n(for a development Redis only: PAGPOLAR_WEBHOOK_REDIS_VOLATILE=yes accepts it)", err)
	}
	if err != nil {
		return nil, nil, err
	}
	return s, func() { _ = s.Close() }, nil
}

// openDB opens the SQLite file that holds both the inbox and the orders, so
// that an order and the events about it live (and are backed up) together.
func openDB(ctx context.Context, path string) (*sql.DB, *sqlinbox.Store, error) {
	db, err := sql.Open("sqlite", sqlinbox.SQLiteDSN(path, 5*time.Second))
	if err != nil {
		return nil, nil, err
	}
	store, err := sqlinbox.New(db)
	if err == nil {
		err = store.Migrate(ctx)
	}
	if err == nil {
		_, err = db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS orders (
	sale_id TEXT PRIMARY KEY, status TEXT NOT NULL, updated_at TEXT NOT NULL)`)
	}
	if err == nil {
		_, err = db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS refunds_handled (refund_id TEXT PRIMARY KEY)`)
	}
	if err != nil {
		_ = db.Close()
		return nil, nil, fmt.Errorf("opening %s: %w", path, err)
	}
	return db, store, nil
}

// run serves until ctx ends, then shuts down gracefully. ready, if not nil,
// receives the listening address.
func run(ctx context.Context, cfg config, ready chan<- string) error {
	db, sqlStore, err := openDB(ctx, cfg.dbPath)
	if err != nil {
		return err
	}
	defer db.Close()
	store, closeStore, err := openInbox(cfg, sqlStore)
	if err != nil {
		return err
	}
	defer closeStore()
	app := &app{db: db, api: cfg.api, log: cfg.log}
	wcfg := webhook.Config{
		Store:             store,
		Tokens:            cfg.tokens,
		PayloadKeys:       cfg.payloadKeys,
		PlaintextPayloads: cfg.plaintext,
		Handlers: map[string]webhook.HandlerFunc{
			webhook.EventTransactionCreated:      app.sale,
			webhook.EventTransactionPaid:         app.sale,
			webhook.EventTransactionDeclined:     app.sale,
			webhook.EventTransactionRefunded:     app.sale,
			webhook.EventTransactionAskRefunding: app.refundRequest,
		},
		Default:   app.other,
		Logger:    cfg.log,
		OnOutcome: cfg.onOutcome,
	}
	if cfg.client != nil {
		// Before its handler, each event settles the client's unknown
		// operations it carries the effect of: a lookup-free, send-free
		// settle, by the same attribution rule as the SDK's lookups.
		wcfg.Settle = cfg.client
	}
	inbox, err := webhook.New(wcfg)
	if err != nil {
		return err
	}
	if err := inbox.Start(); err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/webhooks/pagpolar", inbox)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 8 * time.Second, WriteTimeout: 9 * time.Second}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		_ = inbox.Shutdown(context.Background())
		return err
	}
	where := "sqlite:" + cfg.dbPath
	if cfg.redisURL != "" {
		where = "redis"
	}
	cfg.log.Info("receiving PagPolar webhooks", "addr", ln.Addr().String(), "path", "/webhooks/pagpolar", "db", cfg.dbPath, "events", where,
		"payloads_sealed", len(cfg.payloadKeys) > 0)
	if ready != nil {
		ready <- ln.Addr().String()
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		_ = inbox.Shutdown(context.Background())
		return err
	case <-ctx.Done():
	}
	// Stop taking deliveries first (PagPolar resends what it could not
	// deliver), then let running handlers finish; what is left stays stored
	// for the next start.
	sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	if ierr := inbox.Shutdown(sctx); err == nil {
		err = ierr
	}
	return err
}

// app is the receiving application: its orders table and the functions run
// for each event.
type app struct {
	db  *sql.DB
	api webhook.API
	log *slog.Logger
}

// sale applies a transaction event to the order, never moving it backwards.
func (a *app) sale(ctx context.Context, ev *webhook.Event) error {
	tx := ev.Transaction()
	var stored string
	err := a.db.QueryRowContext(ctx, `SELECT status FROM orders WHERE sale_id = ?`, tx.ID).Scan(&stored)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	var api webhook.SaleGetter
	if a.api != nil {
		api = a.api
	}
	res, _, err := webhook.ResolveSale(ctx, api, nil, stored, tx)
	if err != nil && api == nil {
		// No API configured: keep what we have rather than guess.
		a.log.Warn("doubtful status left as stored; configure the API to check it",
			"event", ev.Name, "sale", tx.ID, "stored", stored, "received", tx.Status)
		return nil
	}
	if err != nil {
		return err // retried later
	}
	if !res.Apply {
		a.log.Info("event does not change the order", "event", ev.Name, "sale", tx.ID, "status", stored, "received", tx.Status, "order", res.Order.String())
		return nil
	}
	_, err = a.db.ExecContext(ctx, `INSERT INTO orders (sale_id, status, updated_at) VALUES (?, ?, ?)
ON CONFLICT (sale_id) DO UPDATE SET status = excluded.status, updated_at = excluded.updated_at`,
		tx.ID, res.Status, time.Now().UTC().Format(time.RFC3339))
	if err == nil {
		a.log.Info("order updated", "event", ev.Name, "sale", tx.ID, "from", stored, "to", res.Status, "asked_api", res.Asked)
	}
	return err
}

// refundRequest tells a new refund request from a repeat (the event is never
// deduped) and acts on each new one once.
func (a *app) refundRequest(ctx context.Context, ev *webhook.Event) error {
	if a.api == nil {
		a.log.Warn("refund request received; configure the API to check GET /refunds", "sale", ev.Transaction().ID)
		return nil
	}
	check, err := webhook.CheckRefundRequest(ctx, a.api, ev.Transaction().ID, func(id string) (bool, error) {
		var one int
		err := a.db.QueryRowContext(ctx, `SELECT 1 FROM refunds_handled WHERE refund_id = ?`, id).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return err
	}
	for _, rf := range check.New {
		a.log.Info("new refund request", "sale", ev.Transaction().ID, "refund", rf.Identifier, "amount", rf.Amount)
		if _, err := a.db.ExecContext(ctx, `INSERT INTO refunds_handled (refund_id) VALUES (?) ON CONFLICT DO NOTHING`, rf.Identifier); err != nil {
			return err
		}
	}
	if len(check.New) == 0 {
		a.log.Info("refund request repeats one already handled", "sale", ev.Transaction().ID)
	}
	return nil
}

func (a *app) other(_ context.Context, ev *webhook.Event) error {
	a.log.Info("event", "event", ev.Name, "key", ev.Key)
	return nil
}

// ops opens the inbox for an operator command.
func ops(ctx context.Context, cfg config, f func(webhook.Store) error) error {
	db, sqlStore, err := openDB(ctx, cfg.dbPath)
	if err != nil {
		return err
	}
	defer db.Close()
	store, closeStore, err := openInbox(cfg, sqlStore)
	if err != nil {
		return err
	}
	defer closeStore()
	return f(store)
}

func listEvents(ctx context.Context, s webhook.Store, st webhook.State, out io.Writer) error {
	if !st.Valid() {
		return fmt.Errorf("-list %q: want one of %v", st, webhook.States())
	}
	rs, err := s.List(ctx, webhook.Filter{States: []webhook.State{st}, Limit: 1000})
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "KEY\tATTEMPTS\tDELIVERIES\tUPDATED\tLAST ERROR")
	for _, r := range rs {
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\n", r.Key, r.Attempts, r.Deliveries, r.UpdatedAt.Format(time.RFC3339), r.LastError)
	}
	return w.Flush()
}
