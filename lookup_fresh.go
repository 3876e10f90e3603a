// Whether a list answer is current: a copy served by a cache (Age), an
// answer whose Date does not prove it was made after the moment it must
// postdate, and the clock probe that lets a snapshot tell. staleByDate and
// servedByCache are pure functions of the answer's headers and the
// lookup's moments.

package pagpolar

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// servedByCache reports whether an answer came from a cache rather than
// from the API: a cache that serves a stored answer gives its Age (RFC
// 9111 §5.1), which an origin server does not send. Such an answer is no
// proof of what the API holds now.
//
// Age is how long ago (whole seconds) the copy was made from the API's
// answer. A copy of Age 0 or 1 made after notBefore is as good as a fresh
// read (a lookup only needs the list as it was after its trust moment):
// with now the moment the request was sent (the answer may have taken
// long to arrive), it was made no earlier than now − Age − 1 s. For a
// snapshot (notBefore zero) only Age 0 passes — a copy under a second old
// is no worse than an effect made while the snapshot was read, which the
// snapshot cannot see either. So CDNs that stamp "Age: 0" on every answer
// they pass through do not stop lookups. An Age that is not a whole number
// is read as cached.
func servedByCache(h http.Header, now, notBefore time.Time) (string, bool) {
	vs := h.Values("Age")
	if len(vs) == 0 {
		return "", false
	}
	// Several caches may each add one: the oldest counts, and one that
	// cannot be read makes the copy cached.
	v, age := strings.Join(vs, ", "), int64(-1)
	var err error
	for _, x := range vs {
		var a int64
		if a, err = strconv.ParseInt(strings.TrimSpace(x), 10, 64); err != nil || a < 0 {
			age = -1
			break
		}
		age = max(age, a)
	}
	switch {
	case err != nil || age < 0:
	case notBefore.IsZero() && age == 0:
		return "", false
	case !notBefore.IsZero() && age <= 1 && now.Before(notBefore):
		// Before the trust moment a not-found counts for nothing anyway,
		// and what a copy lists did exist.
		return "", false
	case !notBefore.IsZero() && age <= 1 && !now.Add(-time.Duration(age+1)*time.Second).Before(notBefore):
		// At most a second or two old: notBefore may be another host's
		// clock, and this bounds what its skew could let through to what
		// the trust moment's margins already allow for.
		return "", false
	}
	return "the answer was served by a cache (Age: " + oneLine(v) + "), not read from the API after the moment a lookup needs", true
}

// dateProof is what the API's clock was known to be when a lookup's
// request was sent, by the Date headers of earlier answers: what
// staleByDate tells a stored copy by.
type dateProof struct {
	floor   time.Time // the highest lower bound any answer gave (dateFloor)
	floorOK bool
	ceil    time.Time // an upper bound consistent with that floor (proofCeiling)
	ceilOK  bool
	tol     time.Duration // how far apart the API's own clocks may be
	// recorded: the Date the operation's record says a list must carry
	// (opMeta.ProveBy), for a client with no upper bound of its own.
	recorded time.Time
}

// dateProofNow is what the API's clock is known to be now (dateFloor and
// proofCeiling at one client time, read under the estimator's lock), and
// that client time: the moment a read is sent at.
func (c *Client) dateProofNow() (time.Time, dateProof) {
	p := dateProof{tol: c.policy.ServerClockTolerance}
	var sent time.Time
	sent, p.floor, p.floorOK, p.ceil, p.ceilOK = c.srvClock.proofBoundsNow(c.clock.Now)
	return sent, p
}

// proofForRead is what the API's clock is known to be as a read is sent
// (dateProofNow, with the record's proveBy), and the client time it is
// sent at. It probes the clock first (probeClock) when the read could not
// tell a stored copy otherwise (needsProbe).
func (c *Client) proofForRead(ctx context.Context, notBefore, proveBy time.Time) (time.Time, dateProof) {
	sent, proof := c.dateProofNow()
	proof.recorded = proveBy
	if needsProbe(proof, sent, notBefore) {
		c.probeClock(ctx)
		sent, proof = c.dateProofNow()
		proof.recorded = proveBy
	}
	return sent, proof
}

// needsProbe reports whether a read sent at client time sent, which must
// show the list as it was after notBefore (zero: a snapshot), can tell a
// stored copy only after a reading of the API's clock no cache can have
// served: a snapshot with no lower bound of it (a copy would hide the
// effects made since, to be taken later for this operation's). A lookup
// does not probe (README's limits: the lookup before a fresh process's
// first send on a store whose history is unproven, and a record whose
// sender knew no upper bound, have nothing to judge a copy's Date by; a
// probe there made those first sends wait past short leases). A pure
// function of its arguments.
func needsProbe(p dateProof, sent, notBefore time.Time) bool {
	return notBefore.IsZero() && !p.floorOK
}

