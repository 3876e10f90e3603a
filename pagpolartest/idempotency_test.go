package pagpolartest

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// TestIdempotencyTable covers every row of CONTRACT.md's table of what the
// server does with the key, in the documented order of checks.
func TestIdempotencyTable(t *testing.T) {
	tests := []struct {
		name string
		opts []Option
		run  func(t *testing.T, s *Server, c *tclient)
	}{{
		name: "over the per-minute limit: 429, key not registered",
		opts: []Option{WithRateLimit(1)},
		run: func(t *testing.T, s *Server, c *tclient) {
			want(t, c.pix("k-a", "order-a"), 201)
			r := c.pix("k-b", "order-b")
			wantError(t, r, 429, wire.CodeRateLimited)
			if r.header.Get(wire.HeaderRetryAfter) == "" {
				t.Fatal("429 without Retry-After")
			}
			s.Clock.Advance(time.Minute)
			r = c.pix("k-b", "order-b")
			want(t, r, 201)
			if r.replayed() {
				t.Fatal("the key refused with 429 was registered: replayed")
			}
		},
	}, {
		name: "header missing: 400, key not registered",
		run: func(t *testing.T, s *Server, c *tclient) {
			e := wantError(t, c.do("POST", wire.RoutePix, noKey, pixBody("offer-basic", "o")), 400, wire.CodeValidation)
			if !strings.Contains(e.Message, wire.HeaderIdempotencyKey) {
				t.Fatalf("message does not name the header: %q", e.Message)
			}
		},
	}, {
		name: "header empty: 400",
		run: func(t *testing.T, s *Server, c *tclient) {
			wantError(t, c.pix("", "o"), 400, wire.CodeValidation)
		},
	}, {
		name: "header longer than 255: 400; exactly 255 is fine",
		run: func(t *testing.T, s *Server, c *tclient) {
			wantError(t, c.pix(strings.Repeat("k", 256), "o"), 400, wire.CodeValidation)
			want(t, c.pix(strings.Repeat("k", 255), "o"), 201)
		},
	}, {
		name: "invalid body: 400 naming the field, key not registered",
		run: func(t *testing.T, s *Server, c *tclient) {
			e := wantError(t, c.do("POST", wire.RoutePix, "k1", bodyWith(pixBody("offer-basic", "o"), "offer_identifier", 12)), 400, wire.CodeValidation)
			if !strings.Contains(e.Message, "offer_identifier") {
				t.Fatalf("message does not name the field: %q", e.Message)
			}
			r := c.pix("k1", "o")
			want(t, r, 201)
			if r.replayed() {
				t.Fatal("replayed after a 400")
			}
		},
	}, {
		name: "key never used: processed",
		run: func(t *testing.T, s *Server, c *tclient) {
			r := c.pix("k1", "o")
			want(t, r, 201)
			sl := decode[wire.Sale](t, r)
			if sl.Amount != 9990 || sl.Status != wire.SaleStatusPending || sl.Pix == nil || !strings.HasPrefix(sl.Identifier, "sale_") {
				t.Fatalf("unexpected sale %+v", sl)
			}
			if r.replayed() {
				t.Fatal("first answer marked replayed")
			}
		},
	}, {
		name: "key in processing: 409 with the documented message, original undisturbed",
		run: func(t *testing.T, s *Server, c *tclient) {
			s.Inject(Fault{Route: "pix", Key: "k1", Times: 1, Action: FaultHold, Delay: 10 * time.Second})
			first := async(func() resp { return c.pix("k1", "o") })
			waitHolds(t, s, 1)
			e := wantError(t, c.pix("k1", "o"), 409, wire.CodeInProgress)
			if e.Message != wire.MsgInProgress {
				t.Fatalf("409 message %q, want the documented one", e.Message)
			}
			s.Clock.Advance(10 * time.Second)
			want(t, <-first, 201)
			if n := len(s.Ledger().Sales); n != 1 {
				t.Fatalf("%d sales, want 1", n)
			}
		},
	}, {
		name: "finished 2xx: same status and bytes, replayed, nothing created, body not compared",
		run: func(t *testing.T, s *Server, c *tclient) {
			first := c.pix("k1", "o")
			want(t, first, 201)
			again := c.do("POST", wire.RoutePix, "k1", pixBody("offer-premium", "another-order"))
			want(t, again, 201)
			if !again.replayed() || !bytes.Equal(first.body, again.body) {
				t.Fatalf("want a replay of %s, got replayed=%v %s", first.body, again.replayed(), again.body)
			}
			if n := len(s.Ledger().Sales); n != 1 {
				t.Fatalf("%d sales, want 1", n)
			}
		},
	}, {
		name: "finished non-2xx: key released, next request processed again",
		run: func(t *testing.T, s *Server, c *tclient) {
			wantError(t, c.do("POST", wire.RouteCreditCard, "k1", cardBody("offer-basic", "o", "tok_decline_1")), 402, wire.CodeDeclined)
			r := c.do("POST", wire.RouteCreditCard, "k1", cardBody("offer-basic", "o", "tok_ok"))
			want(t, r, 201)
			if r.replayed() {
				t.Fatal("replayed after a 402")
			}
			if sl := decode[wire.Sale](t, r); sl.Status != wire.SaleStatusPaid {
				t.Fatalf("card sale status %q", sl.Status)
			}
			if n := len(s.Ledger().Sales); n != 2 {
				t.Fatalf("%d sales (declined + paid), want 2", n)
			}
		},
	}, {
		name: "key used more than 24 h ago: new",
		run: func(t *testing.T, s *Server, c *tclient) {
			want(t, c.pix("k1", "o"), 201)
			s.Clock.Advance(24*time.Hour + time.Second)
			r := c.pix("k1", "o")
			want(t, r, 201)
			if r.replayed() {
				t.Fatal("replayed after 24 h")
			}
			if n := len(s.Ledger().Sales); n != 2 {
				t.Fatalf("%d sales, want 2", n)
			}
		},
	}, {
		name: "read routes ignore the header",
		run: func(t *testing.T, s *Server, c *tclient) {
			want(t, c.pix("k1", "o"), 201)
			for range 2 {
				r := c.do("GET", wire.RouteSales+"?external_reference=o", "k1", "")
				want(t, r, 200)
				if r.replayed() {
					t.Fatal("a read was replayed")
				}
			}
			want(t, c.do("GET", wire.RouteSales+"?external_reference=o", strings.Repeat("x", 300), ""), 200)
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewServer(t, tt.opts...)
			c := newClient(t, s)
			tt.run(t, s, c)
			checkLog(t, s, c)
		})
	}
}

