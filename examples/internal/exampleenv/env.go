// Package exampleenv connects the examples to PagPolar: to the API named by
// PAGPOLAR_BASE_URL, PAGPOLAR_CREDENTIAL_ID and PAGPOLAR_TOKEN when all three
// are set, otherwise to an in-process fake, so every example runs as is.
package exampleenv

import (
	"os"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// API is where an example sends its requests.
type API struct {
	BaseURL      string
	CredentialID string
	Token        pagpolar.TokenSource
	Fake         *pagpolartest.Server // nil against a real API
	Policy       pagpolar.RetryPolicy // shortened windows against the fake
	OfferID      string
	PlanID       string
	OtherPlanID  string
}

// Connect returns the real API from the environment, or starts the fake.
// Close the returned function when done.
func Connect() (*API, func(), error) {
	base, cred, tok := os.Getenv("PAGPOLAR_BASE_URL"), os.Getenv("PAGPOLAR_CREDENTIAL_ID"), os.Getenv("PAGPOLAR_TOKEN")
	if base != "" && cred != "" && tok != "" {
		return &API{BaseURL: base, CredentialID: cred, Token: pagpolar.StaticToken(tok),
			OfferID: os.Getenv("PAGPOLAR_OFFER_ID"), PlanID: os.Getenv("PAGPOLAR_PLAN_ID"), OtherPlanID: os.Getenv("PAGPOLAR_OTHER_PLAN_ID")}, func() {}, nil
	}
	srv := pagpolartest.NewUnstartedServer(pagpolartest.WithProcessingWindow(300 * time.Millisecond))
	if err := srv.Start(); err != nil {
		return nil, nil, err
	}
	return &API{
		BaseURL: srv.URL, CredentialID: srv.CredentialID, Token: pagpolar.StaticToken(srv.Token), Fake: srv,
		// The fake's in-processing window is 300 ms instead of 60 s; the
		// client must know, or it would wait a real minute to trust a lookup.
		Policy:  pagpolar.RetryPolicy{ProcessingWindow: 300 * time.Millisecond, WindowMargin: 50 * time.Millisecond, SettleDelay: 50 * time.Millisecond, LookupInterval: 20 * time.Millisecond, MaxRetryAfter: 50 * time.Millisecond},
		OfferID: "offer-premium", PlanID: "plan-basic", OtherPlanID: "plan-pro",
	}, srv.Close, nil
}