// probeClock reads a sale no one has (a fresh random identifier, so no
// cache holds a copy of the answer): the API's own 404 carries its Date,
// which gives the client a reading of the API's clock. Its failure is not
// an error: the snapshot is then read without one, as before.
func (c *Client) probeClock(ctx context.Context) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	path := strings.Replace(wire.RouteSale, "{identifier}", wire.ClockProbePrefix+hex.EncodeToString(b[:]), 1)
	_, _ = c.getN(ctx, c.url(path, nil), 1)
}

// staleByDate reports whether an answer's own Date fails to prove it was
// made after the moment it must postdate, whether or not a cache said so
// with Age (a micro-cache that ignores no-cache and sends no Age passes the
// stored answer's Date on). p is what earlier answers proved of the API's
// clock at client time sent; the answer must have been made after
// notBefore (zero: after sent, for a snapshot).
//
// After a trust moment the answer must prove it is newer: its Date (whole
// seconds, so the answer was made at Date or later) must reach the upper
// bound of the API's clock at notBefore, plus the tolerance between the
// API's hosts (a host ahead stamps a copy made before the moment with a
// later Date). A Date in the same second as the moment proves nothing: a
// copy made a few hundred milliseconds earlier carries it too. Without an
// upper bound (no earlier answer to this client) a Date more than a second
// below the lower bound is still told for a copy. An answer without a
// Date, from an API whose other answers carry one, proves nothing either;
// from an API that sends none, nothing can be told by it. Before the trust moment
// nothing is concluded (a not-found counts for nothing then), and for a
// snapshot only a Date more than a second below the lower bound is a
// copy's: a copy under a second old is no worse than an effect made while
// the snapshot was read.
//
// Clocks that mislead the bounds (a step back, a host behind, a slow
// answer) can only make a fresh answer look stale, which costs a later
// lookup, never a false "not found". A pure function of its arguments.
func staleByDate(h http.Header, p dateProof, sent, notBefore time.Time) (string, bool) {
	d, err := http.ParseTime(h.Get("Date"))
	switch {
	case err != nil && !notBefore.IsZero() && !sent.Before(notBefore) && (p.ceilOK || p.floorOK || !p.recorded.IsZero()):
		// The API's other answers carry a Date; this one has none (or
		// one that cannot be read): nothing tells it from a stored copy.
		return "the answer has no Date the SDK can read, though the API's other answers carry one: nothing proves it is not a stored copy", true
	case err != nil:
		return "", false // an API that sends no Date: nothing can be told by it (README's limits)
	}
	target, ok := proofTarget(p, sent, notBefore)
	if !ok || !d.Before(target) {
		return "", false
	}
	if !notBefore.IsZero() && target.Equal(p.recorded) {
		return fmt.Sprintf("the answer's Date (%s) is before %s, the Date the operation's record says a list made after its trust moment carries: it may be a stored copy, not the list as it is now",
			d.UTC().Format(time.RFC3339), p.recorded.UTC().Format(time.RFC3339Nano)), true
	}
	if !notBefore.IsZero() && p.ceilOK {
		el := sent.Sub(notBefore)
		return fmt.Sprintf("the answer's Date (%s) does not prove it was made after the moment the list must postdate (the API's clock then at most %s, its hosts up to %s apart): it may be a stored copy, not the list as it is now",
			d.UTC().Format(time.RFC3339), p.ceil.Add(-el).UTC().Format(time.RFC3339Nano), p.tol), true
	}
	return fmt.Sprintf("the answer's Date (%s) is older than the moment the list must postdate (the API's clock at least %s): a stored copy, not the list as it is now",
		d.UTC().Format(time.RFC3339), target.Add(time.Second).UTC().Format(time.RFC3339)), true
}

// proofTarget is the earliest Date that proves an answer to a request sent
// at client time sent was made after notBefore (zero: after sent, for a
// snapshot), by what p knows of the API's clock: staleByDate's threshold.
// false: no Date is needed (before the trust moment, or nothing known of
// the API's clock). A pure function of its arguments.
func proofTarget(p dateProof, sent, notBefore time.Time) (time.Time, bool) {
	switch {
	case !notBefore.IsZero() && sent.Before(notBefore):
		return time.Time{}, false // before the trust moment a not-found counts for nothing anyway
	case !notBefore.IsZero() && (p.ceilOK || !p.recorded.IsZero()):
		// The later of this client's own threshold and the one the client
		// that set the trust moment recorded: a client new to the API (a
		// new process, another host) may have read nothing but stored
		// copies, whose Dates make a ceiling too low.
		var t time.Time
		if p.ceilOK {
			el := sent.Sub(notBefore)
			t = p.ceil.Add(-el + time.Duration(float64(el)*serverClockDrift) + p.tol)
		}
		if p.recorded.After(t) {
			t = p.recorded
		}
		return t, true
	case !p.floorOK:
		return time.Time{}, false
	}
	must := p.floor
	if !notBefore.IsZero() {
		must = p.floor.Add(-sent.Sub(notBefore))
	}
	// A Date more than a second below the lower bound is a copy's.
	return must.Add(-time.Second), true
}
