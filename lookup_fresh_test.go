// Tests of lookup_fresh.go: whether a list answer is current.

package pagpolar

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// TestLookup_CachedListWithoutAgeIsNotCurrent: a list whose own Date is
// older than the moment it must postdate is a stored copy, whether or not
// a cache sent Age.
func TestLookup_CachedListWithoutAgeIsNotCurrent(t *testing.T) {
	srv := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC) // the API's clock (lower bound) at the send
	sent := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC) // the client's clock at the send: hours off, and no matter
	date := func(d time.Time) http.Header { return http.Header{"Date": {d.Format(http.TimeFormat)}} }
	for _, c := range []struct {
		name      string
		h         http.Header
		ok        bool
		notBefore time.Time
		stale     bool
	}{
		{"Date 10 s older than the trust moment", date(srv.Add(-10 * time.Second)), true, sent, true},
		{"Date 2 s older than the trust moment", date(srv.Add(-2100 * time.Millisecond)), true, sent, true},
		{"Date at the send, trust moment passed", date(srv), true, sent, false},
		{"Date truncated to the second", date(srv.Add(-900 * time.Millisecond)), true, sent, false},
		{"Date older than the trust moment by the lookup's lateness", date(srv.Add(-30 * time.Second)), true, sent.Add(-20 * time.Second), true},
		{"Date after the trust moment, which is 20 s before the send", date(srv.Add(-15 * time.Second)), true, sent.Add(-20 * time.Second), false},
		{"snapshot from a copy 10 s old", date(srv.Add(-10 * time.Second)), true, time.Time{}, true},
		{"no reading of the API's clock", date(srv.Add(-time.Hour)), false, sent, false},
		{"no Date, though other answers carried one", http.Header{}, true, sent, true},
		{"no Date from an API that sends none", http.Header{}, false, sent, false},
		{"before the trust moment", date(srv.Add(-time.Hour)), true, sent.Add(time.Minute), false},
	} {
		if _, got := staleByDate(c.h, dateProof{floor: srv, floorOK: c.ok}, sent, c.notBefore); got != c.stale {
			t.Errorf("%s: stale %v, want %v", c.name, got, c.stale)
		}
	}
}

// TestLookup_ListMustProveItPostdatesTheTrustMoment: with an upper bound of
// the API's clock from earlier answers, a list read after its trust moment
// counts only if its Date proves it was made after that moment — a copy a
// micro-cache made a fraction of a second before it carries a Date in the
// same second as a fresh answer, and the floor alone cannot tell them
// apart. The hosts' tolerance is added: a host ahead stamps later Dates.
func TestLookup_ListMustProveItPostdatesTheTrustMoment(t *testing.T) {
	// The API's clock at the trust moment is at most ceil; the lookup is
	// sent lateness after it.
	ceil := time.Date(2026, 12, 1, 12, 0, 0, 400_000_000, time.UTC)
	floor := ceil.Add(-1300 * time.Millisecond)
	notBefore := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC) // the client's clock: hours off, and no matter
	date := func(d time.Time) http.Header { return http.Header{"Date": {d.Format(http.TimeFormat)}} }
	for _, c := range []struct {
		name     string
		h        http.Header
		lateness time.Duration
		tol      time.Duration
		stale    bool
	}{
		{"copy made 0.6 s before the moment, read at once", date(ceil.Add(-600 * time.Millisecond)), 0, 0, true},
		{"copy made 0.6 s before the moment, read 5 s later", date(ceil.Add(-600 * time.Millisecond)), 5 * time.Second, 0, true},
		{"fresh answer 1 s after the moment's ceiling", date(ceil.Add(1600 * time.Millisecond)), 2 * time.Second, 0, false},
		{"fresh answer in the moment's second", date(ceil.Add(100 * time.Millisecond)), 300 * time.Millisecond, 0, true},
		{"fresh answer, hosts 2 s apart, read 5 s later", date(ceil.Add(5 * time.Second)), 5 * time.Second, 2 * time.Second, false},
		{"a host 2 s ahead stamps a copy made before the moment", date(ceil.Add(1600 * time.Millisecond)), 3 * time.Second, 2 * time.Second, true},
		{"no Date, though other answers carried one", http.Header{}, time.Second, 0, true},
		{"a Date that cannot be read", http.Header{"Date": {"yesterday"}}, time.Second, 0, true},
	} {
		sent := notBefore.Add(c.lateness)
		p := dateProof{floor: floor.Add(c.lateness), floorOK: true, ceil: ceil.Add(c.lateness), ceilOK: true, tol: c.tol}
		if why, got := staleByDate(c.h, p, sent, notBefore); got != c.stale {
			t.Errorf("%s: stale %v (%s), want %v", c.name, got, why, c.stale)
		}
	}
	// Before the trust moment nothing is concluded, and a snapshot keeps
	// the floor's rule: a Date within a second of the floor passes.
	p := dateProof{floor: floor, floorOK: true, ceil: ceil, ceilOK: true}
	if _, got := staleByDate(date(ceil.Add(-time.Hour)), p, notBefore.Add(-time.Second), notBefore); got {
		t.Error("before the trust moment: stale, want nothing concluded")
	}
	if _, got := staleByDate(date(floor.Add(-100*time.Millisecond)), p, notBefore, time.Time{}); got {
		t.Error("snapshot within the Date's resolution of the floor: stale, want current")
	}
}

