package scenario

import (
	"testing"

	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// Found by TestScenarios (seed 777) with the field proof reverted so that
// any name in the field table proves what it carries; each passes with the
// SDK as it is. They run the minimal scenario rapid shrank to.

// List items name the offer as "offer_id" (the list-offer-id shape) while
// POST answers echo offer_identifier; a boleto charge is committed and
// answered 500, and a cache serves every other list from its first copy.
// A name not seen carrying what was sent proves nothing, so the boleto
// sale, listed under another-looking offer, must stay unclear: taken as
// another operation's, the final ResumeAll settles the boleto charge not
// executed while its sale exists.
func TestScenario_OfferNamedByAnUnprovenFieldIsNotAnotherOffer(t *testing.T) {
	checkScenario(t, Scenario{Seed: 1073741824, Shapes: []pagpolartest.Shape{"list-offer-id"}, NoSubscriptionLookup: true, Mutations: []Mutation{}, APIClock: APIClock{Shift: -10800000000000, StepAt: 0, Step: 0, OtherHost: 120000000000, DropEvery: 2}, ClientSkew: 0, Cache: 1, Clients: 2, Steps: []Step{Step{Actor: 1, Do: 12, Order: 1, N: 1, Of: 0, Faults: []Fault(nil), Truncate: false, GiveUp: false, Concurrent: false, Advance: 0, Events: []int(nil)}, Step{Actor: 0, Do: 15, Order: 0, N: 1, Of: 0, Faults: []Fault(nil), Truncate: false, GiveUp: false, Concurrent: false, Advance: 0, Events: []int(nil)}, Step{Actor: 1, Do: 0, Order: 1, N: 0, Of: 0, Faults: []Fault{}, Truncate: false, GiveUp: false, Concurrent: false, Advance: 0, Events: []int(nil)}, Step{Actor: 0, Do: 1, Order: 1, N: 1, Of: 0, Faults: []Fault{Fault{Action: 4, Read: false, Status: 0, Delay: 0, LookupLag: 0}}, Truncate: false, GiveUp: false, Concurrent: false, Advance: 0, Events: []int(nil)}, Step{Actor: 1, Do: 2, Order: 1, N: 1, Of: 0, Faults: []Fault{Fault{Action: 6, Read: true, Status: 0, Delay: 0, LookupLag: 0}, Fault{Action: 8, Read: false, Status: 0, Delay: 2000000000, LookupLag: 0}}, Truncate: false, GiveUp: true, Concurrent: false, Advance: 0, Events: []int(nil)}}}, nil)
}

// List items carry neither method nor offer (the sparse-items shape): a
// PIX charge meets a 429 and a slow answer and is left unknown; a boleto
// charge then pays the same order. The boleto sale, new since the PIX
// charge's snapshot, shows nothing that tells it from the PIX charge's, so
// it is unclear: counted as the PIX charge's new effect, the PIX charge is
// reported succeeded with the boleto sale while no PIX sale exists.
func TestScenario_SparseListedSaleIsNotTheChargesNewEffect(t *testing.T) {
	checkScenario(t, Scenario{Seed: 2, Shapes: []pagpolartest.Shape{"sparse-items"}, NoSubscriptionLookup: false, Mutations: []Mutation{Mutation{Answers: "post subscribe", Edit: "upper", Field: "payment_method"}, Mutation{Answers: "post subscribe", Edit: "total-more", Field: ""}, Mutation{Answers: "any", Edit: "rename", Field: "status"}}, APIClock: APIClock{Shift: -2000000000, StepAt: 12, Step: -3600000000000, OtherHost: 0, DropEvery: 0}, ClientSkew: 700000000, Cache: 0, Clients: 3, Steps: []Step{Step{Actor: 0, Do: 0, Order: 0, N: 1, Of: 0, Faults: []Fault{Fault{Action: 11, Read: false, Status: 0, Delay: 0, LookupLag: 0}, Fault{Action: 13, Read: false, Status: 0, Delay: 1500000000, LookupLag: 0}}, Truncate: false, GiveUp: false, Concurrent: false, Advance: 0, Events: []int(nil)}, Step{Actor: 2, Do: 1, Order: 0, N: 1, Of: 0, Faults: []Fault{}, Truncate: false, GiveUp: false, Concurrent: false, Advance: 0, Events: []int(nil)}, Step{Actor: 0, Do: 2, Order: 1, N: 0, Of: 0, Faults: []Fault{}, Truncate: true, GiveUp: false, Concurrent: false, Advance: 0, Events: []int(nil)}}}, nil)
}
