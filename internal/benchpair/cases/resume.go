package cases

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/internal/benchpair"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// LeaseWatch wraps a store and checks, for every Acquire and Create that
// succeeds, that no other caller is working on that operation at the same
// time — until its Release, or its Update to a settled state (the SDK
// leaves a settled record's lease to expire: nobody works on it again):
// two workers on one operation would show as an Overlap. Max is the
// largest number of operations worked on at once.
type LeaseWatch struct {
	keystore.Store
	mu       sync.Mutex
	held     map[string]bool
	cur, Max int
	Overlaps atomic.Int64
}

// NewLeaseWatch wraps s.
func NewLeaseWatch(s keystore.Store) *LeaseWatch {
	return &LeaseWatch{Store: s, held: map[string]bool{}}
}

func (w *LeaseWatch) take(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.held[id] {
		w.Overlaps.Add(1)
		return
	}
	w.held[id] = true
	w.cur++
	w.Max = max(w.Max, w.cur)
}

// Create implements keystore.Store.
func (w *LeaseWatch) Create(ctx context.Context, rec keystore.Record, owner string, ttl time.Duration) (keystore.Record, error) {
	got, err := w.Store.Create(ctx, rec, owner, ttl)
	if err == nil {
		w.take(rec.OperationID)
	}
	return got, err
}

// Acquire implements keystore.Store.
func (w *LeaseWatch) Acquire(ctx context.Context, id, owner string, ttl time.Duration) (keystore.Record, error) {
	got, err := w.Store.Acquire(ctx, id, owner, ttl)
	if err == nil {
		w.take(id)
	}
	return got, err
}

// Update implements keystore.Store.
func (w *LeaseWatch) Update(ctx context.Context, rec keystore.Record) (keystore.Record, error) {
	got, err := w.Store.Update(ctx, rec)
	if err == nil && rec.State.Settled() {
		w.drop(rec.OperationID)
	}
	return got, err
}

func (w *LeaseWatch) drop(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.held[id] {
		delete(w.held, id)
		w.cur--
	}
}

// Release implements keystore.Store. The lease counts as given up before
// the store is asked, so a successor acquiring right after the release is
// not an overlap.
func (w *LeaseWatch) Release(ctx context.Context, id string, token int64) error {
	w.drop(id)
	return w.Store.Release(ctx, id, token)
}

// ResumeStats is what the ResumeAll case saw over its rounds.
type ResumeStats struct {
	mu          sync.Mutex
	MaxLeases   int   // most operations worked at once, any round
	Overlaps    int64 // times an operation was taken while held, all rounds
	Settled     int   // operations settled (succeeded, failed or not executed), all rounds
	Unsettled   int
	Lookups     int // lookups sent, all rounds
	Concurrency int // RetryPolicy.ResumeConcurrency in force
}

