package sqlstore

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// The table's marker is a row of the records table itself, so that
// whatever empties the table (DELETE, TRUNCATE, a table or database
// dropped and created again, a restore, a fresh SQLite file) takes the
// marker with it. Its columns:
//
//	operation_id     markerID (no caller can use it: the store refuses it)
//	idempotency_key  the epoch: names one life of the table's data
//	kind             markerKind
//	state            ok | lost (no keystore.State: List and DeleteExpired never touch it)
//	error_text       why the table was marked lost
//	result_ref       the note of the last accepted loss
//	first_sent_at    when the last loss was accepted (ms)
//	last_sent_at     DeleteExpired's latest cut-off (ms): records created
//	                 before it may have been removed on purpose
//	created_at       when the marker was written; updated_at: its last change
//
// <table>_meta remembers the epoch beside the table, so that a Store
// started after the table was emptied tells it from a new table.
const (
	markerID   = "\x01pagpolar-marker"
	markerKind = "pagpolar:marker"
)

// errReserved answers a caller that names the marker's ID.
var errReserved = errors.New("sqlstore: operation ID is reserved for the store's marker")

// part is what this Store knows of its table: the marker's epoch, when it
// last confirmed it (database clock, ms), and the last record it created
// and was told was committed (its high-water mark).
type part struct {
	mu       sync.Mutex
	epoch    string // "": not read yet
	verified int64
	lastID   string
	lastCA   int64
}

type partView struct {
	epoch    string
	verified int64
	lastID   string
	lastCA   int64
}

func (p *part) view() partView {
	p.mu.Lock()
	defer p.mu.Unlock()
	return partView{epoch: p.epoch, verified: p.verified, lastID: p.lastID, lastCA: p.lastCA}
}

func (p *part) learn(epoch string, now int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if epoch != p.epoch {
		p.epoch, p.lastID, p.lastCA = epoch, "", 0
	}
	if now > p.verified {
		p.verified = now
	}
}

// created records a committed Create of id at ca (ms) in a table whose
// marker names epoch.
func (p *part) created(epoch, id string, ca int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if epoch != p.epoch {
		p.epoch, p.lastID, p.lastCA = epoch, "", 0
	}
	if p.lastID == "" || ca >= p.lastCA {
		p.lastID, p.lastCA = id, ca
	}
	if ca > p.verified {
		p.verified = ca
	}
}

func newEpoch() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails
	return hex.EncodeToString(b[:])
}

func (s *Store) partName() string { return "table " + s.table }

// judge decides whether the table lost what this Store saw it
// acknowledge: m is the marker row (found false if it is gone), last the
// row of the last record this Store created (lastFound false if gone). It
// returns a reason, or adopt when an operator accepted a loss since this
// Store last looked (the new epoch is m's).
func (s *Store) judge(m row, found bool, last row, lastFound bool, pv partView) (why string, adopt bool) {
	switch {
	case !found:
		return "its marker row is gone, so it lost every record it held (DELETE or TRUNCATE, a table or database dropped and created again, a restore of an older backup, a new SQLite file)", false
	case m.state == "lost":
		if m.errText == "" {
			return "it was marked lost", false
		}
		return m.errText, false
	case pv.epoch != "" && m.key != pv.epoch:
		if m.firstSent.Valid && m.firstSent.Int64 > pv.verified {
			return "", true
		}
		return fmt.Sprintf("its marker names epoch %s where this process found %s, so it was emptied and initialised again", m.key, pv.epoch), false
	case pv.lastID != "" && (!lastFound || last.created != pv.lastCA) && !(m.lastSent.Valid && pv.lastCA < m.lastSent.Int64):
		return fmt.Sprintf("record %q, created by this process at %s and acknowledged as committed, is gone, so it lost committed writes (a failover to a standby that had not received them, a crash with synchronous_commit off, a restore of an older backup)",
			pv.lastID, fromMillis(pv.lastCA).Format(time.RFC3339Nano)), false
	}
	return "", false
}

func (s *Store) amnesiaErr(m row, why string) error {
	at := time.Time{}
	if m.state == "lost" && m.updated > 0 {
		at = fromMillis(m.updated)
	}
	return fmt.Errorf("sqlstore create: %w", &keystore.AmnesiaError{Part: s.partName(), Reason: why, DetectedAt: at})
}

