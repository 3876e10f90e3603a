package apicheck_test

import (
	"context"
	"fmt"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/apicheck"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// A team's integration test runs the check against its staging account
// (here the fake, spelling the card method "credit-card") and fails on
// ExitUnknown, or on anything but ExitConfirmed.
func ExampleRun() {
	srv := pagpolartest.NewUnstartedServer(pagpolartest.WithShapes(pagpolartest.ShapeMethodHyphen))
	if err := srv.Start(); err != nil {
		panic(err)
	}
	defer srv.Close()
	rep, err := apicheck.Run(context.Background(), apicheck.Config{
		BaseURL: srv.URL, CredentialID: srv.CredentialID, Token: pagpolar.StaticToken(srv.Token),
		OfferID: "offer-basic", PlanID: "plan-basic", OtherPlanID: "plan-pro", CardToken: "tok_ok",
	})
	if err != nil {
		panic(err) // unreachable API, refused credential, or a production URL
	}
	for _, it := range rep.Items {
		if it.Status == apicheck.Differs || it.Status == apicheck.Absent {
			fmt.Println(it.ID, it.Status, "-", it.SDK)
		}
	}
	fmt.Println("exit", rep.ExitCode())
	// Output:
	// method.credit_card differs - settles (card/lost-answer, card/replay)
	// exit 1
}
