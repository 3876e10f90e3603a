package scenario

import (
	"testing"

	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// A PIX charge succeeds (settled by lookup after an intermediary's 504
// that came after the commit, so the API released the key); the store
// forgets everything (a Redis without persistence restarts); a card
// charge of the order is refused (amnesia); the operator runs ResumeAll
// (which finds nothing: the records are gone) and accepts the loss, as
// the amnesia error advises; the card charge goes through; the caller
// then repeats the PIX charge with the same operation ID and the API
// answers 500 after committing. Nothing remembers that the PIX charge
// was sent before, and the SDK settles the repeat as new: the order is
// charged twice by PIX. Found by TestScenarios (shrunk by rapid; a
// four-step version without the card charges does not reproduce it).
func TestAmnesia_AcceptedLossChargesAgain(t *testing.T) {
	res, err := Run(Scenario{Seed: 13, Shapes: []pagpolartest.Shape{}, NoSubscriptionLookup: true, Mutations: []Mutation{}, APIClock: APIClock{Shift: 0, StepAt: 0, Step: 0, OtherHost: 0, DropEvery: 0}, ClientSkew: 0, Cache: 0, Clients: 3, Steps: []Step{Step{Actor: 1, Do: 0, Order: 0, N: 0, Of: 0, Faults: []Fault{Fault{Action: 13, Read: false, Status: 0, Delay: 1500000000, LookupLag: 0}, Fault{Action: 10, Read: false, Status: 504, Delay: 0, LookupLag: 0}, Fault{Action: 7, Read: true, Status: 0, Delay: 100000000, LookupLag: 0}}, Truncate: false, GiveUp: false, Concurrent: false, Advance: 0, Events: []int(nil)}, Step{Actor: 0, Do: 13, Order: 1, N: 1, Of: 0, Faults: []Fault(nil), Truncate: false, GiveUp: false, Concurrent: false, Advance: 0, Events: []int(nil)}, Step{Actor: 0, Do: 2, Order: 0, N: 1, Of: 0, Faults: []Fault{}, Truncate: true, GiveUp: false, Concurrent: false, Advance: 0, Events: []int(nil)}, Step{Actor: 1, Do: 15, Order: 0, N: 1, Of: 0, Faults: []Fault(nil), Truncate: false, GiveUp: false, Concurrent: false, Advance: 0, Events: []int(nil)}, Step{Actor: 0, Do: 2, Order: 0, N: 1, Of: 0, Faults: []Fault{}, Truncate: false, GiveUp: false, Concurrent: false, Advance: 0, Events: []int(nil)}, Step{Actor: 1, Do: 0, Order: 0, N: 0, Of: 0, Faults: []Fault{Fault{Action: 4, Read: false, Status: 0, Delay: 0, LookupLag: 0}}, Truncate: false, GiveUp: false, Concurrent: false, Advance: 0, Events: []int(nil)}, Step{Actor: 0, Do: 15, Order: 0, N: 1, Of: 0, Faults: []Fault(nil), Truncate: false, GiveUp: false, Concurrent: false, Advance: 0, Events: []int(nil)}, Step{Actor: 2, Do: 6, Order: 0, N: 0, Of: 3, Faults: []Fault(nil), Truncate: false, GiveUp: false, Concurrent: false, Advance: 0, Events: []int(nil)}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range res.Violations { // the exposure counted by TestScenarios, failed here
		t.Errorf("%s", v)
	}
}
