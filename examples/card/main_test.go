package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/examples/internal/exampleenv"
)

func TestCardDeclinedAfterPendingThenPaid(t *testing.T) {
	for _, k := range exampleenv.Vars {
		t.Setenv(k, "")
	}
	old := exampleenv.LogOutput
	exampleenv.LogOutput = io.Discard
	t.Cleanup(func() { exampleenv.LogOutput = old })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, &out, ""); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`answered "pending"`, "declined after it was answered pending", ":2: paid: ship", "sales the fake recorded for the order: 2, paid: 1"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
}
