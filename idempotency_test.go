// Idempotency keys: a key's repeat answered otherwise than documented is
// still the operation's effect.

package pagpolar

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// A server that answers a finished key's repeat with a 4xx instead of the
// documented replay ("Idempotency-Key já utilizada"). Host A charged the
// operation; host B, with a store of its own, derives the same key and
// sends it: its effect exists (A's), so B must not report the operation
// failed or not executed.
func TestIdempotency_KeyReuseAnswered4xxIsNotFailure(t *testing.T) {
	answers := []struct {
		name   string
		status int
		body   string
	}{
		{"422-own-code", 422, `{"code":"unprocessable_entity","message":"Idempotency-Key já utilizada"}`},
		{"400-own-code", 400, `{"code":"validation_error","message":"Idempotency-Key already used"}`},
		{"400-other-code", 400, `{"code":"idempotency_key_reused","message":"Idempotency key reused"}`},
		{"409-other-message", 409, `{"error":{"message":"Idempotency key already used"}}`},
	}
	for _, a := range answers {
		for _, warm := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/warm=%v", a.name, warm), func(t *testing.T) {
				t.Parallel()
				f := newFixture(t, nil)
				p := PixParams{OfferID: "offer-basic", ExternalReference: "order-two-hosts", Customer: goodCustomer}
				if _, err := f.c.Payments.Pix(f.ctx, p); err != nil {
					t.Fatalf("host A: %v", err)
				}
				f.srv.Clock.Advance(5 * time.Second)
				base := answerProxy(t, f, func(req *http.Request, resp *http.Response, body []byte) []byte {
					if resp.Header.Get("Idempotency-Replayed") != "true" {
						return body
					}
					resp.Header.Del("Idempotency-Replayed")
					resp.StatusCode = a.status
					resp.Header.Set("Content-Type", "application/json")
					return []byte(a.body)
				})
				b := f.client(t, WithBaseURL(base)) // its own store
				if warm {
					warmClock(f, b)
				}
				ch, err := b.Payments.Pix(f.ctx, p)
				id := ""
				if err == nil {
					id = ch.Sale.ID
				}
				for _, pr := range ledgerCheckStore(f, b, "pix:order-two-hosts", id, err) {
					t.Error(pr)
				}
				t.Logf("host B: id=%q err=%v; POSTs %d", id, err, f.posts("pix"))
			})
		}
	}
}