// ResumeCase measures ResumeAll settling n operations left unknown (the
// sale made, the answer lost, the caller gone), against a fake that adds
// latency to every lookup. One op of the case is one ResumeAll; run it with
// Ops 1 and Warmup 0. concurrency 0 means the SDK's default.
func ResumeCase(name string, n int, latency time.Duration, concurrency int, st *ResumeStats) benchpair.Case {
	return benchpair.Case{Name: name, New: func(ctx context.Context) (benchpair.Op, func(), error) {
		srv := pagpolartest.NewUnstartedServer(pagpolartest.WithProcessingWindow(50 * time.Millisecond))
		if err := srv.Start(); err != nil {
			return nil, nil, err
		}
		pol := pagpolar.RetryPolicy{
			MaxRetryAfter: time.Millisecond, ProcessingWindow: 50 * time.Millisecond, WindowMargin: 5 * time.Millisecond,
			SettleDelay: 5 * time.Millisecond, LookupInterval: 5 * time.Millisecond,
			NewBackOff:        func() pagpolar.BackOff { return &backoff.ConstantBackOff{Interval: time.Millisecond} },
			ResumeConcurrency: concurrency,
		}
		watch := NewLeaseWatch(keystore.NewMemory())
		hc := Transport()
		c, err := pagpolar.NewClient(srv.CredentialID, pagpolar.StaticToken(srv.Token), pagpolar.WithBaseURL(srv.URL),
			pagpolar.WithStore(watch), pagpolar.WithHTTPClient(hc), pagpolar.WithRetryPolicy(pol),
			pagpolar.WithHook(func(ctx context.Context, e pagpolar.Event) {
				if f, ok := ctx.Value(giveUpKey{}).(context.CancelFunc); ok && e.Kind == pagpolar.EventSent {
					f() // the caller gives up right after the lost answer: the sale is made
				}
			}))
		if err != nil {
			srv.Close()
			return nil, nil, err
		}
		cleanup := func() { hc.CloseIdleConnections(); srv.Close() }
		// A first success validates the client's view of the API's clock.
		if _, err := c.Payments.Pix(ctx, pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: Ref(benchpair.Seq()), Customer: Customer}); err != nil {
			cleanup()
			return nil, nil, err
		}
		srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThenDrop})
		srv.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.Fault500NoCommit})
		// Each call's caller gives up right after its answer was lost (the
		// hook above); a call that ends otherwise (its 5 s limit) leaves no
		// unfinished record, so top up until exactly n are unfinished.
		unfinished := func() (int, error) {
			l, err := watch.List(ctx, keystore.Filter{States: []keystore.State{keystore.StatePending, keystore.StateUnknown}, Limit: 2 * n})
			return len(l), err
		}
		for have := 0; have < n; {
			var wg sync.WaitGroup
			sem := make(chan struct{}, 16)
			for range n - have {
				sem <- struct{}{}
				wg.Go(func() {
					defer func() { <-sem }()
					cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					cctx = context.WithValue(cctx, giveUpKey{}, cancel)
					_, _ = c.Payments.Pix(cctx, pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: Ref(benchpair.Seq()), Customer: Customer})
					cancel()
				})
			}
			wg.Wait()
			if have, err = unfinished(); err != nil || ctx.Err() != nil {
				cleanup()
				return nil, nil, fmt.Errorf("setup: %d unfinished operations: %v %v", have, err, ctx.Err())
			}
		}
		srv.ClearFaults()
		if have, err := unfinished(); err != nil || have != n {
			cleanup()
			return nil, nil, fmt.Errorf("setup left %d unfinished operations (%v), want %d", have, err, n)
		}
		time.Sleep(100 * time.Millisecond) // past the fast policy's trust delay
		srv.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.FaultLatency, Delay: latency})
		watch.mu.Lock()
		watch.Max, watch.cur = 0, len(watch.held)
		watch.mu.Unlock()
		readsBefore := reads(srv)
		return func(ctx context.Context, _ int64) error {
			rs, err := c.ResumeAll(ctx)
			if err != nil {
				return err
			}
			settled, why := 0, ""
			for _, r := range rs {
				if r.State.Settled() {
					settled++
				} else if why == "" {
					why = fmt.Sprintf(" (e.g. %s: %s, %v)", r.OperationID, r.State, r.Err)
				}
			}
			st.mu.Lock()
			defer st.mu.Unlock()
			watch.mu.Lock()
			st.MaxLeases = max(st.MaxLeases, watch.Max)
			watch.mu.Unlock()
			st.Overlaps += watch.Overlaps.Load()
			st.Settled += settled
			st.Unsettled += n - settled
			st.Lookups += reads(srv) - readsBefore
			st.Concurrency = concurrency
			if concurrency <= 0 {
				st.Concurrency = pagpolar.DefaultRetryPolicy.ResumeConcurrency
			}
			if settled < n {
				return fmt.Errorf("%d of %d settled%s", settled, n, why)
			}
			return nil
		}, cleanup, nil
	}}
}

type giveUpKey struct{}

func reads(srv *pagpolartest.Server) int {
	n := 0
	for _, r := range srv.Ledger().Requests {
		if r.Method == "GET" {
			n++
		}
	}
	return n
}
