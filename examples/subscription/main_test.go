package main

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pagpolar/pagpolar-go/examples/internal/exampleenv"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

func clearEnv(t *testing.T) {
	for _, k := range exampleenv.Vars {
		t.Setenv(k, "")
	}
	old := exampleenv.LogOutput
	exampleenv.LogOutput = io.Discard
	t.Cleanup(func() { exampleenv.LogOutput = old })
}

func TestSubscriptionChangesPlan(t *testing.T) {
	clearEnv(t)
	var out bytes.Buffer
	if err := run(context.Background(), &out, filepath.Join(t.TempDir(), "keys.db"), ""); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "now on plan-basic after 2 plan changes") {
		t.Fatalf("output:\n%s", out.String())
	}
}

func TestSubscriptionOnTheSimsVariables(t *testing.T) {
	clearEnv(t)
	sim := pagpolartest.NewServer(t)
	t.Setenv(exampleenv.EnvBaseURL, sim.URL)
	t.Setenv(exampleenv.EnvCredential, sim.CredentialID)
	t.Setenv(exampleenv.EnvToken, sim.Token)
	for range 2 { // a second run: another reference, not a params mismatch
		var out bytes.Buffer
		if err := run(context.Background(), &out, filepath.Join(t.TempDir(), "keys.db"), ""); err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		if !strings.Contains(out.String(), "using the API at "+sim.URL) || !strings.Contains(out.String(), "after 2 plan changes") {
			t.Fatalf("output:\n%s", out.String())
		}
	}
}
