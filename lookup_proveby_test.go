package pagpolar

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// TestLookup_FreshProcessKeepsTheProofDateOfAWarmFirstSend: a warm
// client's charge is saved as about to be sent at once (no snapshot), and
// its request may end without an answer sooner than its attempt timeout (a
// connection closed after the commit, a crash mid-flight): the trust moment
// the save set does not move then. The record must still carry the Date a
// list made after that moment shows, or a new process whose only answer is
// a micro-cache's copy without Age (made before the send) settles the
// operation not executed while its sale exists, and a call again charges
// twice.
func TestLookup_FreshProcessKeepsTheProofDateOfAWarmFirstSend(t *testing.T) {
	f := newFixture(t, []pagpolartest.Option{pagpolartest.WithShapes(pagpolartest.ShapeCacheNoAge)})
	f.warm(t, f.c)
	if _, err := f.c.Payments.SalesByExternalReference(f.ctx, "order-cold"); err != nil {
		t.Fatal(err)
	}
	f.srv.Clock.Advance(2 * time.Second)
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitDropRelease, Times: 1})
	ctx, cancel := endAtAnswer(f.ctx)
	_, err := f.c.Payments.Pix(ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-cold", Customer: goodCustomer})
	cancel()
	if !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("pix: %v, want unknown", err)
	}
	rec, err := f.store.Get(f.ctx, f.c.storeID("pix:order-cold"))
	if err != nil {
		t.Fatal(err)
	}
	var m opMeta
	if err := json.Unmarshal(rec.Meta, &m); err != nil {
		t.Fatal(err)
	}
	if m.ProveBy.IsZero() {
		t.Errorf("the record carries no prove_by: %s", rec.Meta)
	}
	// Past the trust moment (the save's: attempt timeout plus the trust
	// delay), the copy still alive (two processing windows plus ten seconds).
	f.srv.Clock.Advance(3 * time.Second)
	cold := f.client(t, WithStore(f.store)) // a new process: no reading of the API's clock
	rctx, rcancel := context.WithTimeout(f.ctx, 500*time.Millisecond)
	r, err := cold.Resume(rctx, "pix:order-cold")
	rcancel()
	if err != nil && !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatal(err)
	}
	if r != nil && r.State == keystore.StateNotExecuted {
		_, perr := cold.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-cold", Customer: goodCustomer})
		t.Errorf("Resume in a fresh process settled not executed from the cache's copy; sale %s exists; call again: %v, sales under the key: %d",
			salesUnder(f, cold, "pix:order-cold")[0].Identifier, perr, len(salesUnder(f, cold, "pix:order-cold")))
	}
	f.assertNoDuplicates(t)
}

// TestKnownExposure_FreshProcessOnAnUnprovenStoreTrustsACachedListWithoutAge
// measures an open exposure (README, "The guarantees' limits"): a new
// process on a store that cannot prove its history (its records lost)
// looks each first send up before sending it, and has read nothing of the
// API's clock yet, and the lost record's prove_by is gone with it. The
// only list it reads may be a micro-cache's copy without Age, made before
// the lost send: it passes for the list as it is, and the order is charged
// again. A clock probe before such a lookup prevents it, but made first
// sends on stores with short leases wait past them; not done yet.
func TestKnownExposure_FreshProcessOnAnUnprovenStoreTrustsACachedListWithoutAge(t *testing.T) {
	t.Parallel()
	f := newFixture(t, []pagpolartest.Option{pagpolartest.WithShapes(pagpolartest.ShapeCacheNoAge)})
	f.warm(t, f.c)
	if _, err := f.c.Payments.SalesByExternalReference(f.ctx, "order-lost"); err != nil {
		t.Fatal(err)
	}
	f.srv.Clock.Advance(time.Second)
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThen500, Times: 1})
	ctx, cancel := endAtAnswer(f.ctx)
	_, err := f.c.Payments.Pix(ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-lost", Customer: goodCustomer})
	cancel()
	if !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("pix: %v, want unknown", err)
	}
	lost := keystore.NewMemoryWithClock(f.srv.Clock) // the records are gone
	lost.Unprove()
	fresh := f.client(t, WithStore(lost))
	_, err = fresh.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-lost", Customer: goodCustomer})
	n := len(salesUnder(f, fresh, "pix:order-lost"))
	if n != 2 {
		t.Fatalf("the fake no longer reproduces the documented exposure (call: %v): %d sales under the key", err, n)
	}
	t.Logf("exposure reproduced: a fresh process on an unproven store trusted a cached copy and charged again: %d sales", n)
}

