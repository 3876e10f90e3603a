package pagpolar

import (
	"net/http"
	"sync"
	"time"
)

// serverClock measures the API's clock from the Date headers of its own
// answers, so that "created after this operation's first send" is decided
// on the server's clock alone (SAFETY rule 12): the client's clock may be
// off by minutes in either direction and nothing the SDK concludes depends
// on it being right.
//
// A Date header is the server's time, truncated to the second, when it
// wrote the answer; the answer reached the client after that. So at the
// moment the client read it, the server's clock showed at least Date, and
// at a later client instant t it shows at least Date + (t - then), measured
// on the client's monotonic clock (drift of the two clocks' rates is
// allowed for). Each answer gives such a lower bound; the estimator keeps
// the last few and uses their median, so that one answer from a server (or
// gateway) whose clock is far ahead cannot move the bound.
//
// The bound is only used to *exclude* an effect: an effect created more
// than RetryPolicy.ServerClockTolerance before the bound at the first send
// cannot be this operation's. If the API ever shows that rule to be wrong
// for itself (its own answer to our request carries a creation time the
// rule would have excluded), the estimator switches itself off for the
// life of the client and exclusion falls back to snapshots and IDs.
type serverClock struct {
	mu       sync.Mutex
	samples  [sampleCount]clockSample
	n, next  int
	disabled bool
	// validated: one of the API's own fresh answers to this client carried
	// a creation time consistent with the bound (within half the
	// tolerance). Until then the bound excludes nothing: a gateway that
	// writes its own Date, or creation times in a mislabelled zone, would
	// otherwise exclude the operation's own effect.
	validated bool
	// hiDate, hiAt: the Date (and client time read) giving the highest
	// lower bound of the API's clock of every answer, kept or not: what
	// dateFloor tells stored copies by.
	hiDate, hiAt time.Time
	// proof, pn, pnext: the answers whose upper bound was not below the
	// highest lower bound when they came (proofCeiling). Kept apart from
	// samples: the copies a cache serves are samples too (their Dates are
	// within the tolerance), and in a ring shared with them they would
	// crowd out every answer the ceiling can use.
	proof     [sampleCount]clockSample
	pn, pnext int
	// fresh: the latest answer to a request no cache serves again (not a
	// GET, not a replay of a first answer), kept whatever observe made of
	// it: what the API's clock read then, by which mayReach tells whether
	// waiting can let a list prove itself current. Dropped when a later
	// answer shows a clock ahead of it (freshContradicted).
	fresh   clockSample
	freshOK bool
}

type clockSample struct {
	date time.Time     // the answer's Date (server clock)
	at   time.Time     // client clock when it was read (monotonic when the system clock)
	rtt  time.Duration // client time from sending the request to reading the answer
}

const (
	// sampleCount is how many Date headers the estimator keeps.
	sampleCount = 9
	// serverClockMaxAge: older samples are not used (clocks get stepped).
	serverClockMaxAge = 10 * time.Minute
	// serverClockDrift bounds how much faster the client's clock may run
	// than the server's (100 ppm; quartz is within 50).
	serverClockDrift = 1e-4
)

// observe records the Date header of an answer to a request sent at client
// time sent and read at client time now. A Date more than tol past the
// upper bound of the earlier answers withdraws the validation (stepped).
func (s *serverClock) observe(h http.Header, sent, now time.Time, tol time.Duration) {
	s.observeAnswer(h, sent, func() time.Time { return now }, tol, false)
}

// observeAnswer is observe at the client time now() reads under the
// estimator's lock; an answer no cache serves again (uncached: a POST's,
// not a replay) also becomes the latest fresh reading (mayReach). Read before it, two answers could be recorded out of
// order: the older one, taken after a newer, would look read before the
// highest bound and replace it (a stored copy's old Date as the floor
// dateFloor tells copies by, and a sample that proves lists current).
func (s *serverClock) observeAnswer(h http.Header, sent time.Time, now func() time.Time, tol time.Duration, uncached bool) {
	v := h.Get("Date")
	if v == "" {
		return
	}
	d, err := http.ParseTime(v)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := now()
	s.observeLocked(d, sent, t, tol)
	if uncached {
		s.fresh, s.freshOK = clockSample{date: d, at: t, rtt: max(t.Sub(sent), 0)}, true
	}
}

