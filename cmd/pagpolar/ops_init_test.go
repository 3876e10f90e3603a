package main

import (
	"strings"
	"testing"
)

// ops init reports a new store's history unproven (exit 4), declares it
// new with -declare, and then reports it proven (exit 0).
func TestOpsInit_DeclaresANewStoreProven(t *testing.T) {
	url := sqliteStore(t, "cred_1")
	out, errOut, code := ops(t, "init", "-store", url)
	if code != exitUnsettled || !strings.Contains(out, "HISTORY UNPROVEN") {
		t.Fatalf("init on a new store: exit %d, %q %q; want 4 and HISTORY UNPROVEN", code, out, errOut)
	}
	if _, errOut, code := ops(t, "init", "-store", url, "-declare", "test: a new deployment"); code != exitOK {
		t.Fatalf("init -declare: exit %d: %s", code, errOut)
	}
	out, errOut, code = ops(t, "init", "-store", url, "-json")
	if code != exitOK || !strings.Contains(out, `"proven": true`) || !strings.Contains(out, "test: a new deployment") {
		t.Fatalf("init after -declare: exit %d, %q %q", code, out, errOut)
	}
}
