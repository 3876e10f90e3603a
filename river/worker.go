package pagpolarriver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"

	pagpolar "github.com/pagpolar/pagpolar-go"
)

// Config configures the workers AddWorkers registers. TTx is the River
// client's transaction type: *sql.Tx (riverdatabasesql, riversqlite) or
// pgx.Tx (riverpgxv5).
type Config[TTx any] struct {
	// Client runs the operations (required). Its key store must be
	// durable and shared by every worker process (PostgreSQL, or a SQLite
	// file for the processes of one host): it is what makes a job that
	// River runs twice one operation.
	Client *pagpolar.Client

	// Resolver loads the payer of a charge or subscribe intent (required
	// when such intents are inserted).
	Resolver Resolver

	// OnSettled, if set, runs when an operation succeeded, in the
	// transaction that completes the job: the order's row learns its sale
	// in the same commit as the job ends, or in neither. An error rolls
	// both back and the job runs again later; the SDK answers it from its
	// record, without sending. OnSettled must use tx for its writes.
	OnSettled func(ctx context.Context, tx TTx, r Result) error

	// Backoff is the snooze after a job's n-th snooze (DefaultBackoff if
	// nil). A lost answer waits at least until a lookup is conclusive.
	Backoff func(n int) time.Duration

	// Logger receives a line per cancelled or snoozed job; cancellations
	// that need someone (a params mismatch, invalid params, a payer gone)
	// at level Error. Default slog.Default().
	Logger *slog.Logger

	// Now is the clock verdicts are taken on (time.Now if nil).
	Now func() time.Time
}

// AddWorkers registers the workers of every intent kind on workers, which
// is then given to river.NewClient (Config.Workers) of type TTx.
func AddWorkers[TTx any](workers *river.Workers, cfg Config[TTx]) error {
	if workers == nil {
		return errors.New("pagpolarriver: AddWorkers: workers is nil")
	}
	if cfg.Client == nil {
		return errors.New("pagpolarriver: AddWorkers: Config.Client is required")
	}
	if cfg.Backoff == nil {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return errors.Join(
		river.AddWorkerSafely(workers, &worker[TTx, PixIntent]{cfg: &cfg}),
		river.AddWorkerSafely(workers, &worker[TTx, BoletoIntent]{cfg: &cfg}),
		river.AddWorkerSafely(workers, &worker[TTx, CreditCardIntent]{cfg: &cfg}),
		river.AddWorkerSafely(workers, &worker[TTx, SubscribeIntent]{cfg: &cfg}),
		river.AddWorkerSafely(workers, &worker[TTx, PlanChangeIntent]{cfg: &cfg}),
		river.AddWorkerSafely(workers, &worker[TTx, RefundIntent]{cfg: &cfg}),
	)
}

type worker[TTx any, A Intent] struct {
	river.WorkerDefaults[A]
	cfg *Config[TTx]
}

// Work runs the intent's operation and tells River what became of it.
func (w *worker[TTx, A]) Work(ctx context.Context, job *river.Job[A]) error {
	log := w.cfg.Logger.With("job", job.ID, "kind", job.Kind, "op", job.Args.OperationIDOf())
	res, err := job.Args.run(ctx, w.cfg.Client, w.cfg.Resolver)
	snoozes := snoozeCount(job.Metadata)
	v := verdictOf(err, w.cfg.Now(), snoozes, snoozes == 0 && job.Attempt <= 1, w.cfg.Backoff)
	switch v.act {
	case complete:
		res.JobID = job.ID
		if err := w.settle(ctx, job, res); err != nil {
			// The effect exists and the SDK has it recorded; only the
			// application's row is behind. The next run answers from the
			// record (no request) and calls OnSettled again.
			d := w.cfg.Backoff(snoozes)
			log.ErrorContext(ctx, "pagpolarriver: operation succeeded; OnSettled or the job's completion failed, running it again", "err", err, "after", d)
			return river.JobSnooze(d)
		}
		return nil
	case cancel:
		log.WarnContext(ctx, "pagpolarriver: operation failed; job cancelled", "err", err)
		return river.JobCancel(fmt.Errorf("pagpolarriver: operation %q failed: %w", job.Args.OperationIDOf(), err))
	case cancelLoud:
		log.ErrorContext(ctx, "pagpolarriver: intent cannot run; job cancelled, it needs a person", "err", err)
		return river.JobCancel(fmt.Errorf("pagpolarriver: operation %q cannot run: %w", job.Args.OperationIDOf(), err))
	case snooze:
		log.WarnContext(ctx, "pagpolarriver: operation not settled; snoozing, same operation ID", "err", err, "after", v.delay)
		return river.JobSnooze(v.delay)
	}
	return fmt.Errorf("pagpolarriver: operation %q not executed: %w", job.Args.OperationIDOf(), err)
}

// settleTimeout bounds the completion transaction. It runs on a context
// of its own: the operation has succeeded, and a job timeout that the
// call used up must not throw its completion away (the job would run
// again only to be answered from the SDK's record). A job River rescued
// meanwhile is completed once: the second completion finds it completed
// and rolls its OnSettled back.
const settleTimeout = 30 * time.Second

// settle completes the job, running OnSettled in the same transaction.
// Without OnSettled, returning nil lets River complete it.
func (w *worker[TTx, A]) settle(jobCtx context.Context, job *river.Job[A], res Result) error {
	if w.cfg.OnSettled == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(jobCtx), settleTimeout)
	defer cancel()
	client := river.ClientFromContext[TTx](ctx)
	drv := client.Driver()
	etx, err := drv.GetExecutor().Begin(ctx)
	if err != nil {
		return fmt.Errorf("beginning the completion transaction: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = etx.Rollback(ctx)
		}
	}()
	tx := drv.UnwrapTx(etx)
	if err := w.cfg.OnSettled(ctx, tx, res); err != nil {
		return fmt.Errorf("OnSettled: %w", err)
	}
	if _, err := river.JobCompleteTx[riverdriver.Driver[TTx]](ctx, tx, job); err != nil {
		return fmt.Errorf("completing the job: %w", err)
	}
	if err := etx.Commit(ctx); err != nil {
		return fmt.Errorf("committing the completion: %w", err)
	}
	committed = true
	return nil
}

// snoozeCount is how many times River snoozed the job before (its
// metadata's "snoozes").
func snoozeCount(metadata []byte) int {
	var m struct {
		Snoozes int `json:"snoozes"`
	}
	_ = json.Unmarshal(metadata, &m)
	return m.Snoozes
}
