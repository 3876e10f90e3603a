package pagpolar_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/pagpolartest"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/storetest"
)

// A new process whose store cannot prove its history (a backend emptied
// while nobody watched, opened again as if new) charges nothing twice:
// each first send is looked up first.
func TestUnproven_NewProcessOnEmptiedStoreChargesNothingTwice(t *testing.T) {
	t.Parallel()
	r := storetest.HistoryLossRun(t, 20,
		func(*testing.T) keystore.Store { return keystore.NewMemory() },
		func(*testing.T) {},
		func(*testing.T) keystore.Store { m := keystore.NewMemory(); m.Unprove(); return m })
	storetest.CheckHistoryLoss(t, r, true)
}

// A proven store costs no lookup before first sends.
func TestUnproven_ProvenStoreLooksNothingUp(t *testing.T) {
	m := keystore.NewMemory()
	r := storetest.HistoryLossRun(t, 5,
		func(*testing.T) keystore.Store { return m },
		func(*testing.T) {},
		func(*testing.T) keystore.Store { return m })
	storetest.CheckHistoryLoss(t, r, false)
}

// BenchmarkFirstSend_Unproven charges new orders on a store whose history
// began long enough ago for a lookup to be conclusive at once, against
// the same on a proven store: lookups/op is the cost (1 and 0).
func BenchmarkFirstSend_Unproven(b *testing.B) {
	for _, unproven := range []bool{false, true} {
		name := "proven"
		if unproven {
			name = "unproven"
		}
		b.Run(name, func(b *testing.B) {
			clk := &benchClock{t: time.Now()}
			m := keystore.NewMemoryWithClock(clk)
			if unproven {
				m.Unprove()
			}
			clk.add(time.Hour) // the trust moment has passed; the history is still unproven (ProofAge)
			srv := pagpolartest.NewServer(b)
			var lookups atomic.Int64
			c, err := pagpolar.NewClient(srv.CredentialID, pagpolar.StaticToken(srv.Token), pagpolar.WithBaseURL(srv.URL), pagpolar.WithStore(m),
				pagpolar.WithHook(func(_ context.Context, e pagpolar.Event) {
					if e.Kind == pagpolar.EventLookup && e.Cause == "unproven-history" {
						lookups.Add(1)
					}
				}))
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			cust := pagpolar.Customer{Name: "Ana Souza", Email: "ana@example.com", Document: "529.982.247-25"}
			n := 0
			for b.Loop() {
				n++
				if _, err := c.Payments.Pix(ctx, pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: fmt.Sprintf("bench-%d", n), Customer: cust}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(lookups.Load())/float64(n), "lookups/op")
		})
	}
}

// benchClock is the Memory store's clock, moved by hand.
type benchClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *benchClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *benchClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
