package webhook

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"
)

// MemoryStore is an in-process Store for tests and examples only: a restart
// forgets every key, which is how a webhook ends up processed twice (the
// PayZu page lists "dedupe em memória" as a pitfall). It enforces the full
// Store contract, with its own clock as the store's clock.
type MemoryStore struct {
	mu       sync.Mutex
	recs     map[string]*Record
	byEntity map[string]map[string]struct{}
	now      func() time.Time
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore whose clock is the system's.
func NewMemoryStore() *MemoryStore { return NewMemoryStoreWithClock(systemClock{}) }

// NewMemoryStoreWithClock returns an empty MemoryStore whose clock (lease
// expiry, due times, timestamps) is c: tests give it the Inbox's test clock
// so that moving one moves both.
func NewMemoryStoreWithClock(c Clock) *MemoryStore {
	return &MemoryStore{
		recs: make(map[string]*Record), byEntity: make(map[string]map[string]struct{}),
		// Microseconds, in UTC, as the durable stores keep them.
		now: func() time.Time { return c.Now().UTC().Truncate(time.Microsecond) },
	}
}

func cloneRecord(r Record) Record {
	r.Payload = append([]byte(nil), r.Payload...)
	return r
}

func memCheck(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

// Insert implements Store.
func (m *MemoryStore) Insert(ctx context.Context, rec Record) (Record, bool, error) {
	if err := memCheck(ctx); err != nil {
		return Record{}, false, err
	}
	if rec.Key == "" {
		return Record{}, false, fmt.Errorf("webhook: Insert: key: empty")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.recs[rec.Key]; ok {
		cur.Deliveries++
		return cloneRecord(*cur), false, nil
	}
	now := m.now()
	r := Record{
		Key: rec.Key, Event: rec.Event, Entity: rec.Entity, EnvelopeID: rec.EnvelopeID,
		Payload: rec.Payload, State: StateReceived, Deliveries: 1,
		NextAttemptAt: now, ReceivedAt: now, UpdatedAt: now,
	}
	r = cloneRecord(r)
	m.recs[r.Key] = &r
	keys := m.byEntity[r.Entity]
	if keys == nil {
		keys = make(map[string]struct{})
		m.byEntity[r.Entity] = keys
	}
	keys[r.Key] = struct{}{}
	return cloneRecord(r), true, nil
}

// Get implements Store.
func (m *MemoryStore) Get(ctx context.Context, key string) (Record, error) {
	if err := memCheck(ctx); err != nil {
		return Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.recs[key]
	if !ok {
		return Record{}, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	return cloneRecord(*cur), nil
}

// Claim implements Store.
func (m *MemoryStore) Claim(ctx context.Context, key, owner string, ttl time.Duration) (Record, error) {
	if err := memCheck(ctx); err != nil {
		return Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	cur, ok := m.recs[key]
	switch {
	case !ok:
		return Record{}, fmt.Errorf("%w: %s", ErrNotFound, key)
	case LiveLease(*cur, now):
		return cloneRecord(*cur), fmt.Errorf("%w: %s", ErrLeaseHeld, key)
	case !Claimable(*cur, now):
		return cloneRecord(*cur), fmt.Errorf("%w: %s is %s", ErrWrongState, key, cur.State)
	}
	for other := range m.byEntity[cur.Entity] {
		if other != key && LiveLease(*m.recs[other], now) {
			return cloneRecord(*cur), fmt.Errorf("%w: %s (%s is processing)", ErrEntityBusy, key, other)
		}
	}
	cur.State = StateProcessing
	cur.Attempts++
	cur.LeaseOwner, cur.LeaseToken, cur.LeaseExpiresAt = owner, cur.LeaseToken+1, now.Add(ttl)
	cur.UpdatedAt = now
	return cloneRecord(*cur), nil
}

// Renew implements Store.
func (m *MemoryStore) Renew(ctx context.Context, key string, token int64, ttl time.Duration) (Record, error) {
	if err := memCheck(ctx); err != nil {
		return Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	cur, ok := m.recs[key]
	if !ok {
		return Record{}, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	if cur.LeaseToken != token || !LiveLease(*cur, now) {
		return cloneRecord(*cur), fmt.Errorf("%w: %s", ErrLeaseLost, key)
	}
	cur.LeaseExpiresAt = now.Add(ttl)
	return cloneRecord(*cur), nil
}

// Complete implements Store.
func (m *MemoryStore) Complete(ctx context.Context, key string, token int64, out Outcome) (Record, error) {
	if err := memCheck(ctx); err != nil {
		return Record{}, err
	}
	if err := out.Check(); err != nil {
		return Record{}, fmt.Errorf("webhook: Complete %s: %w", key, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	cur, ok := m.recs[key]
	if !ok {
		return Record{}, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	if cur.LeaseToken != token || cur.State != StateProcessing {
		return cloneRecord(*cur), fmt.Errorf("%w: %s", ErrLeaseLost, key)
	}
	cur.State = out.State
	if out.Error != "" {
		cur.LastError = out.Error
	}
	cur.NextAttemptAt = time.Time{}
	if out.State == StateReceived || out.State == StateError {
		cur.NextAttemptAt = now.Add(out.RetryAfter)
	}
	if out.NotAttempted && cur.Attempts > 0 {
		cur.Attempts--
	}
	cur.LeaseOwner, cur.LeaseExpiresAt = "", time.Time{}
	cur.UpdatedAt = now
	return cloneRecord(*cur), nil
}

// Due implements Store.
func (m *MemoryStore) Due(ctx context.Context, limit int) ([]Record, error) {
	if err := memCheck(ctx); err != nil {
		return nil, err
	}
	m.mu.Lock()
	now := m.now()
	var out []Record
	for _, r := range m.recs {
		due := (r.State == StateReceived || r.State == StateError) && !now.Before(r.NextAttemptAt) ||
			r.State == StateProcessing && !now.Before(r.LeaseExpiresAt)
		if due {
			out = append(out, cloneRecord(*r))
		}
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		di, dj := dueAt(out[i]), dueAt(out[j])
		if !di.Equal(dj) {
			return di.Before(dj)
		}
		return out[i].Key < out[j].Key
	})
	if limit <= 0 {
		limit = DefaultListLimit
	}
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// List implements Store.
func (m *MemoryStore) List(ctx context.Context, f Filter) ([]Record, error) {
	if err := memCheck(ctx); err != nil {
		return nil, err
	}
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	m.mu.Lock()
	var out []Record
	for _, r := range m.recs {
		if matchFilter(r, f) {
			out = append(out, cloneRecord(*r))
		}
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].UpdatedAt.Equal(out[j].UpdatedAt) {
			return out[i].UpdatedAt.Before(out[j].UpdatedAt)
		}
		return out[i].Key < out[j].Key
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func matchFilter(r *Record, f Filter) bool {
	if len(f.States) > 0 {
		ok := slices.Contains(f.States, r.State)
		if !ok {
			return false
		}
	}
	return f.UpdatedBefore.IsZero() || r.UpdatedAt.Before(f.UpdatedBefore)
}

// Retry implements Store.
func (m *MemoryStore) Retry(ctx context.Context, key string) (Record, error) {
	if err := memCheck(ctx); err != nil {
		return Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	cur, ok := m.recs[key]
	if !ok {
		return Record{}, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	if cur.State != StateDead && cur.State != StateError {
		return cloneRecord(*cur), fmt.Errorf("%w: %s is %s", ErrWrongState, key, cur.State)
	}
	cur.State, cur.Attempts, cur.NextAttemptAt, cur.UpdatedAt = StateReceived, 0, now, now
	return cloneRecord(*cur), nil
}

// DeleteExpired implements Store.
func (m *MemoryStore) DeleteExpired(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := memCheck(ctx); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var old []*Record
	for _, r := range m.recs {
		if (r.State == StateProcessed || r.State == StateDead) && r.UpdatedAt.Before(before) {
			old = append(old, r)
		}
	}
	sort.Slice(old, func(i, j int) bool {
		if !old[i].UpdatedAt.Equal(old[j].UpdatedAt) {
			return old[i].UpdatedAt.Before(old[j].UpdatedAt)
		}
		return old[i].Key < old[j].Key
	})
	n := 0
	for _, r := range old {
		if n >= limit {
			break
		}
		delete(m.recs, r.Key)
		delete(m.byEntity[r.Entity], r.Key)
		if len(m.byEntity[r.Entity]) == 0 {
			delete(m.byEntity, r.Entity)
		}
		n++
	}
	return n, nil
}

// dueAt is when a pending record became due.
func dueAt(r Record) time.Time {
	if r.State == StateProcessing {
		return r.LeaseExpiresAt
	}
	return r.NextAttemptAt
}
