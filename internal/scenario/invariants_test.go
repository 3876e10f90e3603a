package scenario

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func sale(id, key, status string, at time.Duration) pagpolartest.LedgerSale {
	return pagpolartest.LedgerSale{Sale: wire.Sale{Identifier: id, Status: status, ExternalReference: "1001", PaymentMethod: "pix"},
		CredentialID: "cred", Key: key, CreatedAt: t0.Add(at)}
}

func sent(key string, at time.Duration) pagpolartest.RequestLog {
	return pagpolartest.RequestLog{Key: key, At: t0.Add(at), Method: "POST"}
}

// Each invariant of Check, with a ledger and reports that keep it and
// ones that break it.
func TestCheck_Invariants(t *testing.T) {
	keys := map[string]string{"pix:1001": "k1", "plan-change-9002-1": "k2"}
	cases := []struct {
		name    string
		ledger  pagpolartest.Ledger
		reports []Report
		final   map[string]keystore.Record
		want    string // a fragment of the one violation expected; "" for none
	}{
		{name: "one effect, reported", ledger: pagpolartest.Ledger{Sales: []pagpolartest.LedgerSale{sale("s1", "k1", "pending", 0)}},
			reports: []Report{{Step: 1, OpID: "pix:1001", Outcome: Succeeded, EffectID: "s1", At: t0.Add(time.Second)}}},
		{name: "two effects of one operation", ledger: pagpolartest.Ledger{Sales: []pagpolartest.LedgerSale{sale("s1", "k1", "pending", 0), sale("s2", "k1", "pending", time.Second)}},
			want: "2 successful effects"},
		{name: "an effect under a key nobody has", ledger: pagpolartest.Ledger{Sales: []pagpolartest.LedgerSale{sale("s9", "k9", "paid", 0)}},
			want: "no operation of the run has"},
		{name: "success naming a declined sale", ledger: pagpolartest.Ledger{Sales: []pagpolartest.LedgerSale{sale("s1", "k1", "declined", 0)}},
			reports: []Report{{Step: 1, OpID: "pix:1001", Outcome: Succeeded, EffectID: "s1", At: t0.Add(time.Second)}}, want: "did not take effect"},
		{name: "success reported paid, naming a declined sale", ledger: pagpolartest.Ledger{Sales: []pagpolartest.LedgerSale{sale("s1", "k1", "declined", 0)}},
			reports: []Report{{Step: 1, OpID: "pix:1001", Outcome: Succeeded, EffectID: "s1", Decision: pagpolar.DecisionPaid, At: t0.Add(time.Second)}}, want: "did not take effect"},
		// Existence and decision are two answers: an answer that showed no
		// status claims that the sale exists, which it does.
		{name: "success reported undecided, naming a declined sale", ledger: pagpolartest.Ledger{Sales: []pagpolartest.LedgerSale{sale("s1", "k1", "declined", 0)}},
			reports: []Report{{Step: 1, OpID: "pix:1001", Outcome: Succeeded, EffectID: "s1", Decision: pagpolar.DecisionUnrecognized, At: t0.Add(time.Second)}}},
		{name: "success reported undecided, without an effect", reports: []Report{{Step: 1, OpID: "pix:1001", Outcome: Succeeded, EffectID: "s1", Decision: pagpolar.DecisionPending, At: t0}},
			want: "not an effect of this operation"},
		{name: "store says succeeded undecided, the ledger has nothing", final: map[string]keystore.Record{"pix:1001": {State: keystore.StateSucceeded, ResultRef: "s1", Result: []byte(`{"id":"s1","decision":"pending"}`)}},
			want: "no successful effect"},
		{name: "store says succeeded undecided, the sale is declined", ledger: pagpolartest.Ledger{Sales: []pagpolartest.LedgerSale{sale("s1", "k1", "declined", 0)}},
			final: map[string]keystore.Record{"pix:1001": {State: keystore.StateSucceeded, ResultRef: "s1", Result: []byte(`{"id":"s1","decision":"unrecognized"}`)}}},
		{name: "store says succeeded paid, the sale is declined", ledger: pagpolartest.Ledger{Sales: []pagpolartest.LedgerSale{sale("s1", "k1", "declined", 0)}},
			final: map[string]keystore.Record{"pix:1001": {State: keystore.StateSucceeded, ResultRef: "s1", Result: []byte(`{"id":"s1","decision":"paid"}`)}}, want: "no successful effect"},
		// A refusal tells the caller nothing was charged and a new
		// operation may try: false while the effect took effect.
		{name: "success reported declined, naming a paid sale", ledger: pagpolartest.Ledger{Sales: []pagpolartest.LedgerSale{sale("s1", "k1", "paid", 0)}},
			reports: []Report{{Step: 1, OpID: "pix:1001", Outcome: Succeeded, EffectID: "s1", Decision: pagpolar.DecisionDeclined, At: t0.Add(time.Second)}}, want: "refused"},
		{name: "success reported declined, naming the declined sale", ledger: pagpolartest.Ledger{Sales: []pagpolartest.LedgerSale{sale("s1", "k1", "declined", 0)}},
			reports: []Report{{Step: 1, OpID: "pix:1001", Outcome: Succeeded, EffectID: "s1", Decision: pagpolar.DecisionDeclined, At: t0.Add(time.Second)}}},
		{name: "success reported declined without an effect named, one paid", ledger: pagpolartest.Ledger{Sales: []pagpolartest.LedgerSale{sale("s1", "k1", "paid", 0)}},
			reports: []Report{{Step: 1, OpID: "pix:1001", Outcome: Succeeded, Decision: pagpolar.DecisionDeclined, At: t0.Add(time.Second)}}, want: "refused"},
		{name: "declined, then a paid sale from a send after the call", ledger: pagpolartest.Ledger{Sales: []pagpolartest.LedgerSale{sale("s1", "k1", "declined", 0), sale("s2", "k1", "paid", 5*time.Second)}, Requests: []pagpolartest.RequestLog{sent("k1", 0), sent("k1", 4*time.Second)}},
			reports: []Report{{Step: 1, OpID: "pix:1001", Outcome: Succeeded, EffectID: "s1", Decision: pagpolar.DecisionDeclined, At: t0.Add(time.Second)}}},
		{name: "store says succeeded declined, the sale is paid", ledger: pagpolartest.Ledger{Sales: []pagpolartest.LedgerSale{sale("s1", "k1", "paid", 0)}},
			final: map[string]keystore.Record{"pix:1001": {State: keystore.StateSucceeded, ResultRef: "s1", Result: []byte(`{"id":"s1","decision":"declined"}`)}}, want: "refused"},
		{name: "store says succeeded undecided, naming no effect of the operation", ledger: pagpolartest.Ledger{Sales: []pagpolartest.LedgerSale{sale("s1", "k1", "declined", 0)}},
			final: map[string]keystore.Record{"pix:1001": {State: keystore.StateSucceeded, ResultRef: "s9", Result: []byte(`{"id":"s9","decision":"pending"}`)}}, want: "not an effect of this operation"},
		{name: "store says succeeded undecided, naming its plan change's subscription", ledger: pagpolartest.Ledger{PlanChanges: []pagpolartest.LedgerPlanChange{{PlanChange: wire.PlanChange{ID: "pc1", SubscriptionID: "sub1", Status: "rejected"}, CredentialID: "cred", Key: "k2", CreatedAt: t0}}},
			final: map[string]keystore.Record{"plan-change-9002-1": {State: keystore.StateSucceeded, ResultRef: "subscription sub1 on offer-pro", Result: []byte(`{"decision":"scheduled"}`)}}},
		{name: "store says succeeded undecided, naming another subscription", ledger: pagpolartest.Ledger{PlanChanges: []pagpolartest.LedgerPlanChange{{PlanChange: wire.PlanChange{ID: "pc1", SubscriptionID: "sub1", Status: "rejected"}, CredentialID: "cred", Key: "k2", CreatedAt: t0}}},
			final: map[string]keystore.Record{"plan-change-9002-1": {State: keystore.StateSucceeded, ResultRef: "subscription sub2 on offer-pro", Result: []byte(`{"decision":"scheduled"}`)}}, want: "not an effect of this operation"},
		{name: "success without an effect", reports: []Report{{Step: 1, OpID: "pix:1001", Outcome: Succeeded, EffectID: "s1", At: t0}},
			want: "not an effect of this operation"},
		{name: "failed while the effect exists", ledger: pagpolartest.Ledger{Sales: []pagpolartest.LedgerSale{sale("s1", "k1", "pending", 0)}, Requests: []pagpolartest.RequestLog{sent("k1", 0)}},
			reports: []Report{{Step: 1, OpID: "pix:1001", Outcome: Failed, At: t0.Add(time.Second)}}, want: "said failed"},
		{name: "not executed while the effect was on its way", ledger: pagpolartest.Ledger{Sales: []pagpolartest.LedgerSale{sale("s1", "k1", "pending", 5*time.Second)}, Requests: []pagpolartest.RequestLog{sent("k1", 0)}},
			reports: []Report{{Step: 1, OpID: "pix:1001", Outcome: NotExecuted, At: t0.Add(time.Second)}}, want: "on its way"},
		{name: "not executed, then sent again by the caller", ledger: pagpolartest.Ledger{Sales: []pagpolartest.LedgerSale{sale("s1", "k1", "pending", 5*time.Second)}, Requests: []pagpolartest.RequestLog{sent("k1", 0), sent("k1", 4*time.Second)}},
			reports: []Report{{Step: 1, OpID: "pix:1001", Outcome: NotExecuted, At: t0.Add(time.Second)}}},
		{name: "unknown breaks nothing", ledger: pagpolartest.Ledger{Sales: []pagpolartest.LedgerSale{sale("s1", "k1", "pending", 0)}},
			reports: []Report{{Step: 1, OpID: "pix:1001", Outcome: Unknown, At: t0.Add(time.Second)}}},
		{name: "store says not executed, the ledger has the effect", ledger: pagpolartest.Ledger{Sales: []pagpolartest.LedgerSale{sale("s1", "k1", "pending", 0)}},
			final: map[string]keystore.Record{"pix:1001": {State: keystore.StateNotExecuted}}, want: "the store says not_executed"},
		{name: "store says succeeded, the ledger has nothing", final: map[string]keystore.Record{"pix:1001": {State: keystore.StateSucceeded, ResultRef: "s1"}},
			want: "no successful effect"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			vs := Check(Truth{Ledger: c.ledger, Keys: keys}, c.reports, c.final)
			var got []string
			for _, v := range vs {
				got = append(got, v.String())
			}
			switch {
			case c.want == "" && len(vs) > 0:
				t.Fatalf("want no violation, got %q", got)
			case c.want != "" && (len(vs) == 0 || !strings.Contains(strings.Join(got, "|"), c.want)):
				t.Fatalf("want a violation with %q, got %q", c.want, got)
			}
		})
	}
}

