package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// The SQLite writes: each is a decision on the batch's view (see writer).

func (s *Store) liteCreate(ctx context.Context, rec keystore.Record, owner string, ttl time.Duration) (keystore.Record, error) {
	pv := s.part.view()
	res := s.w.do(ctx, &writeReq{id: rec.OperationID, extra: []string{markerID, pv.lastID}, op: func(v *view, now int64) result {
		if cur, ok := v.get(rec.OperationID); ok {
			return result{rec: cur.record(), err: fmt.Errorf("%w: %s", keystore.ErrExists, rec.OperationID)}
		}
		ep, err := s.liteGuard(v, now, pv)
		if err != nil {
			return result{err: err}
		}
		r := newRow(rec, owner, ttl, now)
		v.insert(r)
		return result{rec: r.record(), epoch: ep}
	}})
	if res.err == nil {
		s.part.created(res.epoch, rec.OperationID, res.rec.CreatedAt.UnixMilli())
	}
	return res.rec, res.err
}

// liteChange applies decide to the row of id and keeps the row it returns
// when write is true; data says whether Update's columns changed (else only
// the lease's).
func (s *Store) liteChange(ctx context.Context, id string, data bool, decide func(cur row, now int64) (next row, write bool, err error)) (keystore.Record, error) {
	res := s.w.do(ctx, &writeReq{id: id, op: func(v *view, now int64) result {
		cur, ok := v.get(id)
		if !ok {
			return result{err: fmt.Errorf("%w: %s", keystore.ErrNotFound, id)}
		}
		next, write, err := decide(cur, now)
		if err != nil {
			return result{rec: cur.record(), err: err}
		}
		switch {
		case write && data:
			v.setData(next)
		case write:
			v.setLease(next)
		}
		return result{rec: next.record()}
	}})
	return res.rec, res.err
}

func (s *Store) liteDeleteExpired(ctx context.Context, before int64, limit int) (int, error) {
	res := s.w.do(ctx, &writeReq{del: &deleteReq{before: before, limit: limit}})
	return res.n, res.err
}
