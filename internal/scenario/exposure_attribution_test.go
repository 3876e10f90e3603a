package scenario

import (
	"testing"

	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// Two plan changes of one subscription run at once; the faults drawn for
// #1 (a commit answered 500 and a replica 200 ms behind it — more than the
// settle delay, SAFETY.md's documented lookup-lag exposure) match by route
// and subscription, so #0's request may meet them instead, and #0 is then
// changed twice. That is the documented exposure, whichever step it was
// drawn for: Run counts it as one, never as a failure. (The 30-minute hunt
// met this scenario, seed 20261202, scenario 1993, before concurrent steps
// on one reference shared their exposures; without the lag it does not
// fail.)
func TestRun_ExposureDrawnForAConcurrentStepOnTheReferenceExposesBoth(t *testing.T) {
	sc := Scenario{Seed: 4, Shapes: []pagpolartest.Shape{"method-upper", "date-step-back", "subscription-sparse", "plan-change-as-subscription"}, NoSubscriptionLookup: false, Mutations: []Mutation{Mutation{Answers: "post pix", Edit: "string-number", Field: "identifier"}, Mutation{Answers: "get subscription", Edit: "rename", Field: "id"}}, APIClock: APIClock{Shift: 0, StepAt: 0, Step: 0, OtherHost: 0, DropEvery: 0}, ClientSkew: 0, Cache: 0, Clients: 2, Steps: []Step{Step{Actor: 0, Do: 15, Order: 0, N: 1, Of: 0, Faults: []Fault(nil), Truncate: false, GiveUp: false, Concurrent: false, Advance: 0, Events: []int(nil)}, Step{Actor: 1, Do: 5, Order: 0, N: 1, Of: 0, Faults: []Fault{Fault{Action: 4, Read: false, Status: 0, Delay: 0, LookupLag: 200000000}, Fault{Action: 2, Read: false, Status: 0, Delay: 0, LookupLag: 200000000}, Fault{Action: 10, Read: false, Status: 504, Delay: 0, LookupLag: 0}}, Truncate: false, GiveUp: false, Concurrent: false, Advance: 0, Events: []int(nil)}, Step{Actor: 0, Do: 5, Order: 0, N: 0, Of: 0, Faults: []Fault{}, Truncate: false, GiveUp: false, Concurrent: true, Advance: 0, Events: []int(nil)}, Step{Actor: 1, Do: 0, Order: 1, N: 0, Of: 0, Faults: []Fault{}, Truncate: false, GiveUp: true, Concurrent: false, Advance: 0, Events: []int(nil)}}}
	for range 6 {
		res, err := Run(sc)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range res.Failures() {
			t.Errorf("%s", v)
		}
	}
}
