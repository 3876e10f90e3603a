package pagpolar

import "testing"

// Existence and decision are two answers (SAFETY rule 3): every status but
// a refusal is the decision of an effect that exists.
func TestDecisionOf_StatusToDecision(t *testing.T) {
	cases := []struct {
		kind   effectKind
		status string
		want   Decision
	}{
		{effSale, "pending", DecisionPending},
		{effSale, "PENDING", DecisionPending},
		{effSale, "in_analysis", DecisionInAnalysis},
		{effSale, "In Analysis", DecisionInAnalysis},
		{effSale, "em_analise", DecisionInAnalysis},
		{effSale, "paid", DecisionPaid},
		{effSale, "approved", DecisionPaid},
		{effSale, "declined", DecisionDeclined},
		{effSale, "Recusado", DecisionDeclined},
		{effSale, "failed", DecisionDeclined},
		{effSale, "refunded", DecisionRefunded},
		{effSale, "partially_refunded", DecisionPartiallyRefunded},
		{effSale, "canceled", DecisionCanceled},
		{effSale, "expired", DecisionExpired},
		{effSale, "zz_new", DecisionUnrecognized},
		{effSale, "", DecisionUnrecognized},
		{effRefund, "requested", DecisionRequested},
		{effRefund, "processing", DecisionRequested},
		{effRefund, "pending", DecisionRequested},
		{effRefund, "completed", DecisionCompleted},
		{effRefund, "failed", DecisionFailed},
		{effRefund, "rejected", DecisionFailed},
		{effRefund, "zz", DecisionUnrecognized},
		{effSubscription, "active", DecisionActive},
		{effSubscription, "pending", DecisionPending},
		{effSubscription, "past_due", DecisionOverdue},
		{effSubscription, "canceled", DecisionCanceled},
		{effPlanChange, "scheduled", DecisionScheduled},
		{effPlanChange, "pending", DecisionScheduled},
		{effPlanChange, "applied", DecisionApplied},
		{effPlanChange, "rejected", DecisionFailed},
		{effPlanChange, "zz", DecisionUnrecognized},
	}
	for _, c := range cases {
		if got := decisionOf(c.kind, c.status); got != c.want {
			t.Errorf("%s %q: %q, want %q", c.kind, c.status, got, c.want)
		}
	}
}

// Only a refusal status fails an operation: the decision table and the
// refusal table never disagree.
func TestDecisionOf_RefusalIsTheOnlyFailure(t *testing.T) {
	for kind, table := range decisionTables {
		for status := range table {
			d := decisionOf(effectKind(kind), status)
			if d.Refused() != refusal(effectKind(kind), status) {
				t.Errorf("%s %q: decision %q, refusal table %v", effectKind(kind), status, d, refusal(effectKind(kind), status))
			}
		}
	}
}

func TestDecision_Helpers(t *testing.T) {
	cases := []struct {
		d                      Decision
		decided, paid, refused bool
	}{
		{DecisionPending, false, false, false},
		{DecisionInAnalysis, false, false, false},
		{DecisionRequested, false, false, false},
		{DecisionScheduled, false, false, false},
		{DecisionUnrecognized, false, false, false},
		{DecisionPaid, true, true, false},
		{DecisionDeclined, true, false, true},
		{DecisionFailed, true, false, true},
		{DecisionCompleted, true, false, false},
		{DecisionApplied, true, false, false},
		{DecisionRefunded, true, false, false},
		{DecisionExpired, true, false, false},
		{DecisionActive, true, false, false},
	}
	for _, c := range cases {
		if c.d.Decided() != c.decided || c.d.Paid() != c.paid || c.d.Refused() != c.refused {
			t.Errorf("%q: Decided %v Paid %v Refused %v, want %v %v %v", c.d, c.d.Decided(), c.d.Paid(), c.d.Refused(), c.decided, c.paid, c.refused)
		}
	}
}

// Decisions move forward, never backward, and never from one alternative
// to another.
func TestDecision_AdvancesOnlyForward(t *testing.T) {
	cases := []struct {
		stored, received Decision
		want             bool
	}{
		{"", DecisionPending, true},
		{DecisionPending, DecisionPaid, true},
		{DecisionPending, DecisionInAnalysis, true},
		{DecisionInAnalysis, DecisionDeclined, true},
		{DecisionInAnalysis, DecisionPending, false},
		{DecisionPaid, DecisionPending, false},
		{DecisionPaid, DecisionDeclined, false},
		{DecisionDeclined, DecisionPaid, false},
		{DecisionPaid, DecisionPaid, false},
		{DecisionPaid, DecisionPartiallyRefunded, true},
		{DecisionPartiallyRefunded, DecisionRefunded, true},
		{DecisionRefunded, DecisionPartiallyRefunded, false},
		{DecisionRequested, DecisionCompleted, true},
		{DecisionCompleted, DecisionRequested, false},
		{DecisionScheduled, DecisionApplied, true},
		{DecisionUnrecognized, DecisionPaid, true},
		{DecisionPaid, DecisionUnrecognized, false},
		{DecisionPending, DecisionUnrecognized, false},
	}
	for _, c := range cases {
		if got := advances(c.stored, c.received); got != c.want {
			t.Errorf("advances(%q, %q) = %v, want %v", c.stored, c.received, got, c.want)
		}
	}
}
