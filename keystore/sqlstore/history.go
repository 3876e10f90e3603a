package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// The table's history (keystore.HistoryProver). The marker row says when
// it was written (created_at) and when a loss was last accepted
// (first_sent_at); the history is unproven from the later of those for
// keystore.ProofAge, unless an operator declared the table new since: the
// marker's fingerprint column then holds the note and lease_token the
// time (ms) of the declaration (DeclareNew, pagpolar ops init, or the
// DeclaredNew option when Migrate writes the marker of an empty table). A
// marker written for an empty table (a new database, a new SQLite file, a
// table emptied and migrated again) therefore starts an unproven history.
//
// On PostgreSQL with AllowAsyncCommit, a server restart can lose the last
// commits with nothing in the table to show it: the history is also
// unproven from the server's start (pg_postmaster_start_time).

// historyRecheck is how long a Store answers an unproven history from
// what it read last.
const historyRecheck = 2 * time.Second

// DeclaredNew declares the table new when Migrate finds it empty and
// writes its marker: no operation was ever sent with records in it (a new
// deployment or credential). note says who declared it and why. A table
// that has a marker already is left as it is (use Store.DeclareNew, or
// pagpolar ops init, once it is known to be safe). Do not keep the option
// after the first deployment: a database recreated empty by a loss would
// be declared new again.
func DeclaredNew(note string) Option {
	return func(c *config) error {
		if strings.TrimSpace(note) == "" {
			return errors.New("sqlstore: DeclaredNew: note: empty")
		}
		c.declareNew = note
		return nil
	}
}

type histCache struct {
	mu     sync.Mutex
	valid  bool
	h      keystore.History
	readAt time.Time
	skew   time.Duration // database clock − local clock
	epoch  string
}

// historyOf is the history the marker m shows at database time now (ms);
// start is the PostgreSQL server's start (ms) when commits are
// asynchronous, else 0.
func (s *Store) historyOf(m row, found bool, now, start int64) keystore.History {
	if !found {
		return keystore.UnprovenHistory(fromMillis(now), fromMillis(now), s.partName()+" has no marker")
	}
	at, reason := m.created, fmt.Sprintf("%s: its marker was written at %s, and nothing proves that no record was lost before", s.partName(), fromMillis(m.created).UTC().Format(time.RFC3339))
	if m.firstSent.Valid && m.firstSent.Int64 > at {
		at, reason = m.firstSent.Int64, s.partName()+": a loss was accepted at "+fromMillis(m.firstSent.Int64).UTC().Format(time.RFC3339)
	}
	if start > at {
		at, reason = start, s.partName()+": the PostgreSQL server restarted at "+fromMillis(start).UTC().Format(time.RFC3339)+" and commits are asynchronous (AllowAsyncCommit), so it may have lost the last ones"
	}
	if m.leaseToken != 0 && m.leaseToken >= at {
		return keystore.History{Declared: m.fingerprint}
	}
	return keystore.UnprovenHistory(fromMillis(at), fromMillis(now), reason)
}

// refreshHistory reads the marker and caches the history.
func (s *Store) refreshHistory(ctx context.Context) error {
	now, err := dbNow(ctx, s.db, s.dialect)
	if err != nil {
		return err
	}
	m, found, err := readMarker(ctx, s.db, s.q)
	if err != nil {
		return err
	}
	var start int64
	if s.dialect == Postgres && s.allowAsync {
		if err := s.db.QueryRowContext(ctx, "SELECT (extract(epoch from pg_postmaster_start_time()) * 1000)::bigint").Scan(&start); err != nil {
			return unavailable("read the server's start time", err)
		}
	}
	h := s.historyOf(m, found, now, start)
	s.hist.mu.Lock()
	defer s.hist.mu.Unlock()
	s.hist.valid, s.hist.h, s.hist.readAt = true, h, time.Now()
	s.hist.skew = fromMillis(now).Sub(s.hist.readAt)
	s.hist.epoch = s.part.view().epoch
	return nil
}

// History implements keystore.HistoryProver. A proven history is answered
// from memory until this Store adopts another epoch (an accepted loss); an
// unproven one is read again at most every 2 s.
func (s *Store) History(ctx context.Context) (keystore.History, error) {
	s.hist.mu.Lock()
	h, skew := s.hist.h, s.hist.skew
	fresh := s.hist.valid && s.hist.epoch == s.part.view().epoch && (h.Proven() || time.Since(s.hist.readAt) < historyRecheck)
	s.hist.mu.Unlock()
	if !fresh {
		ctx, cancel := s.callCtx(ctx)
		defer cancel()
		if err := checkCtx(ctx); err != nil {
			return keystore.History{}, err
		}
		if err := s.refreshHistory(ctx); err != nil {
			return keystore.History{}, s.timedOut(ctx, err)
		}
		s.hist.mu.Lock()
		h, skew = s.hist.h, s.hist.skew
		s.hist.mu.Unlock()
	}
	if !h.Proven() && !time.Now().Add(skew).Before(h.ProvenAt) {
		h = keystore.History{}
	}
	return h, nil
}

// DeclareNew implements keystore.HistoryProver. A table marked lost is
// not declared: settle and accept the loss first.
func (s *Store) DeclareNew(ctx context.Context, note string) error {
	if strings.TrimSpace(note) == "" {
		return errors.New("sqlstore: declare new: note: empty (say who declared the table new and why)")
	}
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	if err := checkCtx(ctx); err != nil {
		return err
	}
	db, done, err := s.markerDB()
	if err != nil {
		return err
	}
	defer done()
	if err := s.declare(ctx, db, note); err != nil {
		return s.timedOut(ctx, err)
	}
	return s.timedOut(ctx, s.refreshHistory(ctx))
}

func (s *Store) declare(ctx context.Context, db *sql.DB, note string) error {
	now, err := dbNow(ctx, db, s.dialect)
	if err != nil {
		return err
	}
	res, err := db.ExecContext(ctx, s.q.declareMark, markerID, note, now)
	if err != nil {
		return unavailable("declare the table new", err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("%w: sqlstore: declare new: table %s has no marker or is marked lost (run Migrate; settle and accept a loss first)", keystore.ErrUnavailable, s.table)
	}
	return nil
}

// tableEmpty reports whether the table holds no row but (maybe) its
// marker: a table Migrate creates, or one emptied.
func (s *Store) tableEmpty(ctx context.Context, db *sql.DB) (bool, error) {
	var one int
	err := db.QueryRowContext(ctx, fmt.Sprintf("SELECT 1 FROM %s WHERE operation_id <> $1 LIMIT 1", s.table), markerID).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return true, nil
	case err != nil:
		return false, unavailable("read "+s.table, err)
	}
	return false, nil
}
