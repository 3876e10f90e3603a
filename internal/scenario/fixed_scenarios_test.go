// Scenarios the random search (TestScenarios) found, kept as fixed cases:
// each replays one sequence of faults and asserts the ledger invariants on
// it.

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

// A card charge is never processed (the API's 503, then a gateway's 504
// in front of it) and left unknown: a CDN stamps "Age: 0" on every
// answer, so its lookups count as cached. The order is then charged by
// PIX, and the sale lists leave payment_method out. A fresh client's
// ResumeAll finds the PIX sale under the order's reference, with the
// card's offer, created after the card's first send — and settles the
// card charge succeeded with it. Nothing tells the PIX sale from the
// card's (no method), so it is unclear, never the card's success: the
// order looks paid by card while no card was charged. Found by
// TestScenarios (seed 8279217181537, 61st scenario), shrunk by hand.
func TestScenario_SaleListedWithoutMethodIsNotTheCardChargesSuccess(t *testing.T) {
	res, err := Run(Scenario{Seed: 13, Clients: 1, Cache: CacheAgeZero,
		Mutations: []Mutation{{Answers: ListSales, Edit: EditRemove, Field: "payment_method"}},
		Steps: []Step{
			{Do: DoCard, Faults: []Fault{{Action: pagpolartest.FaultUnavailable}, {Action: pagpolartest.FaultGateway, Status: 504}}},
			{Do: DoPix},
		}})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range res.Violations {
		t.Errorf("%s", v)
	}
}

