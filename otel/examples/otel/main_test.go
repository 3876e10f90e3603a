package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// The example's tree shows the operation, the POST whose answer was lost,
// the lookup that settled it and the GET under that lookup, in that order
// and nesting.
func TestTreeShowsOperationAttemptLookupAttempt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, export bytes.Buffer
	if err := run(ctx, &out, &export); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	want := []string{"pagpolar.operation  ", "  POST  ", "  pagpolar.lookup  ", "    GET  "}
	at := 0
	for _, line := range strings.Split(out.String(), "\n") {
		if at < len(want) && strings.HasPrefix(line, want[at]) {
			at++
		}
	}
	if at != len(want) {
		t.Fatalf("tree lacks %q (in order operation → attempt → lookup → attempt):\n%s", want[at], out.String())
	}
	if !strings.Contains(out.String(), "pagpolar.source=lookup") {
		t.Errorf("the operation was not settled by the lookup:\n%s", out.String())
	}
	if !strings.Contains(export.String(), `"Name": "pagpolar.operation"`) {
		t.Errorf("the stdout exporter wrote no operation span")
	}
}
