// Which requests a fault meets: matching, seeded probability, deterministic
// faults chosen per order, first-only faults, invalid faults refused; and the
// server-wide rate limit, latency and Close.

package pagpolartest

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// TestFaultMatching: Times, injection order, external reference, key,
// route and the seeded coin.
func TestFaultMatching(t *testing.T) {
	s := NewServer(t)
	c := newClient(t, s)
	s.Inject(Fault{Route: "pix", ExternalReference: "only-this", Action: Fault500NoCommit})
	s.Inject(Fault{Route: "pix", Key: "only-key", Times: 1, Action: FaultUnavailable})
	s.Inject(Fault{Route: "boleto", Times: 2, Action: FaultGateway})
	want(t, c.pix("a", "other"), 201)
	want(t, c.pix("b", "only-this"), 500)
	want(t, c.pix("c", "only-this"), 500) // Times 0: every match
	want(t, c.pix("only-key", "x"), 503)
	want(t, c.pix("only-key", "x"), 201) // Times 1 spent
	want(t, c.do("POST", wire.RouteBoleto, "d", pixBody("offer-basic", "b")), 502)
	want(t, c.do("POST", wire.RouteBoleto, "d", pixBody("offer-basic", "b")), 502)
	want(t, c.do("POST", wire.RouteBoleto, "d", pixBody("offer-basic", "b")), 201)
	s.ClearFaults()
	want(t, c.pix("e", "only-this"), 201)

	// First match applies: an earlier broader fault shadows a later one.
	s.Inject(Fault{Route: "pix", Times: 1, Action: FaultUnavailable})
	s.Inject(Fault{Route: "pix", Times: 1, Action: FaultGateway})
	want(t, c.pix("f", "o"), 503)
	want(t, c.pix("f", "o"), 502)
	want(t, c.pix("f", "o"), 201)
	checkLog(t, s, c)
}

// TestFaultProbabilitySeeded: the same seed and request order apply the
// same faults; another seed applies others.
func TestFaultProbabilitySeeded(t *testing.T) {
	run := func(seed int64) string {
		s := NewServer(t, WithSeed(seed))
		c := newClient(t, s)
		s.Inject(Fault{Route: "pix", Probability: 0.5, Action: FaultUnavailable})
		var b strings.Builder
		for range 40 {
			r := c.pix("k", "o")
			if r.status == 503 {
				b.WriteByte('x')
			} else {
				b.WriteByte('.')
			}
		}
		return b.String()
	}
	a, b, other := run(7), run(7), run(8)
	if a != b {
		t.Fatalf("same seed, different faults:\n%s\n%s", a, b)
	}
	if a == other {
		t.Fatalf("seeds 7 and 8 gave the same faults %s", a)
	}
	if n := strings.Count(a, "x"); n < 5 || n > 35 {
		t.Fatalf("probability 0.5 applied %d of 40 times: %s", n, a)
	}
}

// TestDeterministicFaultsIgnoreArrivalOrder: with WithDeterministicFaults,
// which attempt of which order meets a probabilistic fault depends on the
// seed alone: sending the same requests in another order (as concurrent
// clients would) applies the same faults; another seed applies others; the
// share applied is the probability.
func TestDeterministicFaultsIgnoreArrivalOrder(t *testing.T) {
	const orders, attempts = 200, 3
	run := func(seed int64, reverse bool) map[string]bool {
		s := NewServer(t, WithSeed(seed), WithDeterministicFaults())
		c := newClient(t, s)
		s.Inject(Fault{Route: "pix", Probability: 0.3, Action: FaultUnavailable})
		hit := map[string]bool{}
		for a := range attempts {
			for i := range orders {
				if reverse {
					i = orders - 1 - i
				}
				ref := fmt.Sprintf("order-%d", i)
				// Another key each attempt: the subject is the reference.
				if r := c.pix(fmt.Sprintf("k-%d-%d-%v", i, a, reverse), ref); r.status == 503 {
					hit[fmt.Sprintf("%s#%d", ref, a+1)] = true
				}
			}
		}
		return hit
	}
	a, b, other := run(7, false), run(7, true), run(8, false)
	if !maps.Equal(a, b) {
		t.Fatalf("same seed, other arrival order: %d vs %d faults, differing", len(a), len(b))
	}
	if maps.Equal(a, other) {
		t.Fatal("seeds 7 and 8 applied the same faults")
	}
	if n := len(a); n < orders*attempts*20/100 || n > orders*attempts*40/100 {
		t.Fatalf("probability 0.3 applied to %d of %d requests", n, orders*attempts)
	}
}