// TestLookup_RecordedProofDateBindsEveryClient: the Date the operation's
// record says a list made after its trust moment carries binds every
// client, with or without a bound of its own; the later threshold wins.
func TestLookup_RecordedProofDateBindsEveryClient(t *testing.T) {
	recorded := time.Date(2026, 12, 1, 12, 0, 5, 0, time.UTC)
	notBefore := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC) // the client's clock: hours off, and no matter
	sent := notBefore.Add(2 * time.Second)
	date := func(d time.Time) http.Header { return http.Header{"Date": {d.Format(http.TimeFormat)}} }
	none := dateProof{recorded: recorded}
	// A ceiling learned from copies only: 3 s too low.
	low := dateProof{ceil: recorded.Add(-3 * time.Second).Add(2 * time.Second), ceilOK: true, floor: recorded.Add(-5 * time.Second), floorOK: true, recorded: recorded}
	// A ceiling of its own above the recorded one.
	high := dateProof{ceil: recorded.Add(4 * time.Second), ceilOK: true, floorOK: true, floor: recorded, recorded: recorded}
	for _, c := range []struct {
		name  string
		h     http.Header
		p     dateProof
		stale bool
	}{
		{"no bound of its own, a copy made before the moment", date(recorded.Add(-3 * time.Second)), none, true},
		{"no bound of its own, Date at the recorded threshold", date(recorded), none, false},
		{"no bound of its own, no Date", http.Header{}, none, true},
		{"a ceiling from copies, a copy between it and the threshold", date(recorded.Add(-2 * time.Second)), low, true},
		{"a ceiling from copies, Date past the threshold", date(recorded.Add(time.Second)), low, false},
		{"its own ceiling later, Date past the recorded threshold only", date(recorded.Add(time.Second)), high, true},
		{"its own ceiling later, Date past both", date(recorded.Add(3 * time.Second)), high, false},
	} {
		if why, got := staleByDate(c.h, c.p, sent, notBefore); got != c.stale {
			t.Errorf("%s: stale %v (%s), want %v", c.name, got, why, c.stale)
		}
	}
	if _, got := staleByDate(date(recorded.Add(-time.Hour)), none, notBefore.Add(-time.Second), notBefore); got {
		t.Error("before the trust moment: stale, want nothing concluded")
	}
}

