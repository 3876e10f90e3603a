package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckoutSurvivesCrash(t *testing.T) {
	t.Setenv("PAGPOLAR_BASE_URL", "") // always the fake here
	var out bytes.Buffer
	if err := run(context.Background(), &out, filepath.Join(t.TempDir(), "keys.db")); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"run 1: crashed", "settled from lookup", "sales the fake recorded for the order: 1"} {
		if !strings.Contains(got, want) {
			t.Fatalf("output lacks %q:\n%s", want, got)
		}
	}
}
