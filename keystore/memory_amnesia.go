package keystore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"time"
)

// memPart names Memory's one part in amnesia reports.
const memPart = "memory store"

// memAmnesia is Memory's loss detection. Memory is its own backend, so the
// marker (what the "backend" holds) and what the Store remembers live side
// by side; Forget takes the backend's part away, as a restart or a failover
// would take it from a real store.
type memAmnesia struct {
	epoch string // the backend's marker; "" once Forget dropped it
	seen  string // the epoch this Store found
	// The last record this Store created (its high-water mark).
	lastID      string
	lastCreated time.Time
	// reapedBefore: DeleteExpired's latest cut-off; records created before
	// it may have been removed on purpose.
	reapedBefore time.Time
	lost         *LostPart
	accepted     *AcceptedLoss
	// unproven: since when the history is unproven (zero: proven); set by
	// AcceptLoss and Unprove, cleared by DeclareNew.
	unproven time.Time
	declared string
}

func newEpoch() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails
	return hex.EncodeToString(b[:])
}

func (a *memAmnesia) init() {
	a.epoch = newEpoch()
	a.seen = a.epoch
}

// Forget makes the store lose what it acknowledged, for tests of amnesia
// handling. With no IDs it forgets every record and its marker, as a Redis
// without persistence does when it restarts. With IDs it forgets those
// records only, as a failover to a replica that had not received them does.
// The store then refuses Create (ErrAmnesia) once it notices, as durable
// stores do.
func (m *Memory) Forget(ids ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(ids) == 0 {
		m.recs = make(map[string]*Record)
		m.amn.epoch = ""
		m.amn.lost, m.amn.accepted = nil, nil
		return
	}
	for _, id := range ids {
		delete(m.recs, id)
	}
}

// checkAmnesia refuses a Create when the store lost what it acknowledged;
// m.mu is held.
func (m *Memory) checkAmnesia(now time.Time) error {
	a := &m.amn
	if a.lost == nil {
		switch {
		case a.epoch == "":
			a.lost = &LostPart{Part: memPart, Reason: "its marker is gone: every record was forgotten", DetectedAt: now}
			a.epoch = newEpoch() // the marker is written again, in the lost state
		case a.epoch != a.seen:
			a.lost = &LostPart{Part: memPart, Reason: "its marker names another epoch", DetectedAt: now}
		case a.lastID != "":
			cur, ok := m.recs[a.lastID]
			reaped := a.lastCreated.Before(a.reapedBefore)
			if (!ok || !cur.CreatedAt.Equal(a.lastCreated)) && !reaped {
				a.lost = &LostPart{Part: memPart, DetectedAt: now,
					Reason: "record " + a.lastID + ", created and acknowledged at " + a.lastCreated.Format(time.RFC3339Nano) + ", is gone"}
			}
		}
	}
	if a.lost != nil {
		return &AmnesiaError{Part: a.lost.Part, Reason: a.lost.Reason, DetectedAt: a.lost.DetectedAt}
	}
	return nil
}

// Amnesia implements AmnesiaGuard.
func (m *Memory) Amnesia(ctx context.Context) (AmnesiaReport, error) {
	if err := checkCtx(ctx); err != nil {
		return AmnesiaReport{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_ = m.checkAmnesia(m.clock.Now())
	r := AmnesiaReport{Parts: 1}
	if m.amn.lost != nil {
		r.Lost = []LostPart{*m.amn.lost}
	}
	if m.amn.accepted != nil {
		r.Accepted = []AcceptedLoss{*m.amn.accepted}
	}
	return r, nil
}

// AcceptLoss implements AmnesiaGuard.
func (m *Memory) AcceptLoss(ctx context.Context, note string) error {
	if err := checkCtx(ctx); err != nil {
		return err
	}
	if strings.TrimSpace(note) == "" {
		return errors.New("keystore: accept loss: note: empty (say who accepted the loss and why)")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.amn.lost == nil {
		return nil
	}
	m.amn.epoch = newEpoch()
	m.amn.seen = m.amn.epoch
	m.amn.lastID, m.amn.lastCreated = "", time.Time{}
	m.amn.lost = nil
	m.amn.accepted = &AcceptedLoss{Part: memPart, Note: note, At: m.clock.Now()}
	// The records lost may belong to operations that were sent: until an
	// operator declares otherwise, each first send is looked up first.
	m.amn.unproven, m.amn.declared = m.amn.accepted.At, ""
	return nil
}

// Unprove makes the store report an unproven history from now on (for
// tests: as a durable store opened by a new process on a backend that
// lost everything looks).
func (m *Memory) Unprove() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.amn.unproven, m.amn.declared = m.clock.Now(), ""
}

// History implements HistoryProver. A new Memory is proven: it is its own
// backend and cannot have held anything before it existed.
func (m *Memory) History(ctx context.Context) (History, error) {
	if err := checkCtx(ctx); err != nil {
		return History{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	h := UnprovenHistory(m.amn.unproven, m.clock.Now(), "the store lost records (accepted loss) or was opened unproven")
	h.Declared = m.amn.declared
	return h, nil
}

// DeclareNew implements HistoryProver.
func (m *Memory) DeclareNew(ctx context.Context, note string) error {
	if err := checkCtx(ctx); err != nil {
		return err
	}
	if strings.TrimSpace(note) == "" {
		return errors.New("keystore: declare new: note: empty (say who declared the store new and why)")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.amn.unproven, m.amn.declared = time.Time{}, note
	return nil
}
