package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"time"

	"github.com/pagpolar/pagpolar-go"
)

// Permanent marks err as not worth retrying: the event goes dead at once
// (an operator can still Retry it).
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return "permanent: " + e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

var (
	errLeaseLost = errors.New("webhook: lease on the event lost")
	errShutdown  = errors.New("webhook: inbox shut down")
)

// worker runs queued keys until Shutdown.
func (in *Inbox) worker() {
	defer in.wg.Done()
	for {
		select {
		case <-in.stop:
			return
		default:
		}
		key, entity, ok := in.disp.pop()
		if !ok {
			select {
			case <-in.disp.avail:
				continue
			case <-in.stop:
				return
			}
		}
		in.process(key)
		in.disp.done(key, entity)
	}
}

// scanner queues due events (retries, crash leftovers, other processes'
// deliveries) every PollInterval.
func (in *Inbox) scanner() {
	defer in.wg.Done()
	for {
		in.scan()
		select {
		case <-in.stop:
			return
		case <-in.cfg.Clock.After(in.cfg.PollInterval):
		}
	}
}

// purger removes processed and dead events past retention at start and
// then every hour, beside the scanner, so that a long purge never delays
// due events.
func (in *Inbox) purger() {
	defer in.wg.Done()
	for {
		in.purge(in.cfg.Clock.Now())
		select {
		case <-in.stop:
			return
		case <-in.cfg.Clock.After(purgeInterval):
		}
	}
}

func (in *Inbox) storeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), storeTimeout)
}

func (in *Inbox) scan() {
	ctx, cancel := in.storeCtx()
	defer cancel()
	recs, err := in.cfg.Store.Due(ctx, scanBatch)
	if err != nil {
		in.log.Warn("webhook: cannot scan the store for due events", slog.Any("error", err))
		return
	}
	for _, r := range recs {
		in.disp.push(r.Key, r.Entity)
	}
}

// purge removes processed and dead events past retention, in small batches
// with a pause between them, and stops early on Shutdown.
func (in *Inbox) purge(now time.Time) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-in.stop:
			cancel()
		case <-stopped:
		}
	}()
	n, err := Reap(ctx, in.cfg.Store, ReapOptions{Retention: in.cfg.Retention, Now: now, Pause: purgePause, Clock: in.cfg.Clock})
	if err != nil && ctx.Err() == nil {
		in.log.Warn("webhook: cannot remove events past retention", slog.Int("removed", n), slog.Any("error", err))
	}
	if n > 0 {
		in.log.Info("webhook: removed processed and dead events past retention", slog.Int("count", n), slog.Duration("retention", in.cfg.Retention))
	}
}

