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
	q     queries
	rows  map[string]*row // nil: no such row
	dirty []string        // ids to write back, in first-change order
	isDir map[string]bool
}

// Statements are kept small: the driver matches each parameter to its
// argument by a linear search, so one statement's binding cost grows with
// the square of its parameter count.
const (
	maxReadIDs   = 64
	maxWriteRows = 16
)

func loadView(ctx context.Context, c *sql.Conn, q queries, ids []string) (*view, error) {
	v := &view{q: q, rows: make(map[string]*row, len(ids)), isDir: map[string]bool{}}
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

// put records r as id's row, to be written at the end of the batch.
func (v *view) put(r row) {
	v.rows[r.id] = &r
	if !v.isDir[r.id] {
		v.isDir[r.id] = true
		v.dirty = append(v.dirty, r.id)
	}
}

// flush writes every changed row with one upsert per chunk.
func (v *view) flush(ctx context.Context, c *sql.Conn) error {
	const ncol = 18
	for len(v.dirty) > 0 {
		chunk := v.dirty[:min(len(v.dirty), maxWriteRows)]
		v.dirty = v.dirty[len(chunk):]
		tuples := make([]string, len(chunk))
		args := make([]any, 0, len(chunk)*ncol)
		tuple := "(" + qmarks(ncol) + ")"
		for i, id := range chunk {
			tuples[i] = tuple
			args = append(args, v.rows[id].values()...)
			delete(v.isDir, id)
		}
		query := fmt.Sprintf("INSERT INTO %s (%s) VALUES %s ON CONFLICT (operation_id) DO UPDATE SET %s",
			v.q.table, columns, strings.Join(tuples, ", "), v.q.upsertSet)
		if _, err := c.ExecContext(ctx, query, args...); err != nil {
			return unavailable("write rows", err)
		}
	}
	return nil
}

// qmarks renders n positional parameters: "?, ?, ?".
func qmarks(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}
