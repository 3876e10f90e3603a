// Whether a list answer is current: a copy served by a cache (Age), or an
// answer dated before the moment it must postdate. Pure functions of the
// answer's headers and the lookup's moments.

package pagpolar

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
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

// staleByDate reports whether an answer is older than the moment it must
// postdate, by its own Date, whether or not a cache said so with Age (a
// micro-cache that ignores no-cache and sends no Age passes the answer's
// Date on). floor is a lower bound of the API's clock at client time sent
// (ok false without one: then nothing is concluded); the answer must have
// been made after notBefore (zero: after sent, for a snapshot). On the
// API's clock that moment is at least floor − (sent − notBefore); a Date
// (whole seconds) more than a second before it is a stored copy. No
// tolerance is added: floor is a lower bound, so a clock that misleads it
// (a step back, a host behind) can only make a fresh answer look stale,
// which costs a later lookup, never a false "not found". A pure function
// of its arguments.
func staleByDate(h http.Header, floor time.Time, ok bool, sent, notBefore time.Time) (string, bool) {
	if !ok {
		return "", false
	}
	d, err := http.ParseTime(h.Get("Date"))
	if err != nil {
		return "", false
	}
	must := floor
	switch {
	case notBefore.IsZero():
	case sent.Before(notBefore):
		return "", false // before the trust moment a not-found counts for nothing anyway
	default:
		must = floor.Add(-sent.Sub(notBefore))
	}
	if d.Add(time.Second).Before(must) {
		return fmt.Sprintf("the answer's Date (%s) is older than the moment the list must postdate (the API's clock at least %s): a stored copy, not the list as it is now",
			d.UTC().Format(time.RFC3339), must.UTC().Format(time.RFC3339)), true
	}
	return "", false
}