func (s *serverClock) observeLocked(d, sent, now time.Time, tol time.Duration) {
	rtt := max(now.Sub(sent), 0)
	if s.freshOK && freshContradicted(s.fresh, d, now, tol) {
		// This answer's clock is ahead of everything the fresh reading
		// allows: the reading no longer bounds the API's clock (a clock
		// stepped forward since, or the reading's host behind the one
		// answering now), so it cannot tell that waiting is in vain.
		s.freshOK = false
	}
	if el := now.Sub(s.hiAt); s.hiAt.IsZero() || el < 0 || el > serverClockMaxAge || d.After(s.hiDate.Add(el)) {
		// A reading older than serverClockMaxAge bounds nothing any more
		// (dateFloor refuses it); kept as the highest, carried forward
		// across a step of the client's clock, it would stop every later
		// answer from giving a bound, and a lookup that knows no bound
		// takes any stored copy for the list as it is.
		s.hiDate, s.hiAt = d, now
	}
	if !d.Add(time.Second + rtt).Before(s.hiDate.Add(now.Sub(s.hiAt))) {
		s.proof[s.pnext] = clockSample{date: d, at: now, rtt: rtt}
		s.pnext = (s.pnext + 1) % len(s.proof)
		if s.pn < len(s.proof) {
			s.pn++
		}
	}
	c, ok := s.ceilingLocked(now)
	if !ok {
		// No recent sample: the estimator starts afresh, and what
		// validated the old samples says nothing of the new ones (after a
		// step that outlasted serverClockMaxAge, the new samples are the
		// stepped ones). Validation is earned again by check.
		s.validated = false
	}
	if f, fok := s.lowerLocked(now); fok && d.Add(time.Second+tol).Before(f) {
		// (Checked once switched off too: a Date behind what earlier
		// answers proved is a stored copy's or a stepped clock's, and kept
		// it would drag the bound dateFloor gives back with it.)
		// The clock writing Date stepped back past what earlier answers
		// proved: the floor is now ahead of the API's clock and would
		// exclude the operation's own effect. Off for good — operations
		// already under way recorded FloorOK, and only off() stops their
		// exclusion.
		s.validated, s.disabled = false, true
		return
	}
	if ok && stepped(d, c, tol) {
		// The clock writing Date jumped forward (or one answer came from
		// a clock far ahead). The validation is withdrawn, and the sample
		// is not kept: if it were, once most samples were stepped the
		// floor would move with them — an hour late, excluding the
		// operation's own effect — and a fresh answer checked against a
		// floor taken before the jump would validate it again. Kept out,
		// the floor stays consistent with what validated it; a step that
		// lasts enters only once the earlier samples age out
		// (serverClockMaxAge), and is then met by check's self-test
		// before it can exclude anything (validated stays false until a
		// fresh effect agrees with the new floor).
		s.validated = false
		return
	}
	s.samples[s.next] = clockSample{date: d, at: now, rtt: rtt}
	s.next = (s.next + 1) % len(s.samples)
	if s.n < len(s.samples) {
		s.n++
	}
}

// freshContradicted reports whether an answer read at client time now,
// after the fresh reading f, carries a Date d more than tol past the upper
// bound f gives of the API's clock then (Date + 1 s + round trip, carried
// forward with drift): some clock of the API is ahead of what f allows, so
// f is no upper bound of the Dates a list may carry. A pure function.
func freshContradicted(f clockSample, d, now time.Time, tol time.Duration) bool {
	el := now.Sub(f.at)
	if el < 0 {
		return false
	}
	upper := f.date.Add(time.Second + f.rtt + el + time.Duration(float64(el)*serverClockDrift))
	return d.After(upper.Add(tol))
}

// mayReach reports whether the API's clock may show target by client time
// until, by the latest fresh reading (observeAnswer); see reachable.
func (s *serverClock) mayReach(target, now, until time.Time, tol time.Duration) bool {
	s.mu.Lock()
	f, ok := s.fresh, s.freshOK
	s.mu.Unlock()
	return reachable(f, ok, target, now, until, tol)
}

// reachable reports whether the API's clock, read as f by an answer no
// cache served, may show target by client time until: its upper bound
// then (Date + 1 s + round trip, carried forward with drift, plus tol for
// a host behind the others) is not below target. false only when even that
// bound falls short — the API's clock stepped back behind the Dates
// earlier answers carried, so no list it writes before until can prove
// itself current and looking again would only wait. Without a reading
// (ok false), one older than serverClockMaxAge, or without a target: true.
// It decides only whether to wait, never what a list proves. A pure
// function of its arguments.
func reachable(f clockSample, ok bool, target, now, until time.Time, tol time.Duration) bool {
	if !ok || target.IsZero() || now.Sub(f.at) > serverClockMaxAge || now.Before(f.at) {
		return true
	}
	el := max(until.Sub(f.at), 0)
	upper := f.date.Add(time.Second + f.rtt + el + time.Duration(float64(el)*serverClockDrift) + tol)
	return !upper.Before(target)
}

// floor returns a lower bound of the server's clock at client time now, or
// false when there is no recent sample or the estimator is switched off.
func (s *serverClock) floor(now time.Time) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.floorLocked(now)
}

