package pagpolar

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// One worker per operation (SAFETY rule 9): the lease on the record, taken
// at Create or by Acquire, renewed while the call waits, fenced by its
// token on every write.

// release gives the lease up when the call ends. A record stored in a
// terminal state needs no release: a worker waiting on it reads the outcome
// from the record even while the lease is held, so the write is saved. (An
// outcome that could not be stored leaves the lease to be released.)
func (e *exec) release(ctx context.Context) {
	if (e.storedTerminal && !e.undecided) || e.rec.LeaseToken == 0 {
		return
	}
	// Bounded by the caller's end plus DeadlineGrace (deadline.go): a
	// lease not given back expires by itself.
	ctx, cancel := e.c.graceCtx(ctx, 5*time.Second)
	defer cancel()
	_ = e.c.store.Release(ctx, e.rec.OperationID, e.rec.LeaseToken)
}

// renewIfAged extends the lease once a quarter of its TTL has passed since
// this call last obtained it. A younger lease cannot have expired (that
// would take a store clock running far ahead of ours), so the store write is
// skipped; before a resend the fencing check itself is the save's Update,
// which succeeds only with the current, unexpired lease.
func (e *exec) renewIfAged(ctx context.Context) error {
	if !e.leaseAt.IsZero() && e.c.clock.Now().Sub(e.leaseAt) < e.c.policy.LeaseTTL/4 {
		return nil
	}
	return e.renew(ctx)
}

// renewBefore extends the lease unless it will still hold after a wait of
// d and the token fetch and attempt that may follow it before the next
// check (each bounded by AttemptTimeout): the lease must outlast every
// stretch between renewals.
func (e *exec) renewBefore(ctx context.Context, d time.Duration) error {
	p := e.c.policy
	if !e.leaseAt.IsZero() && e.c.clock.Now().Sub(e.leaseAt)+d+2*p.AttemptTimeout < p.LeaseTTL {
		return nil
	}
	return e.renew(ctx)
}

// holdLease makes sure the call still holds its lease before a first send,
// after work (a snapshot) that may have outlasted it. A lease that merely
// expired, with the record unchanged since this call read it, is taken
// again; a record someone else changed means another worker is on it.
func (e *exec) holdLease(ctx context.Context) error {
	err := e.renewIfAged(ctx)
	if err == nil || !errors.Is(err, ErrLeaseLost) {
		return err
	}
	got, aerr := e.c.store.Acquire(ctx, e.rec.OperationID, e.owner, e.c.policy.LeaseTTL)
	switch {
	case aerr == nil && got.Version == e.rec.Version:
		e.rec.LeaseToken, e.rec.LeaseOwner, e.rec.LeaseExpiresAt = got.LeaseToken, got.LeaseOwner, got.LeaseExpiresAt
		e.leaseAt = e.c.clock.Now()
		e.noteLease(got)
		return nil
	case aerr == nil:
		_ = e.c.store.Release(ctx, got.OperationID, got.LeaseToken)
		return e.opErr(fmt.Errorf("%w: another worker changed the operation while this call prepared it; call again", ErrInProgress))
	case errors.Is(aerr, keystore.ErrLeaseHeld):
		return e.opErr(fmt.Errorf("%w: another worker took the operation over while this call prepared it", ErrInProgress))
	}
	return e.opErr(fmt.Errorf("%w: %w", ErrStoreUnavailable, aerr))
}

// renew checks and extends the lease.
func (e *exec) renew(ctx context.Context) error {
	now := e.c.clock.Now()
	got, err := e.c.store.Renew(ctx, e.rec.OperationID, e.rec.LeaseToken, e.c.policy.LeaseTTL)
	if err != nil {
		if errors.Is(err, keystore.ErrLeaseLost) {
			return e.opErr(fmt.Errorf("%w: the lease expired or another worker took the operation over; stopped before sending", ErrLeaseLost))
		}
		return e.opErr(fmt.Errorf("%w: %w", ErrStoreUnavailable, err))
	}
	if !sameRecord(e.rec, got) {
		// The token matched, but not the record: a store that lost the
		// record this call holds (emptied, restored) let another worker
		// create it again, whose first lease carries the same token. Its
		// record is its own; this call stops.
		return e.opErr(fmt.Errorf("%w: the record was created again since this call took it (the key store lost it: created %s, now %s); another worker holds the operation", ErrLeaseLost,
			e.rec.CreatedAt.UTC().Format(time.RFC3339Nano), got.CreatedAt.UTC().Format(time.RFC3339Nano)))
	}
	e.rec.LeaseExpiresAt = got.LeaseExpiresAt
	e.rec.Version = got.Version
	e.leaseAt = now
	e.noteLease(got)
	return nil
}

