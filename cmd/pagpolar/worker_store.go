// The worker's store: opened with retries while it is down, and watched
// (storeWatch) so that a worker waits an outage out and reports how many
// store calls failed.

package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/storeurl"
)

// storeBackoff is the pause between two tries of a store that is away:
// from 100 ms, doubling, up to 2 s.
func storeBackoff(prev time.Duration) time.Duration {
	if prev <= 0 {
		return 100 * time.Millisecond
	}
	return min(2*prev, 2*time.Second)
}

// sleepCtx waits d or until ctx ends; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// openStoreWaiting opens the store, trying again with backoff while it is
// unavailable (a restarted worker must not die of a store outage), until
// ctx ends. It tells the parent how long it waited.
func openStoreWaiting(ctx context.Context, raw string, out *lineWriter) (keystore.Store, func() error, error) {
	start := time.Now()
	var pause time.Duration
	for {
		s, closeFn, err := storeurl.Open(ctx, raw)
		if err == nil {
			if pause > 0 {
				out.write(workerMsg{T: "store", WaitedMS: time.Since(start).Milliseconds()})
			}
			return s, closeFn, nil
		}
		if !errors.Is(err, keystore.ErrUnavailable) || errors.Is(err, keystore.ErrAmnesia) {
			return nil, nil, err
		}
		pause = storeBackoff(pause)
		if !sleepCtx(ctx, pause) {
			return nil, nil, fmt.Errorf("%w (waited %v for the store)", err, time.Since(start).Round(time.Millisecond))
		}
	}
}

// storeWatch passes every call to the store and notes whether the store
// answered: a call that failed as unavailable (not for amnesia) marks it
// down, any answer marks it up. It changes no answer.
type storeWatch struct {
	keystore.Store
	down  atomic.Bool
	fails atomic.Int64
	probe sync.Mutex // one goroutine probes; the others wait for it
}

func (w *storeWatch) note(ctx context.Context, err error) {
	switch {
	case ctx.Err() != nil:
		// The caller gave up: that says nothing about the store.
	case err != nil && errors.Is(err, keystore.ErrUnavailable) && !errors.Is(err, keystore.ErrAmnesia):
		w.fails.Add(1)
		w.down.Store(true)
	default:
		w.down.Store(false)
	}
}

func (w *storeWatch) failures() int64 { return w.fails.Load() }

// waitUp returns at once while the store answers; after calls failed as
// unavailable it probes the store with backoff until it answers (or ctx
// ends) and tells the parent how long it waited. Goroutines arriving
// meanwhile wait for the one probing.
func (w *storeWatch) waitUp(ctx context.Context, out *lineWriter) {
	if !w.down.Load() {
		return
	}
	w.probe.Lock()
	defer w.probe.Unlock()
	start := time.Now()
	var pause time.Duration
	for w.down.Load() && ctx.Err() == nil {
		_, err := w.Store.Get(ctx, probeID)
		if err == nil || errors.Is(err, keystore.ErrNotFound) {
			w.down.Store(false)
			out.write(workerMsg{T: "store", WaitedMS: time.Since(start).Milliseconds()})
			return
		}
		pause = storeBackoff(pause)
		sleepCtx(ctx, pause)
	}
}

func (w *storeWatch) Create(ctx context.Context, r keystore.Record, owner string, ttl time.Duration) (keystore.Record, error) {
	got, err := w.Store.Create(ctx, r, owner, ttl)
	w.note(ctx, err)
	return got, err
}

func (w *storeWatch) Get(ctx context.Context, id string) (keystore.Record, error) {
	got, err := w.Store.Get(ctx, id)
	w.note(ctx, err)
	return got, err
}

func (w *storeWatch) Acquire(ctx context.Context, id, owner string, ttl time.Duration) (keystore.Record, error) {
	got, err := w.Store.Acquire(ctx, id, owner, ttl)
	w.note(ctx, err)
	return got, err
}

func (w *storeWatch) Renew(ctx context.Context, id string, token int64, ttl time.Duration) (keystore.Record, error) {
	got, err := w.Store.Renew(ctx, id, token, ttl)
	w.note(ctx, err)
	return got, err
}

func (w *storeWatch) Release(ctx context.Context, id string, token int64) error {
	err := w.Store.Release(ctx, id, token)
	w.note(ctx, err)
	return err
}

func (w *storeWatch) Update(ctx context.Context, r keystore.Record) (keystore.Record, error) {
	got, err := w.Store.Update(ctx, r)
	w.note(ctx, err)
	return got, err
}

func (w *storeWatch) List(ctx context.Context, f keystore.Filter) ([]keystore.Record, error) {
	got, err := w.Store.List(ctx, f)
	w.note(ctx, err)
	return got, err
}

func (w *storeWatch) DeleteExpired(ctx context.Context, before time.Time, limit int) (int, error) {
	n, err := w.Store.DeleteExpired(ctx, before, limit)
	w.note(ctx, err)
	return n, err
}

// Amnesia and AcceptLoss pass through to a store that implements
// keystore.AmnesiaGuard.
func (w *storeWatch) Amnesia(ctx context.Context) (keystore.AmnesiaReport, error) {
	g, ok := w.Store.(keystore.AmnesiaGuard)
	if !ok {
		return keystore.AmnesiaReport{}, fmt.Errorf("%T does not detect amnesia", w.Store)
	}
	return g.Amnesia(ctx)
}

func (w *storeWatch) AcceptLoss(ctx context.Context, note string) error {
	g, ok := w.Store.(keystore.AmnesiaGuard)
	if !ok {
		return fmt.Errorf("%T does not detect amnesia", w.Store)
	}
	return g.AcceptLoss(ctx, note)
}

// History and DeclareNew pass through to a store that implements
// keystore.HistoryProver. A wrapper that hid it would make the engine take
// the store as proven (SAFETY rule 13): a worker started after its store
// forgot everything (a Redis restarted without persistence) would then send
// the first sends of operations whose records were lost without looking
// them up first, and charge twice those whose key the API had released.
func (w *storeWatch) History(ctx context.Context) (keystore.History, error) {
	hp, ok := w.Store.(keystore.HistoryProver)
	if !ok {
		return keystore.History{}, nil // what the engine takes a store without HistoryProver for
	}
	h, err := hp.History(ctx)
	w.note(ctx, err)
	return h, err
}

func (w *storeWatch) DeclareNew(ctx context.Context, note string) error {
	hp, ok := w.Store.(keystore.HistoryProver)
	if !ok {
		return fmt.Errorf("%T cannot prove its history", w.Store)
	}
	return hp.DeclareNew(ctx, note)
}

// The wrapper must show the engine everything the store can tell it.
var (
	_ keystore.AmnesiaGuard  = (*storeWatch)(nil)
	_ keystore.HistoryProver = (*storeWatch)(nil)
)

// probeID is an operation ID no order uses, read to see the store answer.
const probeID = "pagpolar-chaos/store-probe"
