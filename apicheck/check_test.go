package apicheck

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

func runAgainst(t *testing.T, shapes ...pagpolartest.Shape) *Report {
	t.Helper()
	srv := pagpolartest.NewServer(t, pagpolartest.WithShapes(shapes...))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Config{BaseURL: srv.URL, CredentialID: srv.CredentialID, Token: pagpolar.StaticToken(srv.Token),
		OfferID: "offer-basic", PlanID: "plan-basic", OtherPlanID: "plan-pro", CardToken: "tok_ok", RunID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestScratch(t *testing.T) {
	var sh []pagpolartest.Shape
	if s := os.Getenv("SHAPE"); s != "" {
		sh, _ = pagpolartest.ParseShapes(s)
	}
	rep := runAgainst(t, sh...)
	rep.WriteTable(os.Stdout)
}

func TestScratchAll(t *testing.T) {
	for _, sh := range pagpolartest.AllShapes() {
		rep := runAgainst(t, sh)
		t.Logf("== %s exit %d", sh, rep.ExitCode())
		for _, it := range rep.Items {
			if it.Status != Confirmed && it.Status != NotExercised {
				t.Logf("   %s %s: %s | %s", it.ID, it.Status, it.Observed, it.SDK)
			}
		}
		for _, p := range rep.Paths {
			if p.Outcome != OutcomeSettled {
				t.Logf("   PATH %s %s: %s", p.Name, p.Outcome, p.Detail)
			}
		}
	}
}
