package main

import (
	"strings"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/apicheck"
)

// TestCheckStopsAtAMistypedOffer: an offer the API does not have is a
// configuration error: check stops at its first charge with exit 2 and the
// API's own reason, without waiting out any lookup (the default processing
// window of 60 s is kept, so a run that waited would take minutes).
func TestCheckStopsAtAMistypedOffer(t *testing.T) {
	vars, _, _ := startSim(t, "-addr", "127.0.0.1:0")
	simEnv(t, vars)
	start := time.Now()
	code, out, errs := runCheckCmd(t, "-offer", "offer-nope")
	took := time.Since(start)
	if code != apicheck.ExitUsage || !strings.Contains(errs, `offer "offer-nope" not found`) || !strings.Contains(errs, "POST /payments/pix answered 404") ||
		!strings.Contains(errs, "-offer") {
		t.Fatalf("exit %d, want %d with the API's reason\nstderr: %s\nstdout: %.2000s", code, apicheck.ExitUsage, errs, out)
	}
	if took > 30*time.Second {
		t.Errorf("check took %v to stop at a refused offer", took)
	}
	if !strings.Contains(errs, "pagpolar check: charges") {
		t.Errorf("no progress line for the charges phase:\n%s", errs)
	}
}

// TestCheckSaysWhyItCannotStart: a base URL without /v1, a wrong token and
// a closed port each stop check with exit 2 and their cause.
func TestCheckSaysWhyItCannotStart(t *testing.T) {
	vars, _, _ := startSim(t, "-addr", "127.0.0.1:0")
	for _, c := range []struct {
		name, env, value, want string
	}{
		{"no /v1", "PAGPOLAR_BASE_URL", strings.TrimSuffix(vars["PAGPOLAR_BASE_URL"], "/v1"), "the base URL must end in /v1"},
		{"wrong token", "PAGPOLAR_TOKEN", "wrong", "GET /sales answered 401: the credential was refused"},
		{"closed port", "PAGPOLAR_BASE_URL", "http://127.0.0.1:1/v1", "cannot reach 127.0.0.1:1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			simEnv(t, vars)
			t.Setenv(c.env, c.value)
			code, _, errs := runCheckCmd(t)
			if code != apicheck.ExitUsage || !strings.Contains(errs, c.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, errs, apicheck.ExitUsage, c.want)
			}
		})
	}
}