// markerConn returns the database marker checks read and write with
// (Migrate's), and its closer.
func (s *Store) markerDB() (*sql.DB, func(), error) {
	if s.migrateDSN == "" {
		return s.wdb, func() {}, nil
	}
	mdb, err := sql.Open("sqlite", s.migrateDSN)
	if err != nil {
		return nil, nil, unavailable("open", err)
	}
	mdb.SetMaxOpenConns(1)
	return mdb, func() { _ = mdb.Close() }, nil
}

func readMarker(ctx context.Context, db *sql.DB, q queries) (row, bool, error) {
	m, err := scanRow(db.QueryRowContext(ctx, q.selectOne, markerID))
	if errors.Is(err, sql.ErrNoRows) {
		return row{}, false, nil
	}
	if err != nil {
		return row{}, false, unavailable("read the table's marker", err)
	}
	return m, true, nil
}

func readLast(ctx context.Context, db *sql.DB, q queries, id string) (row, bool, error) {
	if id == "" {
		return row{}, false, nil
	}
	var r row
	err := db.QueryRowContext(ctx, q.lastCreated, id).Scan(&r.created)
	if errors.Is(err, sql.ErrNoRows) {
		return row{}, false, nil
	}
	if err != nil {
		return row{}, false, unavailable("read "+id, err)
	}
	return r, true, nil
}

func dbNow(ctx context.Context, db *sql.DB, d Dialect) (int64, error) {
	var now int64
	if err := db.QueryRowContext(ctx, "SELECT "+nowMillis(d)).Scan(&now); err != nil {
		return 0, unavailable("clock", err)
	}
	return now, nil
}

// syncMarker brings what this Store knows of the marker up to date and
// records any loss it can see, writing through db (Migrate's database).
// With init (Migrate), a table without a marker nor a remembered epoch is
// a new one: its marker is written. Without it, such a table was not
// migrated by this version: an error asks for Migrate. It returns the
// marker row as it now stands.
func (s *Store) syncMarker(ctx context.Context, db *sql.DB, init bool) (row, error) {
	var metaEpoch string
	err := db.QueryRowContext(ctx, s.q.metaEpoch).Scan(&metaEpoch)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil && !init:
		return row{}, unavailable("read "+metaTable(s.table)+" (run Migrate: this version keeps the table's epoch there)", err)
	case err != nil:
		return row{}, unavailable("read "+metaTable(s.table), err)
	}
	now, err := dbNow(ctx, db, s.dialect)
	if err != nil {
		return row{}, err
	}
	m, found, err := readMarker(ctx, db, s.q)
	if err != nil {
		return row{}, err
	}
	pv := s.part.view()
	fresh := false
	switch {
	case !found && metaEpoch == "" && pv.epoch == "":
		fresh = true
		if !init {
			return row{}, fmt.Errorf("%w: sqlstore: table %s has no marker: run Migrate (this version adds one)", keystore.ErrUnavailable, s.table)
		}
		// A new table, or one whose marker and meta row are both gone:
		// what it holds is kept, and checked from now on. Its history is
		// unproven (new, emptied, or written without a marker: nothing
		// shows what it forgot) unless declared new.
		empty, err := s.tableEmpty(ctx, db)
		if err != nil {
			return row{}, err
		}
		if _, err := db.ExecContext(ctx, s.q.insertMark, markerID, newEpoch(), "ok", "", now); err != nil {
			return row{}, unavailable("write the table's marker", err)
		}
		if s.declareNew != "" && empty {
			if err := s.declare(ctx, db, s.declareNew); err != nil {
				return row{}, err
			}
		}
	case !found:
		why := "its marker row is gone, so it lost every record it held (DELETE or TRUNCATE, a table or database dropped and created again, a restore of an older backup, a new SQLite file)"
		if metaEpoch != "" {
			why = fmt.Sprintf("its marker row is gone while %s remembers epoch %s, so it lost every record it held (DELETE or TRUNCATE, the table dropped and created again, a restore of an older backup)", metaTable(s.table), metaEpoch)
		}
		ep := metaEpoch
		if ep == "" {
			ep = pv.epoch
		}
		if _, err := db.ExecContext(ctx, s.q.insertMark, markerID, ep, "lost", why, now); err != nil {
			return row{}, unavailable("mark the table lost", err)
		}
	case metaEpoch != "" && metaEpoch != m.key && m.state == "ok":
		why := fmt.Sprintf("its marker names epoch %s while %s remembers %s: one of the two was restored or replaced", m.key, metaTable(s.table), metaEpoch)
		if _, err := db.ExecContext(ctx, s.q.loseMark, markerID, m.key, why, now); err != nil {
			return row{}, unavailable("mark the table lost", err)
		}
	default:
		last, lastFound, err := readLast(ctx, db, s.q, pv.lastID)
		if err != nil {
			return row{}, err
		}
		why, adopt := s.judge(m, true, last, lastFound, pv)
		switch {
		case adopt:
			s.part.learn(m.key, now)
		case why != "" && m.state == "ok":
			if _, err := db.ExecContext(ctx, s.q.loseMark, markerID, m.key, why, now); err != nil {
				return row{}, unavailable("mark the table lost", err)
			}
		}
	}
	m, found, err = readMarker(ctx, db, s.q)
	if err != nil {
		return row{}, err
	}
	if !found {
		return row{}, fmt.Errorf("%w: sqlstore: the marker of table %s vanished while it was written", keystore.ErrUnavailable, s.table)
	}
	if s.side != nil && m.state == "ok" {
		if err := s.checkSidecar(ctx, db, m, fresh, now); err != nil {
			return row{}, err
		}
		if m, _, err = readMarker(ctx, db, s.q); err != nil {
			return row{}, err
		}
	}
	if metaEpoch == "" {
		// Remember the epoch the marker holds (never another one).
		if _, err := db.ExecContext(ctx, s.q.initMeta, m.key); err != nil {
			return row{}, unavailable("write "+metaTable(s.table), err)
		}
	}
	if pv.epoch == "" || m.key == pv.epoch {
		s.part.learn(m.key, now)
	}
	return m, nil
}