// TestKeysPerCredential: two tokens of one credential share keys; another
// credential has its own keys and cannot see the first one's sales.
func TestKeysPerCredential(t *testing.T) {
	s := NewServer(t)
	c := newClient(t, s)
	first := c.pix("k1", "order-1")
	want(t, first, 201)
	sale := decode[wire.Sale](t, first)

	same := c.withToken(s.AddToken(s.CredentialID))
	r := same.pix("k1", "order-1")
	want(t, r, 201)
	if !r.replayed() || !bytes.Equal(r.body, first.body) {
		t.Fatalf("second token of the credential: want a replay, got %s", r.body)
	}

	other := c.withToken(s.AddToken("cred-other"))
	r = other.pix("k1", "order-1")
	want(t, r, 201)
	if r.replayed() {
		t.Fatal("another credential got the first credential's replay")
	}
	if got := other.salesByRef("order-1"); len(got) != 1 || got[0].Identifier == sale.Identifier {
		t.Fatalf("other credential's lookup: %+v", got)
	}
	wantError(t, other.do("GET", "/sales/"+sale.Identifier, noKey, ""), 404, wire.CodeNotFound)
	wantError(t, other.do("POST", wire.RouteRefunds, "rk", refundBody(sale.Identifier, 100)), 404, wire.CodeNotFound)
	if got := c.salesByRef("order-1"); len(got) != 1 || got[0].Identifier != sale.Identifier {
		t.Fatalf("first credential's lookup: %+v", got)
	}

	l := s.Ledger()
	if len(l.Sales) != 2 || l.Sales[0].CredentialID != s.CredentialID || l.Sales[1].CredentialID != "cred-other" {
		t.Fatalf("ledger sales: %+v", l.Sales)
	}
	if l.CountByKey("k1") != 2 || len(l.Duplicates(DefaultGroup)) != 0 {
		t.Fatalf("CountByKey=%d Duplicates=%v", l.CountByKey("k1"), l.Duplicates(DefaultGroup))
	}

	s.RevokeToken(same.token)
	wantError(t, same.pix("k2", "order-2"), 401, wire.CodeUnauthorized)
	want(t, c.pix("k2", "order-2"), 201) // the credential's other token still works
}

