// Whether the settle loop stops looking at lists that cannot prove
// themselves current only where waiting could not help: the API's clock,
// read from an answer no cache served, must be unable to reach the Date a
// current list carries. A reading that later answers contradict (a clock
// ahead of everything the reading allows) cannot tell that.

package pagpolar

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// TestSettle_PostAnswersFromAClockBehindStillSettle: the API's POST
// answers carry a Date 30 s behind its list answers (a write host, or a
// gateway on the POST route, whose clock is behind). The lists prove
// themselves current by their own Dates a second or two after the trust
// moment, well within the call's wait, so a charge answered 500 (nothing
// created) settles by a trusted not-found and one resend — the lists'
// answers after the POST show the API's clock ahead of anything the POST
// answer's Date allows, so that Date cannot tell that waiting is in vain.
func TestSettle_PostAnswersFromAClockBehindStillSettle(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	base := bodyProxy(t, f, func(r *http.Request, status int, h http.Header, body []byte) []byte {
		if d, err := http.ParseTime(h.Get("Date")); err == nil && r.Method == http.MethodPost {
			h.Set("Date", d.Add(-30*time.Second).UTC().Format(http.TimeFormat))
		}
		return body
	})
	c := proxiedClient(t, f, base)
	f.warm(t, c)
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.Fault500NoCommit, Times: 1})
	_, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-post-behind", Customer: goodCustomer})
	if err != nil {
		t.Fatalf("pix: %v, want a success after a trusted not-found and a resend", err)
	}
	if n, s := f.posts("pix"), f.successful("sale"); n != 2 || s != 1 {
		t.Errorf("%d POSTs and %d sales, want 2 and 1", n, s)
	}
	f.assertNoDuplicates(t)
}

// TestSettle_ClockSteppedForwardAfterTheLastPostStillSettles: the API's
// clock ran 30 s behind while this client's last POST was answered, then
// was stepped forward (to the right time). The next charge's connection
// is dropped before anything is processed, so no answer refreshes that
// reading. The lists carry the corrected clock and prove themselves
// current within the call's wait: the charge settles by a trusted
// not-found and one resend, not "outcome unknown" at the trust moment.
func TestSettle_ClockSteppedForwardAfterTheLastPostStillSettles(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	var behind atomic.Bool
	behind.Store(true)
	base := bodyProxy(t, f, func(r *http.Request, status int, h http.Header, body []byte) []byte {
		if d, err := http.ParseTime(h.Get("Date")); err == nil && behind.Load() {
			h.Set("Date", d.Add(-30*time.Second).UTC().Format(http.TimeFormat))
		}
		return body
	})
	c := proxiedClient(t, f, base)
	f.warm(t, c)
	if _, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-before-step", Customer: goodCustomer}); err != nil {
		t.Fatalf("first pix: %v", err)
	}
	behind.Store(false)
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultDropBeforeProcessing, Times: 1})
	_, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-after-step", Customer: goodCustomer})
	if err != nil {
		t.Fatalf("pix: %v, want a success after a trusted not-found and a resend", err)
	}
	if n, s := f.posts("pix"), f.successful("sale"); n != 3 || s != 2 {
		t.Errorf("%d POSTs and %d sales, want 3 and 2", n, s)
	}
	f.assertNoDuplicates(t)
}

// TestLookAgainMayProve_CountsTheLastLookAfterTheWait: the settle loop
// checks MaxSettleWait after each lookup and then pauses notCurrentWait
// before the next, so its last look is sent up to one pause after the wait
// has passed. A Date the API's clock can reach only by then is still
// worth waiting for.
func TestLookAgainMayProve_CountsTheLastLookAfterTheWait(t *testing.T) {
	f := newFixture(t, nil)
	c, p := f.c, f.c.policy
	start := c.clock.Now()
	api := time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC)
	c.srvClock.mu.Lock()
	c.srvClock.fresh, c.srvClock.freshOK = clockSample{date: api, at: start}, true
	c.srvClock.mu.Unlock()
	// The reading's upper bound at the last look, less half the pause.
	last := p.MaxSettleWait + notCurrentWait(p)
	el := last + time.Duration(float64(last)*serverClockDrift)
	target := api.Add(time.Second + el + p.ServerClockTolerance - notCurrentWait(p)/2)
	if !c.lookAgainMayProve(lookupOutcome{notCurrent: true, proveBy: target}, start) {
		t.Errorf("a Date reachable by the last look (%s after the start) is not waited for", last)
	}
	if c.lookAgainMayProve(lookupOutcome{notCurrent: true, proveBy: target.Add(notCurrentWait(p))}, start) {
		t.Errorf("a Date not reachable by the last look is waited for")
	}
}

// TestFreshContradicted_OnlyByAClockAheadOfTheReading: an answer after the
// fresh reading voids it only when its Date is more than the tolerance
// past the reading's upper bound then; an older Date (a stored copy, a
// clock stepped back) never does.
func TestFreshContradicted_OnlyByAClockAheadOfTheReading(t *testing.T) {
	read := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	api := time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC)
	f := clockSample{date: api, at: read, rtt: 200 * time.Millisecond}
	const tol = 2 * time.Second
	for _, c := range []struct {
		name string
		d    time.Time
		now  time.Time
		want bool
	}{
		{"same second", api, read, false},
		{"within the second, round trip and tolerance", api.Add(3 * time.Second), read, false},
		{"ahead by more than that", api.Add(4 * time.Second), read, true},
		{"ten seconds on, ten seconds later", api.Add(10 * time.Second), read.Add(10 * time.Second), false},
		{"thirty seconds ahead, ten seconds later", api.Add(40 * time.Second), read.Add(10 * time.Second), true},
		{"a stored copy's old Date", api.Add(-time.Hour), read.Add(time.Second), false},
		{"read before the reading (concurrent answers)", api.Add(time.Hour), read.Add(-time.Second), false},
	} {
		if got := freshContradicted(f, c.d, c.now, tol); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
