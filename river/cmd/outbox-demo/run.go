package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/storeurl"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
	pagpolarriver "github.com/pagpolar/pagpolar-go/river"
)

type config struct {
	orders, rollbackEvery, kills int
	seed                         int64
	faultRate                    float64
	latency, timeout             time.Duration
	store                        string
	// exe runs a worker (default this executable); tests use their own
	// binary, whose TestMain turns into a worker under envWorker.
	exe string
}

var errNotDrained = errors.New("the jobs did not drain in time")

// report is what the run measured and checked.
type report struct {
	Store             string        `json:"store"`
	Orders            int           `json:"orders"`
	Committed         int           `json:"committed"`
	RolledBack        int           `json:"rolled_back"`
	Workers           int           `json:"workers"`
	Kills             int           `json:"kills"`
	KillsAfterSave    int           `json:"kills_after_save"`
	KillsAfterAnswer  int           `json:"kills_after_answer"`
	RescuedJobs       int           `json:"rescued_jobs"`
	Jobs              int           `json:"jobs"`
	JobsCompleted     int           `json:"jobs_completed"`
	FaultsMet         int           `json:"faults_met"`
	Requests          int           `json:"requests"`
	Drain             time.Duration `json:"drain_ns"`
	DrainText         string        `json:"drain"`
	ChargedOnce       int           `json:"charged_once"`
	Double            int           `json:"double"`
	Lost              int           `json:"lost"`
	RolledBackCharged int           `json:"rolled_back_charged"`
	RolledBackJobs    int           `json:"rolled_back_jobs"`
	RowsNotSettled    int           `json:"rows_not_settled"`
	// LeftForOperator are the operations the SDK left unknown (it
	// could not attribute the effect it found, so it never sends them
	// again): their jobs snooze until an operator settles them.
	LeftForOperator []string `json:"left_for_operator,omitempty"`
	Problems        []string `json:"problems,omitempty"`
}

// OK: every check passed.
func (r *report) OK() bool {
	return r.Double == 0 && r.Lost == 0 && r.RolledBackCharged == 0 && r.RolledBackJobs == 0 && r.RowsNotSettled == 0 &&
		r.Jobs == r.Committed && r.JobsCompleted+len(r.LeftForOperator) == r.Committed && len(r.Problems) == 0
}

func (r *report) print(w io.Writer) {
	fmt.Fprintf(w, "store %s: %d orders (%d committed, %d rolled back after InsertTx), %d worker processes\n",
		r.Store, r.Orders, r.Committed, r.RolledBack, r.Workers)
	fmt.Fprintf(w, "kills: %d SIGKILLs mid-operation (%d after the SDK saved its record, %d after an answer arrived, before it was stored)\n",
		r.Kills, r.KillsAfterSave, r.KillsAfterAnswer)
	fmt.Fprintf(w, "fake API: %d requests, %d met a fault\n", r.Requests, r.FaultsMet)
	fmt.Fprintf(w, "jobs: %d, %d completed, %d rescued by River after a kill; drained in %s\n", r.Jobs, r.JobsCompleted, r.RescuedJobs, r.DrainText)
	fmt.Fprintf(w, "ledger: %d committed orders charged exactly once; %d double, %d lost; rolled back: %d charged, %d with a job; %d order rows not updated\n",
		r.ChargedOnce, r.Double, r.Lost, r.RolledBackCharged, r.RolledBackJobs, r.RowsNotSettled)
	if n := len(r.LeftForOperator); n > 0 {
		fmt.Fprintf(w, "SDK: %d operations left unknown for an operator (charged once in the ledger; never sent again; their jobs snooze):\n", n)
		for _, l := range r.LeftForOperator {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "problem: %s\n", p)
	}
	if r.OK() {
		fmt.Fprintln(w, "verdict: PASS")
	} else {
		fmt.Fprintln(w, "verdict: FAIL")
	}
}