// TestProcessingWindowBoundary: the in-processing mark answers 409 until
// the window has passed since processing started; then a same-key request
// is processed again while the first is still running.
func TestProcessingWindowBoundary(t *testing.T) {
	for _, window := range []time.Duration{60 * time.Second, 5 * time.Second} {
		t.Run(window.String(), func(t *testing.T) {
			var opts []Option
			if window != 60*time.Second {
				opts = append(opts, WithProcessingWindow(window))
			}
			s := NewServer(t, opts...)
			c := newClient(t, s)
			s.Inject(Fault{Route: "pix", Times: 1, Action: FaultHold, Delay: 10 * window})
			first := async(func() resp { return c.pix("k1", "o") })
			waitHolds(t, s, 1)
			s.Clock.Advance(window - time.Second)
			wantError(t, c.pix("k1", "o"), 409, wire.CodeInProgress)
			s.Clock.Advance(time.Second)
			second := c.pix("k1", "o")
			want(t, second, 201)
			if second.replayed() {
				t.Fatal("replayed after the mark expired")
			}
			// The second finished 2xx: the key now replays it.
			r := c.pix("k1", "o")
			if want(t, r, 201); !r.replayed() || !bytes.Equal(r.body, second.body) {
				t.Fatal("no replay of the second answer")
			}
			s.Clock.Advance(10 * window)
			want(t, <-first, 201) // the held one commits too: the documented exposure
			l := s.Ledger()
			if len(l.Sales) != 2 || len(l.Duplicates(DefaultGroup)) != 1 || l.CountByKey("k1") != 2 {
				t.Fatalf("want 2 sales, one duplicate group: %d sales, %v", len(l.Sales), l.Duplicates(DefaultGroup))
			}
			// The late first answer did not overwrite the stored one.
			r = c.pix("k1", "o")
			if want(t, r, 201); !bytes.Equal(r.body, second.body) {
				t.Fatal("the stored answer changed")
			}
			checkLog(t, s, c)
		})
	}
}

// TestReplayWindowBoundary: a 2xx is replayed until the replay window has
// passed since it finished; then the key is new.
func TestReplayWindowBoundary(t *testing.T) {
	for _, window := range []time.Duration{24 * time.Hour, time.Hour} {
		t.Run(window.String(), func(t *testing.T) {
			var opts []Option
			if window != 24*time.Hour {
				opts = append(opts, WithReplayWindow(window))
			}
			s := NewServer(t, opts...)
			c := newClient(t, s)
			first := c.pix("k1", "o")
			want(t, first, 201)
			s.Clock.Advance(window - time.Second)
			r := c.pix("k1", "o")
			if want(t, r, 201); !r.replayed() || !bytes.Equal(r.body, first.body) {
				t.Fatal("no replay just inside the window")
			}
			s.Clock.Advance(time.Second)
			r = c.pix("k1", "o")
			if want(t, r, 201); r.replayed() {
				t.Fatal("replayed once the window passed")
			}
			if n := len(s.Ledger().Sales); n != 2 {
				t.Fatalf("%d sales, want 2", n)
			}
			checkLog(t, s, c)
		})
	}
}