// noteLease reads the key store's clock off a lease it just granted: the
// store set LeaseExpiresAt to its own now plus the TTL.
func (e *exec) noteLease(rec keystore.Record) {
	if rec.LeaseExpiresAt.IsZero() {
		return
	}
	e.storeBase, e.storeAt = rec.LeaseExpiresAt.Add(-e.c.policy.LeaseTTL), e.c.clock.Now()
}

// storeNow is the key store's clock at client time now (a lower bound, by
// the round trip of the lease call), or zero if unknown.
func (e *exec) storeNow(now time.Time) time.Time {
	if e.storeBase.IsZero() {
		return time.Time{}
	}
	el := now.Sub(e.storeAt)
	if el < 0 {
		el = 0
	}
	return e.storeBase.Add(el)
}

// acquire takes the lease of an existing operation, waiting while another
// worker holds it. done reports that the operation reached a terminal state
// meanwhile (rec is then that state).
func (c *Client) acquire(ctx context.Context, storeID, opID, owner string) (rec keystore.Record, done bool, err error) {
	wait := c.policy.LeaseWaitInterval
	for {
		rec, err = c.store.Acquire(ctx, storeID, owner, c.policy.LeaseTTL)
		if err == nil {
			if rec.State.Terminal() {
				_ = c.store.Release(ctx, storeID, rec.LeaseToken)
				return rec, true, nil
			}
			return rec, false, nil
		}
		if !errors.Is(err, keystore.ErrLeaseHeld) {
			if ctx.Err() != nil {
				return rec, false, &OperationError{OperationID: opID, Key: rec.Key, State: rec.State, Err: fmt.Errorf("%w: %w", ErrInProgress, ctx.Err())}
			}
			return rec, false, &OperationError{OperationID: opID, Err: fmt.Errorf("%w: %w", ErrStoreUnavailable, err)}
		}
		if rec.State.Terminal() {
			return rec, true, nil
		}
		if c.orphans.take(storeID, rec.LeaseOwner) {
			// A call of this client that lost its store's reply left this
			// lease behind, and nobody else holds it: take it back under
			// that call's owner name (Acquire by the same owner fences the
			// old token).
			owner = rec.LeaseOwner
			continue
		}
		if serr := sleep(ctx, c.clock, wait); serr != nil {
			return rec, false, &OperationError{OperationID: opID, Key: rec.Key, State: rec.State, Err: fmt.Errorf("%w: %w", ErrInProgress, serr)}
		}
		if wait < 500*time.Millisecond {
			wait *= 2
		}
	}
}

// orphanLeases remembers leases that calls of this client may have been
// given by a Create whose reply was lost: the call gave up, sending
// nothing, but the record may exist with its lease for a whole TTL. A later
// call of the same client may take such a lease back at once instead of
// waiting it out (only this process can know that its own call is gone).
type orphanLeases struct {
	mu sync.Mutex
	m  map[string]string // store ID → owner name of the call that gave up
}

const maxOrphans = 10000

func (o *orphanLeases) add(storeID, owner string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[string]string{}
	}
	if len(o.m) >= maxOrphans {
		for k := range o.m { // forget one: waiting out a lease is always safe
			delete(o.m, k)
			break
		}
	}
	o.m[storeID] = owner
}

// take reports (once) whether owner's lease on storeID is an orphan of ours.
func (o *orphanLeases) take(storeID, owner string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if owner != "" && o.m[storeID] == owner {
		delete(o.m, storeID)
		return true
	}
	return false
}

// unrecordedOutcomes remembers settled outcomes this client could not
// write to its store (saveOutcome), so that its later calls answer them
// instead of settling the operation as if it were still in flight.
type unrecordedOutcomes struct {
	mu sync.Mutex
	m  map[string]keystore.Record
}

func (u *unrecordedOutcomes) remember(rec keystore.Record) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil {
		u.m = map[string]keystore.Record{}
	}
	if len(u.m) >= maxOrphans {
		for k := range u.m {
			delete(u.m, k)
			break
		}
	}
	u.m[rec.OperationID] = rec
}

func (u *unrecordedOutcomes) get(id string) (keystore.Record, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	r, ok := u.m[id]
	return r, ok
}

func (u *unrecordedOutcomes) forget(id string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.m, id)
}

// sameRecord reports whether got, returned by a lease renewal, is the
// record this call holds, held: a record keeps its creation time for life,
// so another one means the record was created again (under a token that
// starts over). The version is not compared: a save whose reply was lost
// may have bumped it, and the renewal is how the call learns it. A zero
// creation time (not read back from the store) is not compared.
func sameRecord(held, got keystore.Record) bool {
	return held.CreatedAt.IsZero() || got.CreatedAt.IsZero() || got.CreatedAt.Equal(held.CreatedAt)
}