// TestServerClock_ProofCeilingIgnoresAnswersBehindTheFloor: an answer
// whose upper bound is below what another answer proved (a stored copy's
// old Date) is left out of the ceiling, so copies cannot pull it down —
// nor crowd the one fresh answer out, however many of them come.
func TestServerClock_ProofCeilingIgnoresAnswersBehindTheFloor(t *testing.T) {
	var s serverClock
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	api := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	hdr := func(d time.Time) http.Header { return http.Header{"Date": {d.Format(http.TimeFormat)}} }
	s.observe(hdr(api), at, at.Add(10*time.Millisecond), 2*time.Second)
	for i := range 12 { // copies 2 s behind: kept as samples (within tolerance), below the floor's bound
		now := at.Add(time.Duration(i+1) * 100 * time.Millisecond)
		s.observe(hdr(api.Add(-2*time.Second)), now.Add(-10*time.Millisecond), now, 2*time.Second)
	}
	if s.n != sampleCount {
		t.Fatalf("%d samples kept, want %d (the copies too, the fresh answer crowded out)", s.n, sampleCount)
	}
	now := at.Add(1300 * time.Millisecond)
	ceil, ok := s.proofCeiling(now)
	if !ok {
		t.Fatal("no ceiling")
	}
	hi, _ := s.dateFloor(now)
	if ceil.Before(hi) {
		t.Fatalf("ceiling %s below the highest lower bound %s: copies pulled it down", ceil, hi)
	}
	if want := api.Add(2300 * time.Millisecond); ceil.After(want.Add(time.Millisecond)) || ceil.Before(want.Add(-time.Millisecond)) {
		t.Fatalf("ceiling %s, want about %s (the one fresh answer's bound)", ceil, want)
	}
}

// TestLookup_FreshProcessKeepsTheRecordedProofDate: a process that has
// read nothing of the API yet (Resume after a restart) has no bound of the
// API's clock of its own, and the only answers it reads may be a
// micro-cache's copies without Age (whose Dates would give it a ceiling too
// low). The operation's record carries the Date a list made after the trust
// moment must show (opMeta.ProveBy, from the sending client's bound): the
// copy, made before the send, is no proof, and the operation is not
// settled not executed while its sale exists. Once the copy has expired the
// API's own list settles it.
func TestLookup_FreshProcessKeepsTheRecordedProofDate(t *testing.T) {
	f := newFixture(t, []pagpolartest.Option{pagpolartest.WithShapes(pagpolartest.ShapeCacheNoAge)})
	f.warm(t, f.c)
	if _, err := f.c.Payments.SalesByExternalReference(f.ctx, "order-cold"); err != nil {
		t.Fatal(err)
	}
	f.srv.Clock.Advance(2 * time.Second)
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThen500, Times: 1})
	ctx, cancel := endAtAnswer(f.ctx)
	_, err := f.c.Payments.Pix(ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-cold", Customer: goodCustomer})
	cancel()
	if !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("pix: %v, want unknown", err)
	}
	f.srv.Clock.Advance(time.Second)
	cold := f.client(t, WithStore(f.store)) // a new process: no reading of the API's clock
	rctx, rcancel := context.WithTimeout(f.ctx, 500*time.Millisecond)
	r, err := cold.Resume(rctx, "pix:order-cold")
	rcancel()
	if err != nil && !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatal(err)
	}
	if r != nil && r.State == keystore.StateNotExecuted {
		t.Fatalf("Resume in a fresh process settled not executed from the cache's copy; sale %s exists", salesUnder(f, cold, "pix:order-cold")[0].Identifier)
	}
	// The copy lives two processing windows plus ten seconds.
	f.srv.Clock.Advance(2*testWindow + 11*time.Second)
	later := f.client(t, WithStore(f.store))
	r, err = later.Resume(f.ctx, "pix:order-cold")
	if err != nil || r.State != keystore.StateSucceeded {
		t.Fatalf("Resume after the copy expired: %+v, %v; want succeeded", r, err)
	}
	f.assertNoDuplicates(t)
}
