package pagpolar_test

import (
	"testing"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/storetest"
)

// A new process whose store cannot prove its history (a backend emptied
// while nobody watched, opened again as if new) charges nothing twice:
// each first send is looked up first.
func TestUnproven_NewProcessOnEmptiedStoreChargesNothingTwice(t *testing.T) {
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
