package pagpolar

import (
	"net/http"
	"testing"
	"time"
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
		{"no Date", http.Header{}, true, sent, false},
		{"before the trust moment", date(srv.Add(-time.Hour)), true, sent.Add(time.Minute), false},
	} {
		if _, got := staleByDate(c.h, srv, c.ok, sent, c.notBefore); got != c.stale {
			t.Errorf("%s: stale %v, want %v", c.name, got, c.stale)
		}
	}
}
