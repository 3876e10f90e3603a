package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// view is a write batch's copy of the rows it touches, read once inside the
// batch's transaction and written back once at its end.
type view struct {
	q       queries
	rows    map[string]*row // nil: no such row
	changes map[string]change
	order   []string // changed ids, in first-change order
}

// change says which columns of a row the batch changed, so that each row
// is written with the smallest statement.
type change struct{ insert, lease, data bool }

// maxReadIDs bounds the ids one SELECT reads. Small statements are cheaper
// with modernc.org/sqlite: it parses every statement anew, matches each
// parameter to its argument by a linear search, and its allocator maps and
// unmaps memory for large parse trees (measured: one row per write
// statement costs less CPU than multi-row upserts).
const maxReadIDs = 16

func loadView(ctx context.Context, c *sql.Conn, q queries, ids []string) (*view, error) {
	v := &view{q: q, rows: make(map[string]*row, len(ids)), changes: map[string]change{}}
	uniq := make([]any, 0, len(ids))
	for _, id := range ids {
		if _, ok := v.rows[id]; !ok {
			v.rows[id] = nil
			uniq = append(uniq, id)
		}
	}
	for len(uniq) > 0 {
		chunk := uniq[:min(len(uniq), maxReadIDs)]
		uniq = uniq[len(chunk):]
		query := fmt.Sprintf("SELECT %s FROM %s WHERE operation_id IN (%s)", columns, q.table, qmarks(len(chunk)))
		rows, err := c.QueryContext(ctx, query, chunk...)
		if err != nil {
			return nil, unavailable("write: read rows", err)
		}
		for rows.Next() {
			r, err := scanRow(rows)
			if err != nil {
				rows.Close()
				return nil, unavailable("write: read rows", err)
			}
			v.rows[r.id] = &r
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, unavailable("write: read rows", err)
		}
	}
	return v, nil
}

// get returns the batch's current row for id.
func (v *view) get(id string) (row, bool) {
	r := v.rows[id]
	if r == nil {
		return row{}, false
	}
	return *r, true
}

// insert records a new row.
func (v *view) insert(r row) { v.put(r, change{insert: true}) }

// setLease records a change of r's lease columns only.
func (v *view) setLease(r row) { v.put(r, change{lease: true}) }

// setData records a change of r's data columns (Update's).
func (v *view) setData(r row) { v.put(r, change{data: true}) }

func (v *view) put(r row, c change) {
	v.rows[r.id] = &r
	old, seen := v.changes[r.id]
	if !seen {
		v.order = append(v.order, r.id)
	}
	v.changes[r.id] = change{insert: old.insert || c.insert, lease: old.lease || c.lease, data: old.data || c.data}
}

// flush writes every changed row, one small statement per row and kind of
// change.
func (v *view) flush(ctx context.Context, c *sql.Conn) error {
	for _, id := range v.order {
		r, ch := v.rows[id], v.changes[id]
		var err error
		switch {
		case ch.insert:
			_, err = c.ExecContext(ctx, v.q.insert, r.values()...)
		default:
			if ch.lease {
				_, err = c.ExecContext(ctx, v.q.writeLease, r.leaseOwner, r.leaseToken, r.leaseExpires, r.id)
			}
			if err == nil && ch.data {
				_, err = c.ExecContext(ctx, v.q.writeData, r.fingerprint, r.state, r.attempts, r.firstSent, r.lastSent,
					r.resultRef, nilIfEmpty(r.result), r.errText, nilIfEmpty(r.meta), r.version, r.updated, r.id)
			}
		}
		if err != nil {
			return unavailable("write "+id, err)
		}
	}
	v.order, v.changes = v.order[:0], map[string]change{}
	return nil
}

// qmarks renders n positional parameters: "?, ?, ?".
func qmarks(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}
