package exampleenv

import (
	"bytes"
	"strings"
	"testing"
)

func clearEnv(t *testing.T) {
	for _, k := range Vars {
		t.Setenv(k, "")
	}
}

// TestConnectToTheFake: with none of the API's variables set, Connect
// starts the in-process fake, says so, and defaults to the sim's offers.
func TestConnectToTheFake(t *testing.T) {
	clearEnv(t)
	var b bytes.Buffer
	api, closeAPI, err := Connect(&b)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAPI()
	if api.Fake == nil || !strings.Contains(b.String(), "in-process fake") {
		t.Fatalf("fake %v, banner %q", api.Fake, b.String())
	}
	if api.OfferID != SimOfferID || api.PlanID != SimPlanID || api.OtherPlanID != SimOtherPlanID {
		t.Fatalf("offers %q %q %q, want the sim's", api.OfferID, api.PlanID, api.OtherPlanID)
	}
}

// TestConnectToAnotherAPI: with the three variables set, Connect uses that
// API and prints a banner naming it and what kind of host it is.
func TestConnectToAnotherAPI(t *testing.T) {
	clearEnv(t)
	for _, c := range []struct{ url, kind string }{
		{"http://127.0.0.1:8080/v1", "on this machine"},
		{"https://api.pagpolar.com/v1", "a REAL API"},
	} {
		t.Setenv(EnvBaseURL, c.url)
		t.Setenv(EnvCredential, "cred_1")
		t.Setenv(EnvToken, "tok")
		t.Setenv(EnvOfferID, "offer-x")
		var b bytes.Buffer
		api, closeAPI, err := Connect(&b)
		if err != nil {
			t.Fatal(err)
		}
		closeAPI()
		if api.Fake != nil || api.BaseURL != c.url || api.OfferID != "offer-x" || api.PlanID != SimPlanID {
			t.Errorf("%s: %+v", c.url, api)
		}
		if got := b.String(); !strings.Contains(got, "using the API at "+c.url) || !strings.Contains(got, c.kind) {
			t.Errorf("%s: banner %q", c.url, got)
		}
	}
}

// TestConnectRefusesHalfAConfiguration: some but not all of the three
// variables is an error naming the missing ones, not a silent fallback.
func TestConnectRefusesHalfAConfiguration(t *testing.T) {
	clearEnv(t)
	t.Setenv(EnvBaseURL, "http://127.0.0.1:8080/v1")
	t.Setenv(EnvToken, "tok")
	_, _, err := Connect(&bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), EnvCredential) {
		t.Fatalf("err %v, want one naming %s", err, EnvCredential)
	}
}

func TestRefIsPerRunUnlessFixed(t *testing.T) {
	a, b := Ref("PEDIDO-1234", ""), Ref("PEDIDO-1234", "")
	if a == b || !strings.HasPrefix(a, "PEDIDO-1234-") {
		t.Fatalf("refs %q %q: want two different ones starting PEDIDO-1234-", a, b)
	}
	if got := Ref("PEDIDO-1234", "MINE"); got != "MINE" {
		t.Fatalf("fixed ref: %q", got)
	}
}