// TestConcurrentSameKey: many concurrent requests with one key give one
// effect; every other answer is a 409 or a replay of the one 2xx.
func TestConcurrentSameKey(t *testing.T) {
	routes := []struct {
		name string
		send func(c *tclient, key string) resp
	}{
		{"pix", func(c *tclient, key string) resp { return c.pix(key, "order-c") }},
		{"refund", nil}, // set below: needs a sale
	}
	s := NewServer(t)
	c := newClient(t, s)
	paid := c.do("POST", wire.RouteCreditCard, "card-1", cardBody("offer-basic", "order-card", "tok_ok"))
	want(t, paid, 201)
	saleID := decode[wire.Sale](t, paid).Identifier
	routes[1].send = func(c *tclient, key string) resp {
		return c.do("POST", wire.RouteRefunds, key, refundBody(saleID, 100))
	}
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			const n = 50
			key := "concurrent-" + rt.name
			// Hold the first processing a little so that the others meet it.
			s.Inject(Fault{Key: key, Times: 1, Action: FaultHold, Delay: 50 * time.Millisecond})
			var wg sync.WaitGroup
			answers := make([]resp, n)
			for i := range answers {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					answers[i] = rt.send(c, key)
				}(i)
			}
			wg.Wait()
			var original []byte
			fresh, replays, conflicts := 0, 0, 0
			for _, r := range answers {
				switch {
				case r.err != nil:
					t.Fatalf("transport error: %v", r.err)
				case r.status == 409:
					conflicts++
				case r.status/100 == 2 && r.replayed():
					replays++
				case r.status/100 == 2:
					fresh++
					original = r.body
				default:
					t.Fatalf("unexpected %d %s", r.status, r.body)
				}
			}
			if fresh != 1 {
				t.Fatalf("%d fresh 2xx answers, want exactly 1 (%d replays, %d 409s)", fresh, replays, conflicts)
			}
			for _, r := range answers {
				if r.replayed() && !bytes.Equal(r.body, original) {
					t.Fatalf("replay %s differs from the original %s", r.body, original)
				}
			}
			if got := s.Ledger().CountByKey(key); got != 1 {
				t.Fatalf("%d effects under the key, want 1", got)
			}
			t.Logf("%d fresh, %d replays, %d 409s", fresh, replays, conflicts)
		})
	}
	checkLog(t, s, c)
}

// TestStatusCodesOfMoneyRoutes: every money route answers its ASSUMED
// success status with the wire shape.
func TestStatusCodesOfMoneyRoutes(t *testing.T) {
	s := NewServer(t)
	c := newClient(t, s)
	want(t, c.do("POST", wire.RoutePix, "a", pixBody("offer-basic", "o1")), wire.StatusChargeCreated)
	r := c.do("POST", wire.RouteBoleto, "b", pixBody("offer-premium", "o2"))
	want(t, r, wire.StatusChargeCreated)
	if sl := decode[wire.Sale](t, r); sl.Boleto == nil || sl.Amount != 19990 || sl.Status != wire.SaleStatusPending {
		t.Fatalf("boleto sale %+v", sl)
	}
	r = c.do("POST", wire.RouteCreditCard, "c", cardBody("offer-basic", "o3", "tok_ok"))
	want(t, r, wire.StatusChargeCreated)
	saleID := decode[wire.Sale](t, r).Identifier
	r = c.do("POST", "/plans/offer/plan-basic/subscribe", "d", subscribeBody("sub-1", wire.MethodPix, ""))
	want(t, r, wire.StatusSubscribed)
	sub := decode[wire.Subscription](t, r)
	r = c.do("POST", "/subscriptions/"+sub.ID+"/plan-change", "e", `{"offer_identifier":"plan-pro"}`)
	want(t, r, wire.StatusPlanChanged)
	want(t, c.do("POST", wire.RouteRefunds, "f", refundBody(saleID, 1)), wire.StatusRefundCreated)
	checkLog(t, s, c)
	for _, rl := range s.Ledger().Requests {
		if rl.Route == "" || rl.CredentialID != s.CredentialID || rl.Key == "" {
			t.Fatalf("incomplete request log %+v", rl)
		}
	}
}
