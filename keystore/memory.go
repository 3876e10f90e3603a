package keystore

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Memory is an in-process Store for tests and examples only: a restart
// forgets every key, which is exactly how integrations charge twice (the
// PayZu page lists "dedupe em memória" as a pitfall). It enforces the full
// Store contract so that tests written against it hold for durable stores.
type Memory struct {
	mu    sync.Mutex
	recs  map[string]*Record
	clock Clock
	amn   memAmnesia
}

var (
	_ Store         = (*Memory)(nil)
	_ AmnesiaGuard  = (*Memory)(nil)
	_ HistoryProver = (*Memory)(nil)
)

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// NewMemory returns an empty Memory store using the system clock.
func NewMemory() *Memory { return NewMemoryWithClock(systemClock{}) }

// NewMemoryWithClock returns an empty Memory store whose lease expiry and
// timestamps follow c (tests move time with it).
func NewMemoryWithClock(c Clock) *Memory {
	m := &Memory{recs: make(map[string]*Record), clock: c}
	m.amn.init()
	return m
}

func clone(r Record) Record {
	r.Result = append([]byte(nil), r.Result...)
	r.Meta = append([]byte(nil), r.Meta...)
	return r
}

func checkCtx(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

// Create implements Store.
func (m *Memory) Create(ctx context.Context, rec Record, owner string, ttl time.Duration) (Record, error) {
	if err := checkCtx(ctx); err != nil {
		return Record{}, err
	}
	if rec.OperationID == "" {
		return Record{}, fmt.Errorf("keystore: empty operation ID")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.recs[rec.OperationID]; ok {
		return clone(*cur), fmt.Errorf("%w: %s", ErrExists, rec.OperationID)
	}
	now := m.clock.Now()
	if err := m.checkAmnesia(now); err != nil {
		return Record{}, fmt.Errorf("keystore: create %s: %w", rec.OperationID, err)
	}
	r := clone(rec)
	if r.State == "" {
		r.State = StatePending
	}
	r.Version = 1
	r.CreatedAt, r.UpdatedAt = now, now
	r.LeaseOwner, r.LeaseToken, r.LeaseExpiresAt = owner, 1, now.Add(ttl)
	m.recs[r.OperationID] = &r
	m.amn.lastID, m.amn.lastCreated = r.OperationID, now
	return clone(r), nil
}

// Get implements Store.
func (m *Memory) Get(ctx context.Context, id string) (Record, error) {
	if err := checkCtx(ctx); err != nil {
		return Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.recs[id]
	if !ok {
		return Record{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return clone(*cur), nil
}

// Acquire implements Store.
func (m *Memory) Acquire(ctx context.Context, id, owner string, ttl time.Duration) (Record, error) {
	if err := checkCtx(ctx); err != nil {
		return Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.recs[id]
	if !ok {
		return Record{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	now := m.clock.Now()
	if cur.LeaseOwner != "" && cur.LeaseOwner != owner && now.Before(cur.LeaseExpiresAt) {
		return clone(*cur), fmt.Errorf("%w: %s", ErrLeaseHeld, id)
	}
	cur.LeaseOwner, cur.LeaseToken, cur.LeaseExpiresAt = owner, cur.LeaseToken+1, now.Add(ttl)
	return clone(*cur), nil
}

// Renew implements Store.
func (m *Memory) Renew(ctx context.Context, id string, token int64, ttl time.Duration) (Record, error) {
	if err := checkCtx(ctx); err != nil {
		return Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.recs[id]
	if !ok {
		return Record{}, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	now := m.clock.Now()
	if cur.LeaseToken != token || !now.Before(cur.LeaseExpiresAt) {
		return clone(*cur), fmt.Errorf("%w: %s", ErrLeaseLost, id)
	}
	cur.LeaseExpiresAt = now.Add(ttl)
	return clone(*cur), nil
}

// Release implements Store.
func (m *Memory) Release(ctx context.Context, id string, token int64) error {
	if err := checkCtx(ctx); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.recs[id]
	if !ok || cur.LeaseToken != token {
		return nil
	}
	cur.LeaseOwner = ""
	cur.LeaseExpiresAt = m.clock.Now()
	return nil
}

// Update implements Store.
func (m *Memory) Update(ctx context.Context, rec Record) (Record, error) {
	if err := checkCtx(ctx); err != nil {
		return Record{}, err
	}
	if !rec.State.Valid() {
		return Record{}, fmt.Errorf("keystore: invalid state %q", rec.State)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.recs[rec.OperationID]
	if !ok {
		return Record{}, fmt.Errorf("%w: %s", ErrNotFound, rec.OperationID)
	}
	now := m.clock.Now()
	if cur.LeaseToken != rec.LeaseToken || cur.LeaseOwner == "" || !now.Before(cur.LeaseExpiresAt) {
		return clone(*cur), fmt.Errorf("%w: %s", ErrLeaseLost, rec.OperationID)
	}
	if cur.Version != rec.Version {
		return clone(*cur), fmt.Errorf("%w: %s", ErrConflict, rec.OperationID)
	}
	if cur.State.Terminal() && rec.State != cur.State {
		return clone(*cur), fmt.Errorf("%w: %s is %s and cannot become %s", ErrConflict, rec.OperationID, cur.State, rec.State)
	}
	cur.State = rec.State
	cur.Attempts = rec.Attempts
	cur.FirstSentAt = rec.FirstSentAt
	cur.LastSentAt = rec.LastSentAt
	cur.ResultRef = rec.ResultRef
	cur.Result = append([]byte(nil), rec.Result...)
	cur.Error = rec.Error
	cur.Meta = append([]byte(nil), rec.Meta...)
	cur.Fingerprint = rec.Fingerprint
	cur.Version++
	cur.UpdatedAt = now
	return clone(*cur), nil
}

// List implements Store.
func (m *Memory) List(ctx context.Context, f Filter) ([]Record, error) {
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	m.mu.Lock()
	var out []Record
	for _, r := range m.recs {
		if matches(r, f) {
			out = append(out, clone(*r))
		}
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].UpdatedAt.Equal(out[j].UpdatedAt) {
			return out[i].UpdatedAt.Before(out[j].UpdatedAt)
		}
		return out[i].OperationID < out[j].OperationID
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func matches(r *Record, f Filter) bool {
	if len(f.States) > 0 {
		ok := slices.Contains(f.States, r.State)
		if !ok {
			return false
		}
	}
	if !f.UpdatedBefore.IsZero() && !r.UpdatedAt.Before(f.UpdatedBefore) {
		return false
	}
	return strings.HasPrefix(r.OperationID, f.Prefix)
}

// DeleteExpired implements Store.
func (m *Memory) DeleteExpired(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := checkCtx(ctx); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if before.After(m.amn.reapedBefore) {
		m.amn.reapedBefore = before
	}
	n := 0
	for id, r := range m.recs {
		if n >= limit {
			break
		}
		if r.State.Terminal() && r.UpdatedAt.Before(before) {
			delete(m.recs, id)
			n++
		}
	}
	return n, nil
}
