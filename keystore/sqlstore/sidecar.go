package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

// A SQLite file cannot show, by itself, that it was restored from an older
// copy while no process had it open: the copy carries its marker along.
// What the copy cannot carry is a file beside it. Every write batch bumps a
// generation counter in the marker (its attempts column) inside the
// batch's transaction, and once the batch has committed the Store writes
// the epoch and generation to <path>-pagpolar (<path>-pagpolar-<table> for
// a table other than the default) (no fsync: after a power
// loss the file beside may be older than the database, never newer, so it
// can miss a restore but never invent one). A Store that opens the
// database checks the marker against it:
//   - a new, empty file while the file beside names an epoch: the database
//     was deleted or replaced;
//   - another epoch: the database is another life's (a backup of an
//     earlier one, or another database);
//   - a lower generation: an older copy of this one was restored.
//
// Each marks the table lost (AmnesiaError). A running Store also checks
// every batch: the generation it reads must be above the last one it
// committed, or the file's content went back under it (a copy written
// over the live file): the batch fails and the table is marked lost.
//
// Not detected: a restore together with the file beside it (copy both,
// or restore a whole directory), a file beside deleted as well, and, in
// a restore taken after the last batch that reached the file beside,
// nothing is lost anyway.

type sidecar struct {
	path  string
	mu    sync.Mutex
	f     *os.File
	epoch string
	gen   int64
}

// sidecarPath names the file beside the database for one table (each
// table has its own marker).
func sidecarPath(dbPath, table string) string {
	if table == DefaultTable {
		return dbPath + "-pagpolar"
	}
	return dbPath + "-pagpolar-" + table
}

// read returns what the file beside holds; ok false when there is none (or
// it cannot be parsed: a torn write proves nothing).
func (c *sidecar) read() (epoch string, gen int64, ok bool, err error) {
	b, err := os.ReadFile(c.path)
	if errors.Is(err, os.ErrNotExist) {
		return "", 0, false, nil
	}
	if err != nil {
		return "", 0, false, unavailable("read "+c.path, err)
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return "", 0, false, nil
	}
	g, perr := strconv.ParseInt(f[1], 10, 64)
	if perr != nil {
		return "", 0, false, nil
	}
	return f[0], g, true, nil
}

// note records a committed generation; it never writes an older one of
// the same epoch.
func (c *sidecar) note(epoch string, gen int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if epoch == c.epoch && gen <= c.gen {
		return nil
	}
	if c.f == nil {
		f, err := os.OpenFile(c.path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return err
		}
		c.f = f
	}
	line := fmt.Sprintf("%s %020d\n", epoch, gen)
	if _, err := c.f.WriteAt([]byte(line), 0); err != nil {
		return err
	}
	if err := c.f.Truncate(int64(len(line))); err != nil {
		return err
	}
	c.epoch, c.gen = epoch, gen
	return nil
}

// last is the generation this Store last committed under epoch (0: none).
func (c *sidecar) last(epoch string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if epoch != c.epoch {
		return 0
	}
	return c.gen
}

func (c *sidecar) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f != nil {
		_ = c.f.Close()
		c.f = nil
	}
}

// sidecarWhy judges marker m against the file beside at open; fresh says
// the marker was written just now for an empty file.
func (s *Store) sidecarWhy(m row, fresh bool) (string, error) {
	ep, gen, ok, err := s.side.read()
	if err != nil || !ok {
		return "", err
	}
	switch {
	case fresh:
		return fmt.Sprintf("the database file is new, but %s remembers epoch %s at generation %d: the database was deleted or replaced while no process had it open", s.side.path, ep, gen), nil
	case m.key != ep:
		return fmt.Sprintf("the database holds epoch %s, but %s remembers epoch %s: it was replaced by another database or a backup of an earlier life", m.key, s.side.path, ep), nil
	case m.attempts < gen:
		return fmt.Sprintf("the database is at generation %d, but %s remembers generation %d: an older copy was restored, so the records written since are gone", m.attempts, s.side.path, gen), nil
	}
	return "", nil
}

// checkSidecar is syncMarker's check of SQLite against the file beside: a
// mismatch marks the table lost; otherwise the file beside is brought up
// to date.
func (s *Store) checkSidecar(ctx context.Context, db *sql.DB, m row, fresh bool, now int64) error {
	if s.side == nil || m.state != "ok" {
		return nil
	}
	why, err := s.sidecarWhy(m, fresh)
	if err != nil {
		return err
	}
	if why != "" && !fresh {
		// m was read before the file beside, which another process may
		// have brought forward meanwhile (it writes the file after each
		// commit): read the marker again, now after the file. A marker that
		// is still behind is behind for good.
		again, found, rerr := readMarker(ctx, db, s.q)
		if rerr != nil {
			return rerr
		}
		if found {
			m = again
			if why, err = s.sidecarWhy(m, fresh); err != nil {
				return err
			}
		}
	}
	if why != "" {
		if _, err := db.ExecContext(ctx, s.q.loseMark, markerID, m.key, why, now); err != nil {
			return unavailable("mark the table lost", err)
		}
		return nil
	}
	if err := s.side.note(m.key, m.attempts); err != nil {
		return unavailable("write "+s.side.path, err)
	}
	return nil
}

// stamp runs in every write batch before COMMIT: it bumps the marker's
// generation and checks that the file's content did not go back under
// this Store. When it did, the batch's writes are rolled back (to the
// savepoint apply set after BEGIN), the table is marked lost, and lost
// is the error every write of the batch gets once that is committed. It
// returns what to note once committed.
func (s *Store) stamp(ctx context.Context, c *sql.Conn, now int64) (epoch string, gen int64, lost, err error) {
	var state string
	err = c.QueryRowContext(ctx, s.q.bumpMark, markerID).Scan(&epoch, &gen, &state)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, nil, nil // no marker yet (before Migrate): Create refuses anyway
	}
	if err != nil {
		return "", 0, nil, unavailable("write: marker generation", err)
	}
	if last := s.side.last(epoch); state == "ok" && last > 0 && gen <= last {
		why := fmt.Sprintf("the database file's generation went back from %d to %d while this process had it open: it was overwritten with an older copy, so the records written since are gone", last, gen)
		if _, err := c.ExecContext(ctx, "ROLLBACK TO "+batchSavepoint); err != nil {
			return "", 0, nil, unavailable("write: roll the batch back", err)
		}
		if _, err := c.ExecContext(ctx, s.q.loseMark, markerID, epoch, why, now); err != nil {
			return "", 0, nil, unavailable("mark the table lost", err)
		}
		return "", 0, s.amnesiaErr(row{}, why), nil
	}
	return epoch, gen, nil, nil
}

// batchSavepoint is set after BEGIN in every SQLite write batch of a
// Store with a file beside (stamp rolls back to it).
const batchSavepoint = "pagpolar_batch"

// stamped notes a committed generation in the file beside (best effort:
// a write that fails only weakens the next check).
func (s *Store) stamped(epoch string, gen int64) {
	if epoch != "" {
		_ = s.side.note(epoch, gen)
	}
}