// TestLookup_FreshProcessKeepsTheProofDateOfAWarmSendThatCrashed: the
// record a warm client's charge is created with (saved as about to be sent,
// no snapshot) is all a process that crashes mid-send leaves; it must carry
// the Date a list made after its trust moment shows, or the process that
// resumes it, knowing nothing of the API's clock, takes a micro-cache's
// copy without Age from before the send for the list as it is, settles
// not executed while the sale exists, and a call again charges twice.
func TestLookup_FreshProcessKeepsTheProofDateOfAWarmSendThatCrashed(t *testing.T) {
	f := newFixture(t, []pagpolartest.Option{pagpolartest.WithShapes(pagpolartest.ShapeCacheNoAge)})
	crashing := &writesOnlyCreate{Store: f.store}
	sender := f.client(t, WithStore(crashing))
	f.warm(t, sender)
	if _, err := sender.Payments.SalesByExternalReference(f.ctx, "order-crash"); err != nil {
		t.Fatal(err)
	}
	f.srv.Clock.Advance(2 * time.Second)
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThen500, Times: 1})
	crashing.created.Store(false)
	_, err := sender.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-crash", Customer: goodCustomer})
	if !crashing.created.Load() || err == nil {
		t.Fatalf("pix: %v; want the record created, then no write", err)
	}
	rec, err := f.store.Get(f.ctx, sender.storeID("pix:order-crash"))
	if err != nil {
		t.Fatal(err)
	}
	var m opMeta
	if err := json.Unmarshal(rec.Meta, &m); err != nil {
		t.Fatal(err)
	}
	if m.ProveBy.IsZero() {
		t.Errorf("the record a warm first send is created with carries no prove_by: %s", rec.Meta)
	}
	f.srv.Clock.Advance(3 * time.Second) // past the trust moment and the lease; the copy still alive
	cold := f.client(t, WithStore(f.store))
	rctx, rcancel := context.WithTimeout(f.ctx, 500*time.Millisecond)
	r, err := cold.Resume(rctx, "pix:order-crash")
	rcancel()
	if err != nil && !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatal(err)
	}
	if r != nil && r.State == keystore.StateNotExecuted {
		_, perr := cold.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-crash", Customer: goodCustomer})
		t.Errorf("Resume in a fresh process settled not executed from the cache's copy; call again: %v, sales under the key: %d",
			perr, len(salesUnder(f, cold, "pix:order-crash")))
	}
	f.assertNoDuplicates(t)
}

// writesOnlyCreate is a store whose writes after a record's creation fail
// (a process that dies once the record of its send is saved): Create
// works, and every Update after it fails.
type writesOnlyCreate struct {
	keystore.Store
	created atomic.Bool
}

func (s *writesOnlyCreate) Create(ctx context.Context, rec keystore.Record, owner string, ttl time.Duration) (keystore.Record, error) {
	got, err := s.Store.Create(ctx, rec, owner, ttl)
	if err == nil && rec.Attempts > 0 {
		s.created.Store(true)
	}
	return got, err
}

func (s *writesOnlyCreate) Update(ctx context.Context, rec keystore.Record) (keystore.Record, error) {
	if s.created.Load() {
		return keystore.Record{}, errors.New("the process is gone")
	}
	return s.Store.Update(ctx, rec)
}

// TestTrustNoEarlier_RecordsTheProofDateOfAMomentItKeeps: a trust moment
// later than the one an ambiguous answer asks for stays, and gets the Date
// that proves a list postdates it if the record had none (set by a client
// with no upper bound of the API's clock, or written before prove_by
// existed): the Date for that moment, not for the earlier one.
func TestTrustNoEarlier_RecordsTheProofDateOfAMomentItKeeps(t *testing.T) {
	f := newFixture(t, nil)
	warmClock(f, f.c)
	now := f.c.clock.Now()
	e := &exec{c: f.c}
	e.meta.TrustAfter = now.Add(2 * time.Second)
	// proveBy takes the API's clock at the time it reads (never before
	// now): the Date for the kept moment lies between the one taken just
	// before and the one taken just after, 1.7 s past the earlier moment's.
	lo := f.c.proveBy(now, 2*time.Second)
	e.trustNoEarlier(now, 300*time.Millisecond)
	hi := f.c.proveBy(now, 2*time.Second)
	if !e.meta.TrustAfter.Equal(now.Add(2 * time.Second)) {
		t.Fatalf("trust moment moved to %s", e.meta.TrustAfter)
	}
	if e.meta.ProveBy.Before(lo) || e.meta.ProveBy.After(hi) {
		t.Fatalf("prove_by %s, want between %s and %s (the kept moment's)", e.meta.ProveBy, lo, hi)
	}
	// One already recorded is kept.
	set := e.meta.ProveBy
	e.trustNoEarlier(now.Add(time.Second), 300*time.Millisecond)
	if !e.meta.ProveBy.Equal(set) {
		t.Fatalf("prove_by moved from %s to %s", set, e.meta.ProveBy)
	}
}
