package scenario

import (
	"testing"

	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

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
