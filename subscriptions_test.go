// Plan changes: their answer and their lookup settle on the change's own
// status.

package pagpolar

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// A plan-change answer without subscription_id skips the status check.
//
// isSubscriptionAnswer takes any 2xx plan-change body that carries
// next_billing_at (or external_reference) and no readable subscription ID
// for the subscription itself; planChangeAnsweredWithSubscription then
// declares success when its offer is the new one — the status is never
// looked at. A scheduled change ("applies at the next billing", the
// natural place for next_billing_at) or a rejected one answered 200 is
// recorded SUCCEEDED although the plan did not change. Here the API (the
// proxy) answers the change itself and makes none; the same bodies with
// subscription_id are handled right (ErrRefused / unknown): the controls.
func TestPlanChange_AnswerWithoutSubscriptionIDHasItsStatusChecked(t *testing.T) {
	for _, tc := range []struct {
		status  string
		withSub bool
	}{
		{"rejected", false}, {"scheduled", false},
		{"rejected", true}, {"scheduled", true}, // controls
	} {
		name := tc.status
		if tc.withSub {
			name = "control/" + name + "-with-subscription_id"
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, nil)
			sub, err := f.c.Subscriptions.Subscribe(f.ctx, SubscribeParams{OfferID: "plan-basic", ExternalReference: "sub-sched", Customer: goodCustomer, PaymentMethod: "pix"})
			if err != nil {
				t.Fatal(err)
			}
			u, _ := url.Parse(f.srv.URL)
			rp := httputil.NewSingleHostReverseProxy(u)
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/plan-change") {
					rp.ServeHTTP(w, r)
					return
				}
				body := map[string]any{"identifier": "pc_not_applied", "offer_identifier": "plan-pro", "from_offer_identifier": "plan-basic",
					"status": tc.status, "next_billing_at": f.srv.Clock.Now().AddDate(0, 1, 0).UTC().Format(time.RFC3339),
					"created_at": f.srv.Clock.Now().UTC().Format(time.RFC3339Nano)}
				if tc.withSub {
					body["subscription_id"] = sub.Subscription.ID
				}
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Date", f.srv.Clock.Now().UTC().Format(http.TimeFormat))
				_ = json.NewEncoder(w).Encode(body)
			}))
			defer api.Close()
			c := f.client(t, WithStore(f.store), WithBaseURL(api.URL))
			r, err := c.Subscriptions.ChangePlan(f.ctx, ChangePlanParams{OperationID: "pc-sched", SubscriptionID: sub.Subscription.ID, NewOfferID: "plan-pro"})
			// The status is read whatever the body carries: a rejected
			// change is refused; a scheduled one exists and is reported
			// scheduled, never applied (SAFETY rule 3: the status is the
			// decision).
			switch tc.status {
			case "rejected":
				if !errors.Is(err, ErrRefused) {
					t.Errorf("a rejected plan change answered 200: got %v (result %+v), want ErrRefused", err, r)
				}
			case "scheduled":
				if err != nil {
					t.Fatalf("a scheduled plan change answered 200: got %v, want success with DecisionScheduled", err)
				}
				if r.Decision() != DecisionScheduled || r.PlanChange.Status != "scheduled" {
					t.Errorf("decision %q (status %q), want %q", r.Decision(), r.PlanChange.Status, DecisionScheduled)
				}
			}
		})
	}
}

// The independent server answered a plan change with the subscription
// object and listed no plan_changes: recorded failed while the plan had
// changed, and a lost answer led to a second change.
func TestPlanChange_AnsweredWithTheSubscription(t *testing.T) {
	f := newFixture(t, []pagpolartest.Option{pagpolartest.WithShapes(pagpolartest.ShapePlanChangeAsSubscription, pagpolartest.ShapeNoPlanChanges)})
	sub, err := f.c.Subscriptions.Subscribe(f.ctx, SubscribeParams{OfferID: "plan-basic", ExternalReference: "sub-pc", Customer: goodCustomer, PaymentMethod: "pix"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.c.Subscriptions.ChangePlan(f.ctx, ChangePlanParams{OperationID: "pc-1", SubscriptionID: sub.Subscription.ID, NewOfferID: "plan-pro"})
	if err != nil {
		t.Fatalf("plan change answered with the subscription: %v", err)
	}
	if res.PlanChange.OfferID != "plan-pro" || res.PlanChange.SubscriptionID != sub.Subscription.ID {
		t.Errorf("plan change %+v", res.PlanChange)
	}
	// A lost answer: the subscription now shows the new offer (the
	// lookup's only evidence); nothing proves it absent otherwise.
	f.srv.Inject(pagpolartest.Fault{Route: "plan_change", Action: pagpolartest.FaultCommitThenDrop, Times: 1})
	_, err = f.c.Subscriptions.ChangePlan(f.ctx, ChangePlanParams{OperationID: "pc-2", SubscriptionID: sub.Subscription.ID, NewOfferID: "plan-basic"})
	if err != nil {
		t.Fatalf("lost answer: %v", err)
	}
	f.srv.Inject(pagpolartest.Fault{Route: "plan_change", Action: pagpolartest.Fault500NoCommit, Times: 1})
	_, err = f.c.Subscriptions.ChangePlan(f.ctx, ChangePlanParams{OperationID: "pc-3", SubscriptionID: sub.Subscription.ID, NewOfferID: "plan-pro"})
	if !isUnknown(err) {
		t.Fatalf("a change not made, on an API that lists no plan changes: %v, want ErrOutcomeUnknown (absence cannot be proven)", err)
	}
	if n := f.successful("plan_change"); n != 2 {
		t.Fatalf("%d plan changes, want 2 (pc-3 was never made, and never resent)", n)
	}
	f.assertNoDuplicates(t)
}

// A plan change found by lookup is taken as success whatever its status.
func TestPlanChange_FoundByLookupHasItsStatusChecked(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	sub, err := f.c.Subscriptions.Subscribe(f.ctx, SubscribeParams{OfferID: "plan-basic", ExternalReference: "sub-st", Customer: goodCustomer, PaymentMethod: "pix"})
	if err != nil {
		t.Fatal(err)
	}
	proxy := rewritingProxy(t, f, http.MethodGet, "/subscriptions/", func(v any) any {
		if pcs, ok := v.(map[string]any)["plan_changes"].([]any); ok {
			for _, pc := range pcs {
				pc.(map[string]any)["status"] = "rejected"
			}
		}
		return v
	})
	c := f.client(t, WithStore(f.store), WithBaseURL(proxy))
	f.srv.Inject(pagpolartest.Fault{Route: "plan_change", Action: pagpolartest.FaultCommitThen500, Times: 1})
	r, err := c.Subscriptions.ChangePlan(f.ctx, ChangePlanParams{OperationID: "pc-st", SubscriptionID: sub.Subscription.ID, NewOfferID: "plan-pro"})
	if err == nil {
		t.Errorf("BUG: plan change with status %q settled as success (source %s)", r.PlanChange.Status, r.Operation.Source)
	}
}
