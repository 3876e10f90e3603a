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

func TestCheckoutSurvivesCrash(t *testing.T) {
	clearEnv(t) // the in-process fake
	var logs bytes.Buffer
	exampleenv.LogOutput = &logs
	var out bytes.Buffer
	if err := run(context.Background(), &out, filepath.Join(t.TempDir(), "keys.db"), ""); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"in-process fake", "run 1: crashed", "settled from lookup", "sales the fake recorded for the order: 1"} {
		if !strings.Contains(got, want) {
			t.Fatalf("output lacks %q:\n%s", want, got)
		}
	}
	// Progress is logged through WithLogger: each step the SDK took.
	for _, want := range []string{"pagpolar: saved", "pagpolar: attempt", "pagpolar: lookup", "pagpolar: settle"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, logs.String())
		}
	}
}

// TestCheckoutOnTheSimsVariables: with only the base URL, credential and
// token a sim prints, the example runs against that API (the sim's offers
// by default), says so, and two runs use two order codes.
func TestCheckoutOnTheSimsVariables(t *testing.T) {
	clearEnv(t)
	sim := pagpolartest.NewServer(t)
	t.Setenv(exampleenv.EnvBaseURL, sim.URL)
	t.Setenv(exampleenv.EnvCredential, sim.CredentialID)
	t.Setenv(exampleenv.EnvToken, sim.Token)
	for range 2 {
		var out bytes.Buffer
		if err := run(context.Background(), &out, filepath.Join(t.TempDir(), "keys.db"), ""); err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		for _, want := range []string{"using the API at " + sim.URL, "offer offer-basic", "settled from lookup", "sales the API lists for the order: 1"} {
			if !strings.Contains(out.String(), want) {
				t.Fatalf("output lacks %q:\n%s", want, out.String())
			}
		}
	}
	if n := len(sim.Ledger().Sales); n != 2 {
		t.Fatalf("%d sales for two runs, want 2 (one order code per run)", n)
	}
}
