package pagpolar

import (
	"testing"
	"time"

	"github.com/cenkalti/backoff/v5"
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
