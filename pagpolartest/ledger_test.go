package pagpolartest

import (
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

func TestLedgerHelpers(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	sale := func(id, cred, key, ref, method, status string, i int, renewal bool, sub string) LedgerSale {
		return LedgerSale{Sale: wire.Sale{Identifier: id, ExternalReference: ref, PaymentMethod: method, Status: status,
			Amount: 100, SubscriptionID: sub}, CredentialID: cred, Key: key, CreatedAt: at(i), Renewal: renewal}
	}
	l := Ledger{
		Sales: []LedgerSale{
			sale("s1", "c", "k1", "o1", "pix", wire.SaleStatusPending, 1, false, ""),
			sale("s2", "c", "k2", "o1", "pix", wire.SaleStatusPaid, 2, false, ""),             // duplicate of s1
			sale("s3", "c", "k3", "o1", "credit_card", wire.SaleStatusDeclined, 3, false, ""), // not successful
			sale("s4", "c", "k4", "o1", "credit_card", wire.SaleStatusPaid, 4, false, ""),     // other method
			sale("s5", "c2", "k1", "o1", "pix", wire.SaleStatusPaid, 5, false, ""),            // other credential
			sale("s6", "c", "sk", "sub-o", "pix", wire.SaleStatusPaid, 6, false, "sub1"),      // first sale of sub1
			sale("s7", "c", "", "sub-o", "pix", wire.SaleStatusPaid, 7, true, "sub1"),         // renewal
		},
		Refunds: []LedgerRefund{
			{Refund: wire.Refund{Identifier: "r1", SaleIdentifier: "s2", Amount: 10, Status: wire.RefundStatusCompleted}, CredentialID: "c", Key: "rk", CreatedAt: at(8)},
			{Refund: wire.Refund{Identifier: "r2", SaleIdentifier: "s2", Amount: 10, Status: wire.RefundStatusCompleted}, CredentialID: "c", Key: "rk", CreatedAt: at(9)},
			{Refund: wire.Refund{Identifier: "r3", SaleIdentifier: "s2", Amount: 10, Status: wire.RefundStatusFailed}, CredentialID: "c", Key: "rk2", CreatedAt: at(10)},
		},
		Subscriptions: []LedgerSubscription{
			{Subscription: wire.Subscription{ID: "sub1", ExternalReference: "sub-o", PaymentMethod: "pix"}, CredentialID: "c", Key: "sk", CreatedAt: at(0)},
		},
		PlanChanges: []LedgerPlanChange{
			{PlanChange: wire.PlanChange{ID: "pc1", SubscriptionID: "sub1", Status: wire.PlanChangeStatusApplied}, CredentialID: "c", Key: "pk", CreatedAt: at(11)},
		},
	}
	eff := l.Effects()
	if len(eff) != 12 {
		t.Fatalf("%d effects, want 12", len(eff))
	}
	for i := 1; i < len(eff); i++ {
		if eff[i].CreatedAt.Before(eff[i-1].CreatedAt) {
			t.Fatalf("effects not oldest first at %d", i)
		}
	}
	if eff[0].Kind != "subscription" || eff[len(eff)-1].Kind != "plan_change" {
		t.Fatalf("order: first %s, last %s", eff[0].Kind, eff[len(eff)-1].Kind)
	}
	dups := l.Duplicates(DefaultGroup)
	if len(dups) != 2 {
		t.Fatalf("Duplicates: %v", dups)
	}
	if g := dups["c|sale|pix|o1"]; len(g) != 2 || g[0].ID != "s1" || g[1].ID != "s2" {
		t.Fatalf("charge group %+v", g)
	}
	if g := dups["c|refund|rk"]; len(g) != 2 {
		t.Fatalf("refund group %+v", g)
	}
	for key, n := range map[string]int{"k1": 2, "k3": 0, "sk": 1, "rk": 2, "rk2": 0, "pk": 1} {
		if got := l.CountByKey(key); got != n {
			t.Errorf("CountByKey(%q) = %d, want %d", key, got, n)
		}
	}
	// A custom grouping: one charge per reference, whatever the method.
	byRef := l.Duplicates(func(e Effect) string {
		if e.Kind != "sale" || e.Renewal {
			return ""
		}
		return e.CredentialID + "|" + e.ExternalReference
	})
	if g := byRef["c|o1"]; len(g) != 3 {
		t.Fatalf("by reference: %+v", byRef)
	}
	for _, e := range []Effect{{Kind: "sale", Renewal: true}, {Kind: "sale", SubscriptionID: "x"}} {
		if g := DefaultGroup(e); g != "" {
			t.Errorf("DefaultGroup(%+v) = %q, want excluded", e, g)
		}
	}
	if g := DefaultGroup(Effect{Kind: "sale", CredentialID: "c", Method: "pix", Key: "k"}); g != "c|sale|pix|key:k" {
		t.Errorf("charge without reference grouped as %q", g)
	}
}