// process claims key, runs its handler and records the outcome.
func (in *Inbox) process(key string) {
	ctx, cancel := in.storeCtx()
	rec, err := in.cfg.Store.Claim(ctx, key, in.cfg.Owner, in.cfg.LeaseTTL)
	cancel()
	switch {
	case errors.Is(err, ErrLeaseHeld), errors.Is(err, ErrEntityBusy), errors.Is(err, ErrWrongState), errors.Is(err, ErrNotFound):
		// Someone else has it, it is done, or its entity is busy elsewhere:
		// a later scan finds it again if it is still due.
		in.log.Debug("webhook: event not claimed", slog.String("key", key), slog.Any("reason", err))
		return
	case err != nil:
		in.log.Warn("webhook: cannot claim event", slog.String("key", key), slog.Any("error", err))
		return
	}
	log := in.log.With(slog.String("key", key), slog.String("event", rec.Event), slog.Int("attempt", rec.Attempts))
	if in.hctx.Err() != nil {
		// Shutdown ran out of time between the claim and the run: give the
		// event back untouched, without counting this attempt.
		in.complete(log, rec, Outcome{State: StateReceived, NotAttempted: true, Error: "handed back by shutdown before it ran"})
		return
	}
	if rec.Attempts > in.cfg.MaxAttempts {
		// Its last attempts never recorded an outcome (crashes or lost
		// leases): running it again could crash again.
		in.complete(log, rec, Outcome{State: StateDead, Error: fmt.Sprintf("gave up: %d attempts started, the last without an outcome", rec.Attempts-1)})
		return
	}
	ev, err := in.eventOf(rec)
	var perm *permanentError
	switch {
	case errors.Is(err, ErrPayloadKeyMissing) && rec.Attempts < in.cfg.MaxAttempts:
		// A configuration error (a key not given to this process): retry,
		// in case another process (or the next deploy) has the key.
		in.complete(log, rec, Outcome{State: StateError, RetryAfter: in.cfg.Backoff(rec.Attempts), Error: "stored payload cannot be opened: " + err.Error()})
		return
	case err != nil:
		in.complete(log, rec, Outcome{State: StateDead, Error: "stored payload unreadable: " + err.Error()})
		return
	}
	herr, cause := in.run(rec, ev)
	if herr != nil && !errors.Is(herr, errNoHandler) {
		log.Warn("webhook: handler failed", slog.Any("error", herr), slog.Any("cause", cause))
	}
	var out Outcome
	switch {
	case herr == nil:
		out = Outcome{State: StateProcessed}
	case errors.Is(herr, errNoHandler):
		out = Outcome{State: StateProcessed, Error: herr.Error()}
	case errors.Is(cause, errShutdown):
		// Not the event's fault: the attempt is given back, so deploys
		// that interrupt it never make it dead.
		out = Outcome{State: StateReceived, NotAttempted: true, Error: oneLine("interrupted by shutdown: " + herr.Error())}
	case errors.As(herr, &perm):
		out = Outcome{State: StateDead, Error: oneLine(herr.Error())}
	case rec.Attempts >= in.cfg.MaxAttempts:
		out = Outcome{State: StateDead, Error: oneLine(fmt.Sprintf("attempt %d of %d: %v", rec.Attempts, in.cfg.MaxAttempts, herr))}
	default:
		out = Outcome{State: StateError, RetryAfter: in.cfg.Backoff(rec.Attempts), Error: oneLine(herr.Error())}
	}
	in.complete(log, rec, out)
}

var errNoHandler = errors.New("no handler for this event: recorded without processing")

// run calls the handler under a lease kept alive every LeaseTTL/3. cause
// says why the handler's context ended early, if it did.
func (in *Inbox) run(rec Record, ev *Event) (herr, cause error) {
	h := in.cfg.Handlers[ev.Name]
	if h == nil {
		h = in.cfg.Default
	}
	if in.cfg.Settle != nil && !ev.Envelope.Test && !strings.HasPrefix(ev.Key, "test:") {
		handler := h
		h = func(ctx context.Context, ev *Event) error {
			// Best effort, and never in the way of the handler: an operation a
			// worker holds is that worker's to settle (by lookup), and a store
			// error leaves the operation for the next event, Resume or call.
			if _, err := in.cfg.Settle.SettleFromWebhook(ctx, ev.Raw); errors.Is(err, pagpolar.ErrInProgress) {
				in.offerLater(ev.Key, ev.Raw)
			} else if err != nil {
				in.log.Info("webhook: the client operations this event may settle were left as they are", slog.String("key", ev.Key), slog.Any("error", err))
			}
			if handler == nil {
				return errNoHandler
			}
			return handler(ctx, ev)
		}
	}
	if h == nil {
		return errNoHandler, nil
	}
	hctx, hcancel := context.WithCancelCause(in.hctx)
	defer hcancel(nil)
	if in.cfg.HandlerTimeout > 0 {
		var c context.CancelFunc
		hctx, c = context.WithTimeout(hctx, in.cfg.HandlerTimeout)
		defer c()
	}
	// The lease is kept until the handler has really returned, not until its
	// context ends: a handler that overruns HandlerTimeout (or a shutdown)
	// and keeps running must not let another process claim and run the
	// same event beside it.
	lctx, lcancel := context.WithCancel(context.Background())
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		in.keepLease(lctx, hcancel, rec)
	}()
	herr = call(hctx, h, ev)
	if in.hctx.Err() != nil {
		cause = errShutdown
	} else {
		cause = context.Cause(hctx)
	}
	hcancel(nil)
	lcancel()
	<-renewed
	return herr, cause
}

