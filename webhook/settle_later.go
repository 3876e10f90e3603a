package webhook

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/pagpolar/pagpolar-go"
)

// Settling later. An event can arrive while the operation it carries the
// effect of is held by the worker still running its call: a
// TRANSACTION_CREATED comes right after the commit, while the caller waits
// for an answer or looks it up. Config.Settle leaves a held operation to
// its worker; but when that call then ends "outcome unknown" (no reliable
// lookup, an answer it could not verify), the event would already have
// been processed and nothing would settle the operation. So an event whose
// operations were held is kept in memory and offered to Settle again —
// settling only, never the handler, never a request — after 2 s, then
// twice as long each time up to 2 min, 10 times in all (about 10 min, past
// the SDK's default lease and settle wait). The queue holds at most
// maxSettleLater events; it is lost on restart, where Client.Resume,
// ResumeAll and `pagpolar ops settle` still settle by lookup.

const (
	maxSettleLater   = 1000
	settleLaterFirst = 2 * time.Second
	settleLaterMax   = 2 * time.Minute
	settleLaterTries = 10
)

type laterEvent struct {
	key   string
	raw   []byte
	due   time.Time
	tries int // offers made so far, the first (in process) included
}

// settleLater is the in-memory queue of events to offer Settle again.
type settleLater struct {
	mu    sync.Mutex
	items []laterEvent
	wake  chan struct{} // a new item may be due sooner
}

func newSettleLater() *settleLater { return &settleLater{wake: make(chan struct{}, 1)} }

// add queues raw (copied) for another offer; it reports whether an older
// event had to be dropped to make room.
func (q *settleLater) add(key string, raw []byte, now time.Time) (dropped string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i := range q.items {
		if q.items[i].key == key {
			return "" // already waiting (a redelivery of the same event)
		}
	}
	if len(q.items) >= maxSettleLater {
		dropped = q.items[0].key
		q.items = q.items[1:]
	}
	q.items = append(q.items, laterEvent{key: key, raw: append([]byte(nil), raw...), due: now.Add(settleLaterFirst), tries: 1})
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return dropped
}

// due removes and returns the items due at now, and the time the next
// remaining one is due (zero if none).
func (q *settleLater) due(now time.Time) (out []laterEvent, next time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	keep := q.items[:0]
	for _, it := range q.items {
		if !it.due.After(now) {
			out = append(out, it)
			continue
		}
		keep = append(keep, it)
		if next.IsZero() || it.due.Before(next) {
			next = it.due
		}
	}
	q.items = keep
	return out, next
}

// again puts it back for one more offer, if it has tries left.
func (q *settleLater) again(it laterEvent, now time.Time) bool {
	if it.tries >= settleLaterTries {
		return false
	}
	d := settleLaterFirst << (it.tries - 1)
	if d > settleLaterMax || d <= 0 {
		d = settleLaterMax
	}
	it.tries++
	it.due = now.Add(d)
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) >= maxSettleLater {
		return false
	}
	q.items = append(q.items, it)
	return true
}

func (q *settleLater) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// offerLater queues an event whose operations were held.
func (in *Inbox) offerLater(key string, raw []byte) {
	if dropped := in.later.add(key, raw, in.cfg.Clock.Now()); dropped != "" {
		in.log.Warn("webhook: too many events wait to settle held operations; the oldest is dropped (Resume or ops settle still settle it)", slog.String("key", dropped))
	}
}

// settler offers queued events to Settle again when they are due, until
// Shutdown. Each wait is bounded by PollInterval.
func (in *Inbox) settler() {
	defer in.wg.Done()
	for {
		now := in.cfg.Clock.Now()
		items, next := in.later.due(now)
		for _, it := range items {
			select {
			case <-in.stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(in.hctx, storeTimeout)
			_, err := in.cfg.Settle.SettleFromWebhook(ctx, it.raw)
			cancel()
			switch {
			case errors.Is(err, pagpolar.ErrInProgress):
				if !in.later.again(it, in.cfg.Clock.Now()) {
					in.log.Info("webhook: operations this event may settle stayed held by a worker; left to it (and to Resume or ops settle)", slog.String("key", it.key), slog.Int("offers", it.tries))
				}
			case err != nil:
				in.log.Info("webhook: the client operations this event may settle were left as they are", slog.String("key", it.key), slog.Any("error", err))
			default:
				in.log.Debug("webhook: an event offered again settled what it could", slog.String("key", it.key), slog.Int("offers", it.tries+1))
			}
		}
		wait := in.cfg.PollInterval
		if !next.IsZero() {
			if d := next.Sub(in.cfg.Clock.Now()); d < wait {
				wait = max(d, time.Millisecond)
			}
		}
		select {
		case <-in.stop:
			return
		case <-in.later.wake:
		case <-in.cfg.Clock.After(wait):
		}
	}
}
