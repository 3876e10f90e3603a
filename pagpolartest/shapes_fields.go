package pagpolartest

import (
	"hash/fnv"
	"net/http"
	"strings"
	"time"
)

// The shapes in which a field looks like one the SDK knows and is another
// (a numeric key beside an identifier), answer kinds differ (a list item
// is not a POST answer), items lack what tells them apart, or the API's
// clock and caches mislead.

// numericKey is a stable numeric primary key for an identifier.
func numericKey(id string) int {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int(h.Sum32()%90000) + 1000
}

// renderFields applies the field shapes to one object of kind; listItem
// says it is an item of a list answer.
func (s *Server) renderFields(kind bodyKind, v map[string]any, listItem bool) {
	if s.has(ShapeSaleFKID) {
		switch kind {
		case bodySale:
			if id, ok := v["identifier"].(string); ok {
				v["id"] = numericKey(id)
			}
		case bodyRefund:
			if sid, ok := v["sale_identifier"].(string); ok && listItem {
				delete(v, "sale_identifier")
				v["sale_id"] = numericKey(sid)
			}
		}
	}
	if !listItem || (kind != bodySale && kind != bodySubscription) {
		return
	}
	if s.has(ShapeUpgradedBeforeRetry) && kind == bodySubscription {
		switch v["offer_identifier"] {
		case "plan-basic":
			v["offer_identifier"] = "plan-pro"
		case "plan-pro":
			v["offer_identifier"] = "plan-basic"
		}
		delete(v, "plan_changes")
	}
	if s.has(ShapeListOfferID) {
		if o, ok := v["offer_identifier"].(string); ok {
			delete(v, "offer_identifier")
			v["offer_id"] = numericKey(o)
		}
	}
	if s.has(ShapeSparseItems) {
		delete(v, "payment_method")
		delete(v, "offer_identifier")
		delete(v, "offer_id")
	}
}

// renderNestedPlanChange applies the field shapes to a plan change listed
// in a subscription (GET /subscriptions/{id} and the subscription answers).
func (s *Server) renderNestedPlanChange(v map[string]any) {
	if sid, ok := v["subscription_id"].(string); ok && s.has(ShapeSaleFKID) {
		v["subscription_id"] = numericKey(sid)
	}
}

// apiClock is the API's clock at true time t, as its Date headers show
// it: off by the steps StepClock made up to t, and an hour ahead for the
// server's first processing window under ShapeDateStepBack.
func (s *Server) apiClock(t time.Time) time.Time { return s.shapeClock(s.stepped(t)) }

// shapeClock is ShapeDateStepBack's part of the API's clock, which the
// creation times of effects also show when rendered.
func (s *Server) shapeClock(t time.Time) time.Time {
	if s.has(ShapeDateStepBack) && t.Before(s.born.Add(s.cfg.processingWindow)) {
		return t.Add(time.Hour)
	}
	return t
}

// stepped is true time t on the API's own clock, by the steps StepClock
// made up to t: what the effects made at t are stamped with.
func (s *Server) stepped(t time.Time) time.Time {
	s.stepMu.Lock()
	defer s.stepMu.Unlock()
	for i := len(s.steps) - 1; i >= 0; i-- {
		if !s.steps[i].at.After(t) {
			return t.Add(s.steps[i].off)
		}
	}
	return t
}

// clockStep: from true time at on, the API's own clock runs off from the
// Clock.
type clockStep struct {
	at  time.Time
	off time.Duration
}

// StepClock steps the API's own clock by d from now on, as an NTP
// correction on its servers would: the Date headers of every answer from
// now on, and the creation times of the effects made from now on, run d
// further from Clock. Effects made before keep the creation times their
// clock stamped then. Steps add up; Clock itself (every wait, window and
// expiry) does not move.
func (s *Server) StepClock(d time.Duration) {
	s.stepMu.Lock()
	defer s.stepMu.Unlock()
	off := d
	if n := len(s.steps); n > 0 {
		off += s.steps[n-1].off
	}
	s.steps = append(s.steps, clockStep{at: s.Clock.Now(), off: off})
}

// cachedList is a list answer the micro-cache of ShapeCacheNoAge keeps.
type cachedList struct {
	at     time.Time // true time it was stored
	date   string
	link   string
	status int
	body   []byte
}

func (s *Server) listCacheTTL() time.Duration { return 2*s.cfg.processingWindow + 10*time.Second }

// cachedListAnswer returns the stored answer for a list request, if the
// micro-cache holds a fresh one.
func (s *Server) cachedListAnswer(cred string, r *http.Request, now time.Time) (cachedList, bool) {
	if !s.has(ShapeCacheNoAge) {
		return cachedList{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.listCache[cred+" "+r.URL.RequestURI()]
	if !ok || now.Sub(c.at) >= s.listCacheTTL() {
		return cachedList{}, false
	}
	return c, true
}

// storeListAnswer keeps a list answer in the micro-cache.
func (s *Server) storeListAnswer(cred string, r *http.Request, now time.Time, status int, h http.Header, body []byte) {
	if !s.has(ShapeCacheNoAge) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listCache == nil {
		s.listCache = map[string]cachedList{}
	}
	k := cred + " " + r.URL.RequestURI()
	if c, ok := s.listCache[k]; ok && now.Sub(c.at) < s.listCacheTTL() {
		return
	}
	s.listCache[k] = cachedList{at: now, date: h.Get("Date"), link: h.Get("Link"), status: status, body: append([]byte(nil), body...)}
}

func isListRoute(name string) bool {
	return strings.HasPrefix(name, "list_") || name == routeGetSales || name == routeGetRefunds
}