// run is the demo. Its phases: the fake API, the database, the
// checkouts, the workers and their killer, the drain, the checks.
func run(ctx context.Context, cfg config, logw io.Writer) (*report, error) {
	srv := pagpolartest.NewUnstartedServer(pagpolartest.WithProcessingWindow(window), pagpolartest.WithSeed(cfg.seed),
		pagpolartest.WithDeterministicFaults(), pagpolartest.WithLatency(cfg.latency))
	if err := srv.Start(); err != nil {
		return nil, err
	}
	defer srv.Close()
	for _, f := range faults(cfg.faultRate) {
		srv.Inject(f)
	}
	dir, err := os.MkdirTemp("", "pagpolar-outbox-demo-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	a, drop, err := prepare(ctx, cfg.store, dir)
	if err != nil {
		return nil, err
	}
	defer drop()
	rep := &report{Store: a.dialect, Orders: cfg.orders, Workers: 2}

	// The SDK's key store: durable, shared by the workers, declared new
	// once here (its first deployment); the workers open it plainly.
	keys, closeKeys, err := storeurl.Open(ctx, declaredNew(a.keysURL))
	if err != nil {
		return nil, fmt.Errorf("key store: %w", err)
	}
	defer func() { _ = closeKeys() }()

	db, err := a.open()
	if err != nil {
		return nil, err
	}
	defer func() { _ = db.Close() }()
	rc, err := river.NewClient(a.driver(db), &river.Config{}) // insert-only
	if err != nil {
		return nil, err
	}
	committed, rolledBack, err := checkouts(ctx, a, db, rc, cfg)
	if err != nil {
		return nil, err
	}
	rep.Committed, rep.RolledBack = len(committed), len(rolledBack)

	start := time.Now()
	f := &fleet{exe: cfg.exe, env: []string{
		envDialect + "=" + a.dialect, envDSN + "=" + a.dsn, envKeys + "=" + a.keysURL, envBaseURL + "=" + srv.URL,
		envCredential + "=" + srv.CredentialID, envToken + "=" + srv.Token,
	}, rng: rand.New(rand.NewPCG(uint64(cfg.seed), 0x6f7574626f78)), kills: cfg.kills, logw: logw,
		spread: max(1, min(10, len(committed)/(4*max(1, cfg.kills))))}
	if err := f.start(ctx, 2); err != nil {
		f.stop()
		return nil, err
	}
	jobs, stalled, derr := drain(ctx, rc, keys)
	rep.Drain = time.Since(start)
	rep.DrainText = rep.Drain.Round(100 * time.Millisecond).String()
	f.stop()
	rep.Kills, rep.KillsAfterSave, rep.KillsAfterAnswer = f.killed, f.killedSaved, f.killedSent
	if len(f.problems) > 0 {
		rep.Problems = append(rep.Problems, f.problems...)
	}

	vctx, vcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer vcancel()
	for op, why := range stalled {
		rep.LeftForOperator = append(rep.LeftForOperator, op+": "+why)
	}
	verify(vctx, rep, a, db, srv.Ledger(), jobs, stalled, committed, rolledBack)
	if derr != nil {
		return rep, fmt.Errorf("%w: %v", errNotDrained, derr)
	}
	return rep, nil
}

func declaredNew(keysURL string) string {
	sep := "?"
	if strings.Contains(keysURL, "?") {
		sep = "&"
	}
	return keysURL + sep + "declared_new=" + url.QueryEscape("outbox-demo: a store created for this run")
}

// faults is the fake API's misbehaviour: about rate of the charge
// requests lose their answer after committing, get a 500 after the
// commit, are dropped before processing, or are rate limited.
func faults(rate float64) []pagpolartest.Fault {
	if rate == 0 {
		return nil
	}
	var out []pagpolartest.Fault
	for _, route := range []string{"pix", "credit_card"} {
		taken := 0.0
		for _, k := range []struct {
			a     pagpolartest.FaultAction
			share float64
		}{
			{pagpolartest.FaultCommitThenDrop, 0.4}, {pagpolartest.FaultCommitThen500, 0.3},
			{pagpolartest.FaultDropBeforeProcessing, 0.15}, {pagpolartest.FaultRateLimit, 0.15},
		} {
			p := rate * k.share / (1 - taken)
			taken += rate * k.share
			f := pagpolartest.Fault{Route: route, Action: k.a, Probability: p}
			if k.a == pagpolartest.FaultRateLimit {
				f.Delay = 50 * time.Millisecond
			}
			out = append(out, f)
		}
	}
	return out
}

// checkouts writes each order and its intent in one transaction; every
// rollbackEvery-th transaction is rolled back after InsertTx. Every third
// order pays by card (token resolved at run time), the others by PIX.
func checkouts(ctx context.Context, a appDB, db *sql.DB, rc *river.Client[*sql.Tx], cfg config) (committed, rolledBack []string, err error) {
	for i := range cfg.orders {
		id := fmt.Sprintf("order-%05d", i)
		rb := cfg.rollbackEvery > 0 && i%cfg.rollbackEvery == cfg.rollbackEvery-1
		if err := checkout(ctx, a, db, rc, id, i%3 == 2, rb); err != nil {
			return nil, nil, fmt.Errorf("checkout %s: %w", id, err)
		}
		if rb {
			rolledBack = append(rolledBack, id)
		} else {
			committed = append(committed, id)
		}
	}
	return committed, rolledBack, nil
}

// checkout is what a shop's checkout does: the order and its charge
// intent in one transaction.
func checkout(ctx context.Context, a appDB, db *sql.DB, rc *river.Client[*sql.Tx], id string, card, rollback bool) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	token := ""
	if card {
		token = "tok_" + id
	}
	if _, err := tx.ExecContext(ctx, a.q(`INSERT INTO orders (id, name, email, document, phone, card_token) VALUES (?, ?, ?, ?, ?, ?)`),
		id, "Maria da Silva", "maria@example.com", "529.982.247-25", "11987654321", token); err != nil {
		return err
	}
	var intent pagpolarriver.Intent = pagpolarriver.PixIntent{OperationID: "pix:" + id, OrderID: id, OfferID: "offer-basic", ExternalReference: id}
	if card {
		intent = pagpolarriver.CreditCardIntent{OperationID: "card:" + id, OrderID: id, OfferID: "offer-basic", ExternalReference: id, Installments: 2}
	}
	if _, err := pagpolarriver.InsertTx(ctx, rc, tx, intent, nil); err != nil {
		return err
	}
	if rollback {
		return tx.Rollback() // e.g. stock ran out after the intent was written
	}
	return tx.Commit()
}