// keepLease renews the lease until ctx ends; a lost lease cancels the handler.
func (in *Inbox) keepLease(ctx context.Context, cancel context.CancelCauseFunc, rec Record) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-in.cfg.Clock.After(in.cfg.LeaseTTL / 3):
		}
		sctx, c := in.storeCtx()
		_, err := in.cfg.Store.Renew(sctx, rec.Key, rec.LeaseToken, in.cfg.LeaseTTL)
		c()
		switch {
		case errors.Is(err, ErrLeaseLost), errors.Is(err, ErrNotFound):
			in.log.Warn("webhook: lease lost while the handler ran; cancelling it", slog.String("key", rec.Key))
			cancel(errLeaseLost)
			return
		case err != nil:
			// The next renewal tries again; if the lease expires meanwhile,
			// it reports the loss.
			in.log.Warn("webhook: cannot renew lease", slog.String("key", rec.Key), slog.Any("error", err))
		}
	}
}

func call(ctx context.Context, h HandlerFunc, ev *Event) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("handler panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return h(ctx, ev)
}

// complete records out, retrying briefly: an outcome that is not recorded
// lets the lease expire and the event run again.
func (in *Inbox) complete(log *slog.Logger, rec Record, out Outcome) {
	var err error
	for i := range 3 {
		if i > 0 {
			<-in.cfg.Clock.After(time.Duration(i) * time.Second)
		}
		ctx, cancel := in.storeCtx()
		var stored Record
		stored, err = in.cfg.Store.Complete(ctx, rec.Key, rec.LeaseToken, out)
		cancel()
		if err == nil {
			in.logOutcome(log, stored)
			if in.cfg.OnOutcome != nil {
				in.cfg.OnOutcome(stored)
			}
			return
		}
		if errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrNotFound) {
			// Another worker took the event over after our lease expired:
			// its run's outcome is the one that counts.
			log.Warn("webhook: outcome not recorded: the event was taken over by another worker",
				slog.String("outcome", string(out.State)), slog.Any("error", err))
			return
		}
	}
	log.Error("webhook: cannot record the outcome; the event will run again once its lease expires",
		slog.String("outcome", string(out.State)), slog.Any("error", err))
}

func (in *Inbox) logOutcome(log *slog.Logger, r Record) {
	switch r.State {
	case StateProcessed:
		log.Debug("webhook: event processed")
	case StateReceived:
		log.Info("webhook: event handed back", slog.String("reason", r.LastError))
	case StateError:
		log.Warn("webhook: event failed; will retry", slog.String("error", r.LastError), slog.Time("next_attempt_at", r.NextAttemptAt))
	case StateDead:
		log.Error("webhook: event dead; retry it by hand once fixed", slog.String("error", r.LastError))
	}
}

func (in *Inbox) eventOf(rec Record) (*Event, error) {
	body, err := in.sealer.open(rec.Key, rec.Payload)
	if err != nil {
		return nil, err
	}
	env, err := ParseEnvelope(body)
	if err != nil {
		return nil, err
	}
	return &Event{
		Name: env.Event, Envelope: *env, Key: rec.Key, Attempt: rec.Attempts,
		Deliveries: rec.Deliveries, ReceivedAt: rec.ReceivedAt,
		Test: env.Test || strings.HasPrefix(rec.Key, "test:"), Raw: body,
	}, nil
}

// oneLine keeps LastError to one bounded line (a panic's stack is logged by
// the caller's error, not stored).
func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	const max = 500
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}