// A violation of an operation that met a documented exposure is counted
// as such, not failed.
func TestCheck_ExposureIsCountedNotFailed(t *testing.T) {
	l := pagpolartest.Ledger{Sales: []pagpolartest.LedgerSale{sale("s1", "k1", "pending", 0), sale("s2", "k1", "pending", time.Second)}}
	r := Result{Violations: Check(Truth{Ledger: l, Keys: map[string]string{"pix:1001": "k1"}, Exposed: map[string]bool{"pix:1001": true}}, nil, nil)}
	if len(r.Violations) == 0 || len(r.Failures()) != 0 {
		t.Fatalf("violations %v, failures %v: want violations, all under the exposure", r.Violations, r.Failures())
	}
}

// What each error the SDK returns claims about the effect.
func TestClassify(t *testing.T) {
	cases := []struct {
		err  error
		want Outcome
	}{
		{nil, Succeeded},
		{&pagpolar.OutcomeUnknownError{OperationID: "x"}, Unknown},
		{&pagpolar.OperationError{State: "failed", Err: pagpolar.ErrDeclined}, Failed},
		{&pagpolar.OperationError{State: "failed", Err: pagpolar.ErrParamsMismatch}, Failed},
		// Only the SDK marks a not_executed it proved (its record written):
		// an error that merely names the state is not that proof.
		{&pagpolar.OperationError{State: "not_executed", Err: pagpolar.ErrRateLimited}, Unknown},
		{&pagpolar.OperationError{State: "succeeded", Err: pagpolar.ErrParamsMismatch}, Unknown},
		{fmt.Errorf("x: %w", pagpolar.ErrStoreUnavailable), NoClaim},
		{fmt.Errorf("x: %w", pagpolar.ErrInProgress), NoClaim},
		{errors.New("context deadline exceeded"), NoClaim},
	}
	for _, c := range cases {
		if got := classify(c.err); got != c.want {
			t.Errorf("classify(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}