// drain waits until every job is completed, cancelled or discarded, or
// until the only open jobs are operations the SDK has held unknown for
// stallAfter (returned by operation ID, with the SDK's reason).
func drain(ctx context.Context, rc *river.Client[*sql.Tx], keys keystore.Store) ([]*rivertype.JobRow, map[string]string, error) {
	const stallAfter = 10 * time.Second
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last []*rivertype.JobRow
	var lastErr error
	for {
		res, err := rc.JobList(ctx, river.NewJobListParams().First(10_000))
		if err == nil {
			last, lastErr = res.Jobs, nil
			var open []string
			for _, j := range res.Jobs {
				if !final(j.State) {
					open = append(open, opOf(j))
				}
			}
			if len(open) == 0 {
				return last, nil, nil
			}
			if stalled := stalledOps(ctx, keys, open, stallAfter); stalled != nil {
				return last, stalled, nil
			}
			lastErr = fmt.Errorf("%d jobs still open", len(open))
		} else {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			return last, nil, lastErr
		case <-tick.C:
		}
	}
}

// stalledOps returns the SDK's reason for each of ops when every one is
// recorded unknown and untouched for at least d; nil otherwise.
func stalledOps(ctx context.Context, keys keystore.Store, ops []string, d time.Duration) map[string]string {
	recs, err := keys.List(ctx, keystore.Filter{States: []keystore.State{keystore.StateUnknown}, UpdatedBefore: time.Now().Add(-d)})
	if err != nil {
		return nil
	}
	why := map[string]string{}
	for _, r := range recs {
		_, op, _ := strings.Cut(r.OperationID, "/")
		why[op] = r.Error
	}
	out := map[string]string{}
	for _, op := range ops {
		w, ok := why[op]
		if !ok {
			return nil
		}
		out[op] = w
	}
	return out
}

func opOf(j *rivertype.JobRow) string {
	var args struct {
		OperationID string `json:"operation_id"`
	}
	_ = json.Unmarshal(j.EncodedArgs, &args)
	return args.OperationID
}

func final(s rivertype.JobState) bool {
	return s == rivertype.JobStateCompleted || s == rivertype.JobStateCancelled || s == rivertype.JobStateDiscarded
}

// verify checks the ledger against the orders.
func verify(ctx context.Context, rep *report, a appDB, db *sql.DB, l pagpolartest.Ledger, jobs []*rivertype.JobRow, stalled map[string]string, committed, rolledBack []string) {
	rep.Requests = len(l.Requests)
	for _, r := range l.Requests {
		if r.Fault != "" {
			rep.FaultsMet++
		}
	}
	rep.Double = len(l.Duplicates(pagpolartest.DefaultGroup))
	sales := map[string][]string{}
	for _, e := range l.Effects() {
		if e.Kind == "sale" && e.Successful {
			sales[e.ExternalReference] = append(sales[e.ExternalReference], e.ID)
		}
	}
	jobOrder, stalledOrder := map[string]bool{}, map[string]bool{}
	rep.Jobs = len(jobs)
	for _, j := range jobs {
		if j.State == rivertype.JobStateCompleted {
			rep.JobsCompleted++
		} else if _, ok := stalled[opOf(j)]; !ok {
			rep.Problems = append(rep.Problems, fmt.Sprintf("job %d %s: %s", j.ID, j.State, lastError(j)))
		}
		for _, e := range j.Errors {
			if strings.Contains(e.Error, "Stuck job rescued") {
				rep.RescuedJobs++
				break
			}
		}
		var args struct {
			OrderID     string `json:"order_id"`
			OperationID string `json:"operation_id"`
		}
		if err := json.Unmarshal(j.EncodedArgs, &args); err == nil {
			jobOrder[args.OrderID] = true
			if _, ok := stalled[args.OperationID]; ok {
				stalledOrder[args.OrderID] = true
			}
		}
	}
	for _, id := range committed {
		switch n := len(sales[id]); {
		case n == 0:
			rep.Lost++
		case n == 1:
			rep.ChargedOnce++
		}
		if stalledOrder[id] {
			continue // its row learns the sale when an operator settles it
		}
		var status string
		var saleID sql.NullString
		err := db.QueryRowContext(ctx, a.q(`SELECT status, sale_id FROM orders WHERE id = ?`), id).Scan(&status, &saleID)
		if err != nil || status != "charged" || len(sales[id]) != 1 || saleID.String != sales[id][0] {
			rep.RowsNotSettled++
		}
	}
	for _, id := range rolledBack {
		if len(sales[id]) > 0 {
			rep.RolledBackCharged++
		}
		if jobOrder[id] {
			rep.RolledBackJobs++
		}
	}
}

func lastError(j *rivertype.JobRow) string {
	if len(j.Errors) == 0 {
		return "no error recorded"
	}
	return j.Errors[len(j.Errors)-1].Error
}