// TestDeterministicFaultsSubjectIsTheOrder: a refund (which names a sale
// by an ID new in every run) meets the same faults in two runs, because its
// subject is the sale's external reference.
func TestDeterministicFaultsSubjectIsTheOrder(t *testing.T) {
	run := func() string {
		s := NewServer(t, WithSeed(3), WithDeterministicFaults())
		c := newClient(t, s)
		var b strings.Builder
		var sales []string
		for i := range 60 {
			r := c.pix(fmt.Sprintf("k%d", i), fmt.Sprintf("order-%d", i))
			want(t, r, 201)
			sales = append(sales, decode[wire.Sale](t, r).Identifier)
		}
		s.Inject(Fault{Route: "refund", Probability: 0.5, Action: Fault500NoCommit})
		for i, id := range sales {
			if r := c.do("POST", wire.RouteRefunds, fmt.Sprintf("rk%d", i), refundBody(id, 100)); r.status == 500 {
				b.WriteByte('x')
			} else {
				b.WriteByte('.')
			}
		}
		return b.String()
	}
	if a, b := run(), run(); a != b || !strings.Contains(a, "x") || !strings.Contains(a, ".") {
		t.Fatalf("refund faults differ between runs or are all alike:\n%s\n%s", a, b)
	}
}

// TestFaultOnlyFirst: a fault with OnlyFirst 1 applies to the first request
// about each subject that reaches it, never to the next ones (a lookup
// polled many times fails once at most).
func TestFaultOnlyFirst(t *testing.T) {
	s := NewServer(t)
	c := newClient(t, s)
	s.Inject(Fault{Route: "get_sales", OnlyFirst: 1, Action: Fault500NoCommit})
	for _, ref := range []string{"a", "b"} {
		if r := c.do("GET", wire.RouteSales+"?external_reference="+ref, noKey, ""); r.status != 500 {
			t.Fatalf("first read of %s: %d, want 500", ref, r.status)
		}
		for range 3 {
			want(t, c.do("GET", wire.RouteSales+"?external_reference="+ref, noKey, ""), 200)
		}
	}
	checkLog(t, s, c)
}

func TestInjectRejectsInvalidFaults(t *testing.T) {
	s := NewServer(t)
	for _, f := range []Fault{
		{},
		{Action: FaultAction(999)},
		{Action: FaultHold, Route: "nope"},
		{Action: FaultHold, Probability: 1.5},
		{Action: FaultHold, Times: -1},
		{Action: FaultHold, OnlyFirst: -1},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Inject(%+v) did not panic", f)
				}
			}()
			s.Inject(f)
		}()
	}
}

// TestWithRateLimit: the per-minute limit counts money requests per
// credential, not reads.
func TestWithRateLimit(t *testing.T) {
	s := NewServer(t, WithRateLimit(2))
	c := newClient(t, s)
	other := c.withToken(s.AddToken("cred-2"))
	want(t, c.pix("a", "o"), 201)
	want(t, c.pix("a", "o"), 201)
	want(t, c.do("GET", wire.RouteSales+"?external_reference=o", noKey, ""), 200)
	r := c.pix("b", "o2")
	wantError(t, r, 429, wire.CodeRateLimited)
	want(t, other.pix("b", "o2"), 201) // another credential has its own budget
	s.Clock.Advance(time.Minute)
	want(t, c.pix("b", "o2"), 201)
}

// TestWithLatency delays every request on the clock.
func TestWithLatency(t *testing.T) {
	s := NewServer(t, WithLatency(2*time.Second))
	c := newClient(t, s)
	first := async(func() resp { return c.pix("a", "o") })
	waitHolds(t, s, 1)
	s.Clock.Advance(2 * time.Second)
	want(t, <-first, 201)
}

// TestCloseEndsHolds: Close ends every hold, the held client sees a
// transport error and nothing is committed.
func TestCloseEndsHolds(t *testing.T) {
	s := NewUnstartedServer()
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, s)
	s.Inject(Fault{Route: "pix", Action: FaultHold, Delay: time.Hour})
	s.Inject(Fault{Route: "get_sales", Action: FaultHold, Delay: time.Hour})
	held := async(func() resp { return c.pix("k1", "o") })
	read := async(func() resp { return c.do("GET", wire.RouteSales+"?external_reference=o", noKey, "") })
	waitHolds(t, s, 2)
	s.Close()
	wantDropped(t, <-held)
	wantDropped(t, <-read)
	wantSales(t, s, 0)
	s.Close() // idempotent
	if err := s.Start(); err == nil {
		t.Fatal("Start after Close succeeded")
	}
}
