package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestSubscriptionExample(t *testing.T) {
	t.Setenv("PAGPOLAR_BASE_URL", "")
	var out bytes.Buffer
	if err := run(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "now on plan-basic after 2 plan changes") {
		t.Fatalf("unexpected output:\n%s", out.String())
	}
}
