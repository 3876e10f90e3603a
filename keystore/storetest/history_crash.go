package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// CrashLoss is what HistoryCrashRun measured.
type CrashLoss struct {
	HistoryLoss
	// Acknowledged counts the first process's calls that returned with an
	// outcome before the crash; Lost those whose record the restarted
	// backend no longer has (what the crash lost, made visible).
	Acknowledged, Lost int
	// Sent counts the orders the first process had sent at least once
	// (the ledger's requests for their references) before it stopped.
	Sent int
}

// HistoryCrashRun is the crash half of the amnesia proof: a process
// charges orders from workers goroutines against the fake, which answers
// 30 % of first charges "500 after commit" (the key then released); once
// half of them have returned, crash makes the backend lose what it had not
// made durable, and the process itself stops (its context is cancelled,
// as if it crashed with the backend). restart brings the backend back; a
// new process opens the store with reopen and charges every order again
// (the ones the first process finished, the ones it had in flight and the
// ones it never reached), then as many new ones. Lookups counts the new
// process's lookups before first sends; FirstErr how long its first call
// took.
func HistoryCrashRun(t *testing.T, orders, workers int, open func(t *testing.T) keystore.Store, crash, restart func(t *testing.T), reopen func(t *testing.T) keystore.Store) CrashLoss {
	t.Helper()
	srv := pagpolartest.NewServer(t, pagpolartest.WithProcessingWindow(time.Second), pagpolartest.WithSeed(28))
	srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThen500, Probability: 0.3, OnlyFirst: 1})
	policy := pagpolar.RetryPolicy{
		ProcessingWindow: time.Second, WindowMargin: 200 * time.Millisecond,
		SettleDelay: 200 * time.Millisecond, LookupInterval: 50 * time.Millisecond,
		AttemptTimeout: 2 * time.Second,
	}
	var lookups atomic.Int64
	client := func(store keystore.Store, count bool) *pagpolar.Client {
		hook := func(_ context.Context, e pagpolar.Event) {
			if count && e.Kind == pagpolar.EventLookup && e.Cause == "unproven-history" {
				lookups.Add(1)
			}
		}
		c, err := pagpolar.NewClient(srv.CredentialID, pagpolar.StaticToken(srv.Token),
			pagpolar.WithBaseURL(srv.URL), pagpolar.WithStore(store), pagpolar.WithRetryPolicy(policy), pagpolar.WithHook(hook))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ref := func(i int) string { return fmt.Sprintf("crash-order-%d", i) }
	pix := func(ctx context.Context, c *pagpolar.Client, i int) error {
		_, err := c.Payments.Pix(ctx, pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: ref(i), Customer: engineCustomer})
		return err
	}
	// parallel runs f for 0..n-1 from workers goroutines and waits.
	parallel := func(n int, f func(i int)) {
		next := make(chan int)
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					f(i)
				}
			}()
		}
		for i := range n {
			next <- i
		}
		close(next)
		wg.Wait()
	}

	// The first process, crashed with its backend half-way.
	store := open(t)
	first := client(store, false)
	ctx1, stop1 := context.WithTimeout(context.Background(), 2*time.Minute)
	defer stop1()
	var (
		mu      sync.Mutex
		acked   []int
		done    atomic.Int64
		half    = make(chan struct{})
		crashed = make(chan struct{})
		over    = make(chan struct{})
	)
	go func() {
		defer close(over)
		parallel(orders, func(i int) {
			select {
			case <-crashed:
				return
			default:
			}
			err := pix(ctx1, first, i)
			mu.Lock()
			select {
			case <-crashed:
				// Returned after the crash: not acknowledged before it.
			default:
				if err == nil || errors.Is(err, pagpolar.ErrOutcomeUnknown) {
					acked = append(acked, i)
				}
			}
			mu.Unlock()
			if done.Add(1) == int64(orders/2) {
				close(half)
			}
		})
	}()
	select {
	case <-half:
	case <-over:
		t.Fatal("the first process finished before half of its orders returned")
	}
	// The workers go on charging while the backend crashes.
	crash(t)
	mu.Lock()
	close(crashed)
	mu.Unlock()
	stop1()
	<-over
	res := CrashLoss{Acknowledged: len(acked)}
	sent := map[string]bool{}
	for _, r := range srv.Ledger().Requests {
		if r.Method == "POST" {
			sent[r.ExternalReference] = true
		}
	}
	for i := range orders {
		if sent[ref(i)] {
			res.Sent++
		}
	}
	postsBefore := countPosts(srv)
	restart(t)

	// The new process.
	store2 := reopen(t)
	for _, i := range acked {
		if _, err := store2.Get(context.Background(), pagpolar.RecordID(srv.CredentialID, "pix:"+ref(i))); errors.Is(err, keystore.ErrNotFound) {
			res.Lost++
		}
	}
	second := client(store2, true)
	ctx2, stop2 := context.WithTimeout(context.Background(), 3*time.Minute)
	defer stop2()
	res.Orders = orders
	var firstOnce sync.Once
	parallel(2*orders, func(i int) {
		start := time.Now()
		err := pix(ctx2, second, i)
		firstOnce.Do(func() { res.FirstErr = time.Since(start) })
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil:
		case errors.Is(err, keystore.ErrAmnesia):
			res.Refused++ // unknown too: an earlier call may have sent it
		case errors.Is(err, pagpolar.ErrOutcomeUnknown):
			res.Unknown++
		case res.Err == nil:
			res.Err = fmt.Errorf("second process, order %d: %w", i, err)
		}
	})
	res.Posts = countPosts(srv) - postsBefore
	res.Lookups = int(lookups.Load())
	perRef := map[string]int{}
	for _, s := range srv.Ledger().Sales {
		perRef[s.ExternalReference]++
	}
	for _, n := range perRef {
		if n > 1 {
			res.Doubles += n - 1
		}
	}
	return res
}
