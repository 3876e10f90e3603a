package pagpolar

import (
	"net/http"
	"testing"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// The SDK's BackOff is its own interface; a backoff library's values fit it.
var (
	_ BackOff = (*backoff.ExponentialBackOff)(nil)
	_ BackOff = (*backoff.ConstantBackOff)(nil)
)

func TestExponentialBackOffStaysWithinBounds(t *testing.T) {
	b := Exponential(10*time.Millisecond, 80*time.Millisecond)()
	for i := range 50 {
		w := b.NextBackOff()
		if w < 5*time.Millisecond || w > 120*time.Millisecond { // ±50 % jitter around [10 ms, 80 ms]
			t.Fatalf("pause %d = %s, outside the jittered bounds", i, w)
		}
	}
	p := RetryPolicy{MaxRetryAfter: time.Second}
	if w := p.nextWait(stopBackOff{}, 0); w != time.Second {
		t.Fatalf("a sequence that stopped waits %s, want MaxRetryAfter", w)
	}
	if w := p.nextWait(stopBackOff{}, time.Hour); w != time.Second {
		t.Fatalf("Retry-After of an hour waits %s, want it clamped to MaxRetryAfter", w)
	}
}

type stopBackOff struct{}

func (stopBackOff) NextBackOff() time.Duration { return backoff.Stop }
func (stopBackOff) Reset()                     {}

// Retry-After in forms a server or gateway may send on a 429: negative,
// huge, an HTTP date long past or far ahead, garbage. The charge must go
// through once, within the policy's bounds.
func TestRetry_RetryAfterFormsStayWithinThePolicy(t *testing.T) {
	for _, ra := range []string{"-5", "99999999999", "Wed, 21 Oct 2015 07:28:00 GMT", "Fri, 01 Jan 2100 00:00:00 GMT", "soon", "1.5"} {
		t.Run(ra, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			base := answerProxy(t, f, func(req *http.Request, resp *http.Response, body []byte) []byte {
				if resp.StatusCode == http.StatusTooManyRequests {
					resp.Header.Set("Retry-After", ra)
				}
				return body
			})
			c := proxiedClient(t, f, base)
			f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultRateLimit, Times: 2})
			start := time.Now()
			ch, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-ra", Customer: goodCustomer})
			id := ""
			if err == nil {
				id = ch.Sale.ID
			}
			if err != nil {
				t.Errorf("not charged after two 429s: %v", err)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("took %s: Retry-After %q was not clamped", d, ra)
			}
			report(t, f, c, "pix:order-ra", id, err)
		})
	}
}