// ensurePart reads the marker once, before this Store's first Create.
func (s *Store) ensurePart(ctx context.Context) error {
	if s.part.view().epoch != "" {
		return nil
	}
	if err := s.checkDurable(ctx); err != nil {
		return err
	}
	db, done, err := s.markerDB()
	if err != nil {
		return err
	}
	defer done()
	_, err = s.syncMarker(ctx, db, false)
	return err
}

// Amnesia implements keystore.AmnesiaGuard: the table is checked against
// what this Store remembers (marker, epoch, its last record), within the
// call timeout.
func (s *Store) Amnesia(ctx context.Context) (keystore.AmnesiaReport, error) {
	ctx, cancel := s.callCtx(ctx)
	defer cancel()
	if err := checkCtx(ctx); err != nil {
		return keystore.AmnesiaReport{}, err
	}
	db, done, err := s.markerDB()
	if err != nil {
		return keystore.AmnesiaReport{}, err
	}
	defer done()
	m, err := s.syncMarker(ctx, db, false)
	if err != nil {
		return keystore.AmnesiaReport{}, s.timedOut(ctx, err)
	}
	r := keystore.AmnesiaReport{Parts: 1}
	if m.state == "lost" {
		r.Lost = []keystore.LostPart{{Part: s.partName(), Reason: m.errText, DetectedAt: fromMillis(m.updated)}}
	}
	if m.firstSent.Valid {
		r.Accepted = []keystore.AcceptedLoss{{Part: s.partName(), Note: m.resultRef, At: fromMillis(m.firstSent.Int64)}}
	}
	return r, nil
}