// usableFloor is floor and usable read under one lock: the floor a first
// send records, and whether it may exclude effects (FloorOK).
func (s *serverClock) usableFloor(now time.Time) (floor time.Time, usable bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.floorLocked(now)
	return f, ok && s.validated
}

func (s *serverClock) floorLocked(now time.Time) (time.Time, bool) {
	if s.disabled {
		return time.Time{}, false
	}
	return s.lowerLocked(now)
}

// dateFloor is the lower bound of the API's clock that tells a stored copy
// by its Date (staleByDate): the highest any answer's Date gives, whether
// the estimator kept it or not, and kept when the estimator is switched
// off. It only ever withdraws trust: a copy's old Date must not drag it
// back (which a median of the samples, or a first sample that is itself a
// copy, would), and a Date from a clock far ahead only makes fresh answers
// look stale, which costs a later lookup, never a false "not found".
func (s *serverClock) dateFloor(now time.Time) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dateFloorLocked(now)
}

func (s *serverClock) dateFloorLocked(now time.Time) (time.Time, bool) {
	if s.hiAt.IsZero() {
		return time.Time{}, false
	}
	el := now.Sub(s.hiAt)
	if el < 0 || el > serverClockMaxAge {
		return time.Time{}, false
	}
	return s.hiDate.Add(el - time.Duration(float64(el)*serverClockDrift)), true
}

// proofCeiling is the upper bound of the API's clock that proves an answer
// was made after a moment (staleByDate): the median of the answers' upper
// bounds (Date + 1 s + round trip, carried forward), leaving out every
// answer whose upper bound is below the highest lower bound any answer
// gave (when it came, and now) — an answer that cannot have been the API's clock at that moment is
// a stored copy or a host behind, and kept it would pull the ceiling down
// until a copy made before the moment passed for one made after it. A
// ceiling too high (a slow answer, a clock far ahead) only makes fresh
// answers look stale, which costs a later lookup, never a false "not
// found". It is kept when the estimator is switched off: it only ever
// withdraws trust.
func (s *serverClock) proofCeiling(now time.Time) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proofCeilingLocked(now)
}

func (s *serverClock) proofCeilingLocked(now time.Time) (time.Time, bool) {
	hi, _ := s.dateFloorLocked(now) // zero without one: nothing left out
	return medianUpper(s.proof[:s.pn], now, hi)
}

// proofCeilingFrom is proofCeiling at the client time now() reads under
// the lock, or at from if that is later: a bound for a moment at or after
// from (proveBy's), never one for a moment before it. At from itself, a
// caller that read from before the lock could find every proof sample
// added meanwhile newer than it, and the ceiling would say there is none
// (ceilingNow). The time is the clock's, not a sample's: after the
// client's clock stepped back, a sample's time is not "now", and a bound
// taken there would be for a moment before the one it must prove.
func (s *serverClock) proofCeilingFrom(from time.Time, now func() time.Time) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := now()
	if t.Before(from) {
		t = from
	}
	return s.proofCeilingLocked(t)
}

// proofBoundsNow is dateFloor and proofCeiling at one client time, read
// under the lock and returned with them: read before it, a highest bound
// recorded meanwhile would look read after "now" and give no floor (and
// leave the ceiling unfiltered), and a stored copy would pass for current.
func (s *serverClock) proofBoundsNow(now func() time.Time) (t, floor time.Time, floorOK bool, ceil time.Time, ceilOK bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t = now()
	floor, floorOK = s.dateFloorLocked(t)
	ceil, ceilOK = s.proofCeilingLocked(t)
	return t, floor, floorOK, ceil, ceilOK
}

func (s *serverClock) lowerLocked(now time.Time) (time.Time, bool) {
	var bounds [sampleCount]time.Time
	n := 0
	for i := range s.n {
		sm := s.samples[i]
		el := now.Sub(sm.at)
		if el < 0 || el > serverClockMaxAge {
			continue // the client clock went backwards, or the sample is stale
		}
		el -= time.Duration(float64(el) * serverClockDrift)
		// insertion sort into bounds[:n]
		b := sm.date.Add(el)
		j := n
		for j > 0 && bounds[j-1].After(b) {
			bounds[j] = bounds[j-1]
			j--
		}
		bounds[j] = b
		n++
	}
	if n == 0 {
		return time.Time{}, false
	}
	return bounds[(n-1)/2], true
}

// ceiling returns an upper bound of the server's clock at client time now
// (the median of the answers' upper bounds), or false without a recent
// sample. It is kept when the estimator is switched off: it only ever
// withdraws trust.
func (s *serverClock) ceiling(now time.Time) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ceilingLocked(now)
}

// ceilingNow is ceiling at the client time now() reads under the lock.
// Read before it, "now" can be older than samples other goroutines add
// while this one waits for the lock, and a sample newer than now bounds
// nothing then (medianUpper leaves it out): with every sample that new,
// the ceiling would say there is no reading at all.
func (s *serverClock) ceilingNow(now func() time.Time) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ceilingLocked(now())
}

