// Checks of an operation's reported outcome against the fake's ledger: the
// effects the operation made, and whether what it reported is true of them.

package pagpolar

import (
	"net/http"
	"testing"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// countMine counts the successful effects under the operation's key.
func countMine(f *fixture, c *Client, opID string) int {
	key := c.idempotencyKey(opID)
	n := 0
	for _, e := range f.srv.Ledger().Effects() {
		if e.Key == key && e.Successful {
			n++
		}
	}
	return n
}

func report(t *testing.T, f *fixture, c *Client, opID, id string, err error) {
	t.Helper()
	for _, p := range ledgerCheck(f, c, opID, id, err) {
		t.Error(p)
	}
	posts := 0
	for _, r := range f.srv.Ledger().Requests {
		if r.Method == http.MethodPost {
			posts++
		}
	}
	t.Logf("outcome: id=%q err=%v; POSTs the fake received: %d", id, err, posts)
}

// salesUnder returns the ledger's sales under an operation's key.
func salesUnder(f *fixture, c *Client, opID string) []pagpolartest.LedgerSale {
	key := c.idempotencyKey(opID)
	var out []pagpolartest.LedgerSale
	for _, s := range f.srv.Ledger().Sales {
		if s.Key == key {
			out = append(out, s)
		}
	}
	return out
}

// ledgerCheckStore is ledgerCheck for a client with a store of its own.
func ledgerCheckStore(f *fixture, c *Client, opID, id string, err error) []string {
	g := *f
	if m, ok := c.Store().(*keystore.Memory); ok {
		g.store = m
	}
	return ledgerCheck(&g, c, opID, id, err)
}