// AcceptLoss implements keystore.AmnesiaGuard: a table marked lost (after
// the check Amnesia runs) gets a new epoch, in the marker and in
// <table>_meta in one transaction, and takes Creates again.
func (s *Store) AcceptLoss(ctx context.Context, note string) error {
	if strings.TrimSpace(note) == "" {
		return errors.New("sqlstore: accept loss: note: empty (say who accepted the loss and why)")
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
	m, err := s.syncMarker(ctx, db, false)
	if err != nil {
		return s.timedOut(ctx, err)
	}
	if m.state != "lost" {
		return nil
	}
	ep := newEpoch()
	err = inTx(ctx, db, s.dialect, func(tx *sql.Conn) error {
		now, err := connNow(ctx, tx, s.dialect)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.q.acceptMark, markerID, ep, note, now); err != nil {
			return unavailable("accept the loss", err)
		}
		if _, err := tx.ExecContext(ctx, s.q.setMeta, ep); err != nil {
			return unavailable("write "+metaTable(s.table), err)
		}
		s.part.learn(ep, now)
		return nil
	})
	if err == nil && s.side != nil {
		if m, found, rerr := readMarker(ctx, db, s.q); rerr == nil && found {
			err = s.side.note(m.key, m.attempts)
		}
	}
	return s.timedOut(ctx, err)
}

func connNow(ctx context.Context, c *sql.Conn, d Dialect) (int64, error) {
	var now int64
	if err := c.QueryRowContext(ctx, "SELECT "+nowMillis(d)).Scan(&now); err != nil {
		return 0, unavailable("clock", err)
	}
	return now, nil
}

// inTx runs fn in one transaction on one connection of db (IMMEDIATE for
// SQLite: the write lock is taken at once).
func inTx(ctx context.Context, db *sql.DB, d Dialect, fn func(c *sql.Conn) error) (err error) {
	c, err := db.Conn(ctx)
	if err != nil {
		return unavailable("connect", err)
	}
	defer c.Close()
	begin := "BEGIN"
	if d == SQLite {
		begin = "BEGIN IMMEDIATE"
	}
	if _, err := c.ExecContext(ctx, begin); err != nil {
		return unavailable("begin", err)
	}
	defer func() {
		if err != nil {
			_, _ = c.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	if err := fn(c); err != nil {
		return err
	}
	if _, err := c.ExecContext(ctx, "COMMIT"); err != nil {
		return unavailable("commit", err)
	}
	return nil
}

// pgJudge finds out why a PostgreSQL Create inserted nothing and found no
// record: the loss check failed (an error wrapping an AmnesiaError, after
// marking the table lost), or an accepted loss is adopted, or the table
// changed in between (retry).
func (s *Store) pgJudge(ctx context.Context, pv partView) (retry bool, err error) {
	m, now, found, err := s.selectNow(ctx, markerID)
	if err != nil {
		return false, err
	}
	if !found {
		if now, err = dbNow(ctx, s.db, s.dialect); err != nil {
			return false, err
		}
	}
	last, lastFound, err := readLast(ctx, s.db, s.q, pv.lastID)
	if err != nil {
		return false, err
	}
	why, adopt := s.judge(m, found, last, lastFound, pv)
	switch {
	case adopt:
		s.part.learn(m.key, now)
		return true, nil
	case why == "":
		return true, nil // changed in between: try again
	case !found:
		if _, err := s.db.ExecContext(ctx, s.q.insertMark, markerID, pv.epoch, "lost", why, now); err != nil {
			return false, unavailable("mark the table lost", err)
		}
	case m.state == "ok":
		if _, err := s.db.ExecContext(ctx, s.q.loseMark, markerID, m.key, why, now); err != nil {
			return false, unavailable("mark the table lost", err)
		}
	}
	if m2, _, found2, err := s.selectNow(ctx, markerID); err == nil && found2 && m2.state == "lost" {
		return false, s.amnesiaErr(m2, m2.errText)
	}
	return false, s.amnesiaErr(row{}, why)
}

// liteGuard is the loss check of a SQLite Create, inside its batch: v
// holds the marker and the last record this Store created. It marks the
// table lost in the batch when it finds a loss, and returns the epoch to
// remember on success.
func (s *Store) liteGuard(v *view, now int64, pv partView) (string, error) {
	m, found := v.get(markerID)
	last, lastFound := v.get(pv.lastID)
	why, adopt := s.judge(m, found, last, lastFound, pv)
	if adopt || why == "" {
		return m.key, nil
	}
	switch {
	case !found:
		v.insert(row{id: markerID, key: pv.epoch, kind: markerKind, state: "lost", version: 1, errText: why, created: now, updated: now})
	case m.state == "ok":
		m.state, m.errText, m.updated = "lost", why, now
		v.setData(m)
	}
	got, _ := v.get(markerID)
	return "", s.amnesiaErr(got, why)
}