// freshCeilingNow is an upper bound of the API's clock at client time now
// from the latest answer no cache serves again (a POST's): what tells a
// step back of the API's clock from a stored copy's old Date, which a GET's
// answer cannot; false without one.
//
// It reads the client time now() under the lock (see ceilingNow): the
// latest fresh reading is never newer than it.
func (s *serverClock) freshCeilingNow(now func() time.Time) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.freshCeilingLocked(now())
}

func (s *serverClock) freshCeilingLocked(now time.Time) (time.Time, bool) {
	if !s.freshOK {
		return time.Time{}, false
	}
	return medianUpper([]clockSample{s.fresh}, now, time.Time{})
}

func (s *serverClock) ceilingLocked(now time.Time) (time.Time, bool) {
	return medianUpper(s.samples[:s.n], now, time.Time{})
}

// medianUpper is the median of the upper bounds of the API's clock at
// client time now that the samples give (Date, truncated to the second,
// + 1 s + round trip, carried forward with drift), leaving out samples
// older than serverClockMaxAge and those whose bound is below floor (zero:
// none left out); false without one.
func medianUpper(ss []clockSample, now, floor time.Time) (time.Time, bool) {
	var bounds [sampleCount]time.Time
	n := 0
	for _, sm := range ss {
		el := now.Sub(sm.at)
		if el < 0 || el > serverClockMaxAge {
			continue
		}
		el += time.Duration(float64(el) * serverClockDrift)
		b := sm.date.Add(time.Second + sm.rtt + el)
		if !floor.IsZero() && b.Before(floor) {
			continue
		}
		j := n
		for j > 0 && bounds[j-1].After(b) {
			bounds[j] = bounds[j-1]
			j--
		}
		bounds[j] = b
		n++
	}
	if n == 0 {
		return time.Time{}, false
	}
	return bounds[n/2], true
}

// stepped reports whether a Date d lies more than tol past the upper
// bound c the earlier answers give: the clock writing Date jumped forward.
// A pure function, for the table test.
func stepped(d, c time.Time, tol time.Duration) bool { return d.After(c.Add(tol)) }

// off reports whether the estimator was switched off.
func (s *serverClock) off() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.disabled
}

// usable reports whether the bound may exclude effects: validated and not
// switched off.
func (s *serverClock) usable() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.validated && !s.disabled
}

// check is the self-test, on one of our own fresh effects: created at
// created (precision res) for a first send whose bound was floor, read when
// the server's clock was at most ceiling (zero: no upper bound). It
// validates the estimator when the effect sits comfortably after the bound,
// and switches it off for good when the time rule would have excluded it,
// or when the effect is stamped after the moment its answer was read (the
// clock stamping effects runs ahead of the one writing Date: an earlier
// effect would look created after a later first send). It reports whether
// it switched it off now.
func (s *serverClock) check(created time.Time, res time.Duration, floor, ceiling time.Time, tol time.Duration) (disabledNow bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.disabled:
		return false
	case created.Add(res + tol).Before(floor):
		s.disabled = true
		return true
	case !ceiling.IsZero() && created.After(ceiling.Add(tol)):
		s.disabled = true
		return true
	case !created.Add(res + tol/2).Before(floor):
		s.validated = true
	}
	return false
}

// exclusionMargin is how far before a floor an effect's creation time must
// lie for the time rule to exclude it: more than every error the estimator
// cannot detect. A step of the API's clock smaller than the step
// threshold (Date's whole second plus tol, observe) goes unnoticed, and so
// does a second API host whose clock is behind the first by as much; tol
// covers the rest (SAFETY rule 12).
func exclusionMargin(tol time.Duration) time.Duration {
	undetected := time.Second + tol
	return tol + 2*undetected
}

// excludedByTime reports whether an effect created at created (precision
// res) was created before a first send whose floor (server clock) is
// floor, beyond everything the SDK cannot detect. A pure function.
func excludedByTime(created time.Time, res time.Duration, floor time.Time, tol time.Duration) bool {
	return created.Add(res + exclusionMargin(tol)).Before(floor)
}

// floorHolds is the re-check of a recorded floor by the process that reads
// it: its own reading of the API's clock now (ceiling, an upper bound; ok
// false without a recent answer) must be at or past the floor, less what
// the estimator cannot detect — a clock stepped back since the floor was
// recorded (in another process, or before a restart) leaves the floor
// ahead of the API's clock, and it would exclude the operation's own
// effect. Without a reading the floor excludes nothing. A pure function.
func floorHolds(floor, ceiling time.Time, ok bool, tol time.Duration) bool {
	if floor.IsZero() || !ok {
		return false
	}
	return !ceiling.Add(time.Second + tol).Before(floor)
}