// Two API hosts whose Date headers disagree by two minutes (and a Date
// 2 s off the database's clock): a PIX charge is committed, an
// intermediary answers 503 after the commit (the key is released), the
// first lookup meets a gateway's 503, the resend a 500 without a commit;
// the SDK then sends again and the order is charged twice by PIX. Found
// by TestScenarios (seed 4233601864148), shrunk by rapid; which of the
// clocks' disagreements leads the settle astray is not analysed here.
func TestScenario_HostsDisagreeingOnDateDoNotExcludeTheCommittedSale(t *testing.T) {
	res, err := Run(Scenario{Seed: 1073741824, Shapes: []pagpolartest.Shape{}, NoSubscriptionLookup: false, Mutations: []Mutation{Mutation{Answers: "post pix", Edit: "time-unix", Field: "created_at"}, Mutation{Answers: "post boleto", Edit: "alias", Field: "payment_method"}, Mutation{Answers: "post refund", Edit: "remove", Field: "id"}}, APIClock: APIClock{Shift: 2000000000, StepAt: 0, Step: 0, OtherHost: 120000000000, DropEvery: 0}, ClientSkew: 700000000, Cache: 0, Clients: 3, Steps: []Step{Step{Actor: 0, Do: 0, Order: 1, N: 0, Of: 0, Faults: []Fault{Fault{Action: 3, Read: false, Status: 0, Delay: 0, LookupLag: 0}}, Truncate: false, GiveUp: false, Concurrent: false, Advance: 0, Events: []int(nil)}, Step{Actor: 0, Do: 0, Order: 0, N: 0, Of: 0, Faults: []Fault{Fault{Action: 9, Read: true, Status: 503, Delay: 0, LookupLag: 0}, Fault{Action: 10, Read: false, Status: 503, Delay: 0, LookupLag: 0}, Fault{Action: 6, Read: false, Status: 0, Delay: 0, LookupLag: 0}}, Truncate: false, GiveUp: false, Concurrent: false, Advance: 0, Events: []int(nil)}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range res.Violations {
		t.Errorf("%s", v)
	}
}

// A warm client (its PIX charge answered) charges the order by boleto: the
// answer is truncated and the caller gives up; a micro-cache in front of
// the API serves every other read of a URL from its first answer, with
// that answer's Date and no Age. The final ResumeAll, by a client that has
// read nothing of the API's clock, settled the boleto not executed from a
// copy made before its send while its sale existed: the record the warm
// charge is created with (saved as about to be sent, before any snapshot)
// carried no prove_by. Found by TestScenarios in a CI run (seed
// 1796193246467280949), shrunk by rapid.
func TestScenario_WarmChargesRecordCarriesItsProofDate(t *testing.T) {
	res, err := Run(Scenario{Seed: 31811, Shapes: []pagpolartest.Shape{"no-plan-changes", "method-upper"}, NoSubscriptionLookup: false, Mutations: []Mutation{Mutation{Answers: "post credit_card", Edit: "more-flag", Field: ""}}, APIClock: APIClock{Shift: 0, StepAt: 0, Step: 0, OtherHost: 0, DropEvery: 0}, ClientSkew: 700000000, Cache: 5, Clients: 2, Steps: []Step{Step{Actor: 1, Do: 0, Order: 0, N: 0, Of: 0, Faults: []Fault{}, Truncate: false, GiveUp: true, Concurrent: false, Advance: 0, Events: []int(nil)}, Step{Actor: 1, Do: 1, Order: 0, N: 0, Of: 0, Faults: []Fault{Fault{Action: 8, Read: false, Status: 0, Delay: 20000000, LookupLag: 0}}, Truncate: true, GiveUp: true, Concurrent: false, Advance: 0, Events: []int(nil)}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range res.Violations {
		t.Errorf("%s", v)
	}
}

// TestScenario_APIWithoutDateBehindACacheWithoutAgeIsTheOpenExposure: an
// API that sends no Date at all (no-date), behind a micro-cache that
// ignores no-cache and sends no Age (cache-no-age), is README's open limit:
// nothing tells a copy made before a lost send from the list as it is, and
// the PIX is charged twice. The scenario counts such operations as a
// documented exposure; without either shape the same steps charge once.
// Found by TestScenarios in a CI run (seed 1796221010933207614), shrunk by
// rapid.
func TestScenario_APIWithoutDateBehindACacheWithoutAgeIsTheOpenExposure(t *testing.T) {
	sc := Scenario{Seed: 1226, Shapes: []pagpolartest.Shape{"method-card", "paged-link", "cache-no-age", "no-date"}, NoSubscriptionLookup: false, Mutations: []Mutation{Mutation{Answers: "post subscribe", Edit: "number-string", Field: "subscription_id"}, Mutation{Answers: "list refunds", Edit: "compact", Field: ""}, Mutation{Answers: "post credit_card", Edit: "upper", Field: "payment_method"}}, APIClock: APIClock{Shift: 0, StepAt: 0, Step: 0, OtherHost: 0, DropEvery: 0}, ClientSkew: -7200000000000, Cache: 3, Clients: 3, Steps: []Step{Step{Actor: 0, Do: 0, Order: 0, N: 0, Of: 0, Faults: []Fault{Fault{Action: 10, Read: false, Status: 504, Delay: 0, LookupLag: 0}, Fault{Action: 6, Read: true, Status: 0, Delay: 0, LookupLag: 0}, Fault{Action: 9, Read: true, Status: 503, Delay: 0, LookupLag: 0}}, Truncate: false, GiveUp: false, Concurrent: false, Advance: 0, Events: []int(nil)}, Step{Actor: 1, Do: 4, Order: 0, N: 0, Of: 0, Faults: []Fault{Fault{Action: 1, Read: false, Status: 0, Delay: 0, LookupLag: 0}}, Truncate: true, GiveUp: false, Concurrent: true, Advance: 0, Events: []int(nil)}, Step{Actor: 2, Do: 11, Order: 0, N: 1, Of: 0, Faults: []Fault(nil), Truncate: false, GiveUp: false, Concurrent: false, Advance: 0, Events: []int{3, 2, 0, 19, 17}}, Step{Actor: 0, Do: 1, Order: 1, N: 1, Of: 0, Faults: []Fault{}, Truncate: false, GiveUp: false, Concurrent: false, Advance: 0, Events: []int(nil)}, Step{Actor: 1, Do: 0, Order: 1, N: 0, Of: 0, Faults: []Fault{Fault{Action: 3, Read: false, Status: 0, Delay: 0, LookupLag: 0}, Fault{Action: 1, Read: false, Status: 0, Delay: 0, LookupLag: 0}, Fault{Action: 7, Read: false, Status: 0, Delay: 250000000, LookupLag: 0}}, Truncate: false, GiveUp: false, Concurrent: true, Advance: 0, Events: []int(nil)}, Step{Actor: 2, Do: 4, Order: 0, N: 1, Of: 0, Faults: []Fault{Fault{Action: 4, Read: false, Status: 0, Delay: 0, LookupLag: 0}}, Truncate: true, GiveUp: false, Concurrent: false, Advance: 0, Events: []int(nil)}, Step{Actor: 1, Do: 4, Order: 1, N: 1, Of: 0, Faults: []Fault{Fault{Action: 3, Read: true, Status: 0, Delay: 0, LookupLag: 0}, Fault{Action: 7, Read: false, Status: 0, Delay: 250000000, LookupLag: 0}, Fault{Action: 8, Read: false, Status: 0, Delay: 20000000, LookupLag: 0}}, Truncate: true, GiveUp: false, Concurrent: false, Advance: 0, Events: []int(nil)}, Step{Actor: 1, Do: 0, Order: 1, N: 1, Of: 0, Faults: []Fault{Fault{Action: 2, Read: false, Status: 0, Delay: 0, LookupLag: 0}}, Truncate: false, GiveUp: true, Concurrent: false, Advance: 0, Events: []int(nil)}}}
	res, err := Run(sc)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range res.Failures() {
		t.Errorf("outside the documented exposure: %s", v)
	}
	for _, v := range res.Violations {
		t.Logf("under the documented exposure: %s", v)
	}
	for _, shapes := range [][]pagpolartest.Shape{{"method-card", "paged-link", "cache-no-age"}, {"method-card", "paged-link", "no-date"}} {
		sc.Shapes = shapes
		res, err := Run(sc)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range res.Violations {
			t.Errorf("shapes %v: %s", shapes, v)
		}
	}
}
