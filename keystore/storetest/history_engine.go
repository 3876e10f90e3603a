package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// HistoryLoss is what HistoryLossRun measured.
type HistoryLoss struct {
	Orders   int           // orders charged by the first process, then again (and as many new ones) by the second
	Doubles  int           // sales beyond the first for one order (must be 0)
	Lookups  int           // lookups the second process made before first sends because its store was unproven
	Unknown  int           // second-process calls that ended outcome unknown (an effect found that no rule attributes)
	Refused  int           // second-process calls refused by the store (amnesia detected)
	Posts    int           // money requests the second process sent
	FirstErr time.Duration // how long the second process's first call took to return
	Err      error         // the first unexpected error of the second process
}

// HistoryLossRun is the new-process half of the amnesia proof: a process
// charges orders orders against the fake, which answers 30 % of first
// charges "500 after commit" (the key then released, so the key alone
// protects nothing); fault makes the backend lose them; a new process
// opens the store with reopen and charges the same orders again, then as
// many new ones. A store that takes its emptied backend for a new one,
// and an engine that sends first sends blind, charge the lost orders
// twice.
func HistoryLossRun(t *testing.T, orders int, open func(t *testing.T) keystore.Store, fault func(t *testing.T), reopen func(t *testing.T) keystore.Store) HistoryLoss {
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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pix := func(c *pagpolar.Client, i int) error {
		_, err := c.Payments.Pix(ctx, pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: fmt.Sprintf("history-order-%d", i), Customer: engineCustomer})
		return err
	}
	first := client(open(t), false)
	for i := range orders {
		if err := pix(first, i); err != nil {
			t.Fatalf("first process, order %d: %v", i, err)
		}
	}
	postsBefore := countPosts(srv)
	fault(t)
	second := client(reopen(t), true)
	res := HistoryLoss{Orders: orders}
	for i := range 2 * orders {
		start := time.Now()
		err := pix(second, i)
		if i == 0 {
			res.FirstErr = time.Since(start)
		}
		switch {
		case err == nil:
		case errors.Is(err, keystore.ErrAmnesia):
			res.Refused++ // unknown too: an earlier call may have sent it
		case errors.Is(err, pagpolar.ErrOutcomeUnknown):
			res.Unknown++
		case res.Err == nil:
			res.Err = fmt.Errorf("second process, order %d: %w", i, err)
		}
	}
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

func countPosts(srv *pagpolartest.Server) int {
	n := 0
	for _, r := range srv.Ledger().Requests {
		if r.Method == "POST" {
			n++
		}
	}
	return n
}

// CheckHistoryLoss fails t unless r shows no double effect and the cost
// the unproven history promises: at most one lookup per first send, none
// once the second process's store is proven (wantLookups false).
func CheckHistoryLoss(t *testing.T, r HistoryLoss, wantLookups bool) {
	t.Helper()
	t.Logf("orders %d: doubles %d, lookups %d, unknown %d, refused %d, posts %d, first call %v, err %v",
		r.Orders, r.Doubles, r.Lookups, r.Unknown, r.Refused, r.Posts, r.FirstErr.Round(time.Millisecond), r.Err)
	if r.Doubles != 0 {
		t.Errorf("%d orders were charged twice", r.Doubles)
	}
	if r.Err != nil {
		t.Errorf("unexpected error: %v", r.Err)
	}
	if wantLookups && (r.Lookups < 2*r.Orders-r.Refused || r.Lookups > 2*r.Orders+r.Orders) {
		t.Errorf("%d lookups before first sends for %d first sends, want one each (a few more while the trust moment had not passed)", r.Lookups, 2*r.Orders)
	}
	if !wantLookups && r.Lookups != 0 {
		t.Errorf("%d lookups before first sends on a proven store, want 0", r.Lookups)
	}
}

// DeclareNew declares a store a test just created new (keystore.HistoryProver),
// so that its first sends are not looked up first: what such a test proves
// is not about a lost history.
func DeclareNew(tb testing.TB, s keystore.Store) {
	tb.Helper()
	if hp, ok := s.(keystore.HistoryProver); ok {
		if err := hp.DeclareNew(context.Background(), "test: a store the test just created"); err != nil {
			tb.Fatal(err)
		}
	}
}
