package pagpolar

// Regressions from the final review of the unseen-shape fixes: each failed
// on c8d2c55 (TestUnseenReview2_ServerClockStepsBack also before it).

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// An honest shared cache in front of the API: it stores the first answer
// to the sale lookup (made right after the API's 500, while a read replica
// still lags) and serves it with its true Age (0, then 1) over a slow link
// (1.5 s per body). servedByCache measures the copy's age from when the
// answer was *read*, not from when the lookup was *sent*, so the copy, made
// before the trust moment and missing the sale, passes as fresh: a trusted
// not-found, and the resend charges again (the key was released).
func TestUnseenReview2_SlowCachedCopyPredatesTrust(t *testing.T) {
	f := newFixture(t, nil)
	u, _ := url.Parse(f.srv.URL)
	rp := httputil.NewSingleHostReverseProxy(u)
	var (
		mu     sync.Mutex
		have   bool
		copyAt time.Time
		hdr    http.Header
		body   []byte
		status int
		posted bool
	)
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			rp.ServeHTTP(w, r)
			mu.Lock()
			posted = true
			mu.Unlock()
			return
		}
		mu.Lock()
		armed := posted
		mu.Unlock()
		if !armed || r.Method != http.MethodGet || r.URL.Path != "/sales" || r.URL.Query().Get("external_reference") != "order-rev4" {
			rp.ServeHTTP(w, r)
			return
		}
		mu.Lock()
		if !have {
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r)
			have, copyAt, hdr, body, status = true, time.Now(), rec.Header().Clone(), rec.Body.Bytes(), rec.Code
		}
		h, b, st, age := hdr, body, status, time.Since(copyAt)
		mu.Unlock()
		for k, v := range h {
			w.Header()[k] = v
		}
		w.Header().Set("Age", strconv.Itoa(int(age/time.Second)))
		w.WriteHeader(st)
		w.(http.Flusher).Flush()
		time.Sleep(1500 * time.Millisecond) // slow link
		_, _ = w.Write(b)
	}))
	t.Cleanup(gw.Close)
	c := unseenClient(t, f, gw.URL)
	f.srv.Inject(pagpolartest.Fault{Route: "pix", ExternalReference: "order-rev4", Action: pagpolartest.FaultCommitThen500, LookupLag: 40 * time.Millisecond, Times: 1})
	ch, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-rev4", Customer: goodCustomer})
	id := ""
	if err == nil {
		id = ch.Sale.ID
	}
	t.Logf("err=%v posts=%d", err, f.posts("pix"))
	f.assertNoDuplicates(t)
	_ = id
}

// The API's whole clock (Date and creation times) steps back an hour
// after the client validated its view of it (an NTP correction of a host
// that ran an hour ahead). stepped() only detects a forward jump: the
// earlier samples keep the floor an hour ahead, validated, and a charge's
// own sale, found by the lookup after the API's 500, is excluded as
// "created before the first send": a trusted not-found, a resend, a second
// charge (the 500 released the key).
func TestUnseenReview2_ServerClockStepsBack(t *testing.T) {
	f := newFixture(t, nil)
	var ahead atomic.Bool
	ahead.Store(true)
	base := advProxy(t, f, func(r *http.Request, status int, h http.Header, body []byte) []byte {
		if !ahead.Load() {
			return body
		}
		if d, err := http.ParseTime(h.Get("Date")); err == nil {
			h.Set("Date", d.Add(time.Hour).UTC().Format(http.TimeFormat))
		}
		return editObjects(body, func(m map[string]any) {
			if s, ok := m["created_at"].(string); ok {
				if ts, err := time.Parse(time.RFC3339Nano, s); err == nil {
					m["created_at"] = ts.Add(time.Hour).Format(time.RFC3339Nano)
				}
			}
		})
	})
	c := unseenClient(t, f, base)
	for i := range 3 {
		if _, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: fmt.Sprint("warm-", i), Customer: goodCustomer}); err != nil {
			t.Fatalf("warm-up charge: %v", err)
		}
	}
	t.Logf("before the step: usable=%v off=%v", c.srvClock.usable(), c.srvClock.off())
	ahead.Store(false)
	f.srv.Inject(pagpolartest.Fault{Route: "pix", ExternalReference: "order-back", Action: pagpolartest.FaultCommitThen500, Times: 1})
	_, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-back", Customer: goodCustomer})
	t.Logf("err=%v posts=%d", err, f.posts("pix"))
	f.assertNoDuplicates(t)
}

// Two Age fields (a CDN in front of a shield cache, each adding its own):
// only the first is read.
func TestUnseenReview2_TwoAgeFields(t *testing.T) {
	now := time.Now()
	h := http.Header{"Age": {"0", "600"}}
	if _, cached := servedByCache(h, now, now.Add(-time.Hour)); !cached {
		t.Errorf("Age: 0, Age: 600 passes as a fresh read")
	}
}
