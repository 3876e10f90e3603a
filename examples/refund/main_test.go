package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestRefundExample(t *testing.T) {
	t.Setenv("PAGPOLAR_BASE_URL", "")
	var out bytes.Buffer
	if err := run(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"refund 1: 5000 centavos completed (from response)", "refund 2: 2500 centavos completed (from lookup)", "the sale has 2 refunds"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
}
