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

func TestRefundTwoParts(t *testing.T) {
	clearEnv(t)
	var out bytes.Buffer
	if err := run(context.Background(), &out, filepath.Join(t.TempDir(), "keys.db"), ""); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"in-process fake", "refund 1: 4995 centavos", "refund 2: 2497 centavos", "(from lookup)", "the sale has 2 refunds"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestRefundOnTheSimsVariables(t *testing.T) {
	clearEnv(t)
	sim := pagpolartest.NewServer(t)
	t.Setenv(exampleenv.EnvBaseURL, sim.URL)
	t.Setenv(exampleenv.EnvCredential, sim.CredentialID)
	t.Setenv(exampleenv.EnvToken, sim.Token)
	var out bytes.Buffer
	if err := run(context.Background(), &out, filepath.Join(t.TempDir(), "keys.db"), ""); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"using the API at " + sim.URL, "the sale has 2 refunds"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
}
