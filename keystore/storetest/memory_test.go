package storetest_test

import (
	"testing"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/storetest"
)

func TestMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T) keystore.Store { return keystore.NewMemory() })
}

func BenchmarkMemory(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) keystore.Store { return keystore.NewMemory() })
}

func TestMemoryAmnesia(t *testing.T) {
	storetest.RunAmnesia(t, func(t *testing.T) storetest.AmnesiaBackend {
		m := keystore.NewMemory()
		return storetest.AmnesiaBackend{
			Store: m,
			Wipe:  func(*testing.T) { m.Forget() },
			Lose:  func(_ *testing.T, ids ...string) { m.Forget(ids...) },
		}
	})
}

// TestAmnesiaControlStoreWithoutMemoryChargesTwice is the control of the
// amnesia proof: when the second call finds a store that knows nothing of
// the first (a new, empty store, as a process started after a total loss
// sees it), the SDK sends the charge again and, the API having released
// the key after its 500, a second sale is made. This is the double charge
// RunAmnesia's engine case shows the detection prevents.
func TestAmnesiaControlStoreWithoutMemoryChargesTwice(t *testing.T) {
	swap := &swappable{Store: keystore.NewMemory()}
	sales, posts, err := storetest.AmnesiaEngineRun(t, swap, func(*testing.T) { swap.Store = keystore.NewMemory() })
	if err != nil || sales != 2 || posts != 2 {
		t.Fatalf("second call on a store without history: err %v, %d sales, %d requests; want the double charge (nil, 2, 2)", err, sales, posts)
	}
}

// swappable lets the control replace the store under the client.
type swappable struct{ keystore.Store }
