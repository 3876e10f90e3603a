package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestOutbox_CommittedOrderChargedAbortedNever(t *testing.T) {
	for _, k := range []string{"PAGPOLAR_BASE_URL", "PAGPOLAR_CREDENTIAL_ID", "PAGPOLAR_TOKEN", "PAGPOLAR_OFFER_ID"} {
		t.Setenv(k, "") // the in-process fake
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, &out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"in-process fake", ": charged, sale sale_", "-aborted: 0\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Count(got, ": 1\n") != 1 {
		t.Errorf("want one order with one sale:\n%s", got)
	}
}
