package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/sqlstore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

func ops(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := runOps(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), code
}

// TestOpsListShowSettleReap: operations left by a crash are listed, shown
// without personal data or tokens, settled by lookup without any charge, and
// settled records are reaped only past retention.
func TestOpsListShowSettleReap(t *testing.T) {
	ctx := context.Background()
	srv := pagpolartest.NewServer(t, pagpolartest.WithProcessingWindow(50*time.Millisecond))
	path := filepath.Join(t.TempDir(), "keys.db")
	store, err := sqlstore.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	pol := pagpolar.RetryPolicy{ProcessingWindow: 50 * time.Millisecond, WindowMargin: 10 * time.Millisecond, SettleDelay: 10 * time.Millisecond,
		LookupInterval: 5 * time.Millisecond, LeaseTTL: 300 * time.Millisecond, AttemptTimeout: 100 * time.Millisecond, MaxRetryAfter: 10 * time.Millisecond}
	crash := func(e pagpolar.EventKind, ref string) {
		c, err := pagpolar.NewClient(srv.CredentialID, pagpolar.StaticToken(srv.Token), pagpolar.WithBaseURL(srv.URL), pagpolar.WithStore(store),
			pagpolar.WithRetryPolicy(pol), pagpolar.WithHook(func(_ context.Context, ev pagpolar.Event) {
				if ev.Kind == e {
					panic("crash")
				}
			}))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = recover() }()
		_, _ = c.Payments.Pix(ctx, pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: ref,
			Customer: pagpolar.Customer{Name: "Maria Silva", Email: "maria@example.com", Document: "123.456.789-09"}})
	}
	crash(pagpolar.EventSent, "o-sent")
	crash(pagpolar.EventSaved, "o-unsent")
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	url := "sqlite:" + path

	out, errs, code := ops(t, "list", "-store", url, "-state", "pending")
	if code != 0 || !strings.Contains(out, "pix:o-sent") || !strings.Contains(out, "pix:o-unsent") || !strings.Contains(out, "2 operation(s)") {
		t.Fatalf("list: code %d\n%s%s", code, out, errs)
	}
	id := srv.CredentialID + "/pix:o-sent"
	out, _, code = ops(t, "show", "-store", url, "-json", id)
	var v opView
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.State != keystore.StatePending || v.Key == "" {
		t.Fatalf("show: code %d\n%s", code, out)
	}
	for _, secret := range []string{srv.Token, "maria", "123.456.789-09", "12345678909"} {
		if strings.Contains(strings.ToLower(out), strings.ToLower(secret)) {
			t.Fatalf("show prints %q:\n%s", secret, out)
		}
	}
	if _, _, code := ops(t, "show", "-store", url, "nope"); code != 3 {
		t.Fatalf("show of a missing operation: code %d, want 3", code)
	}

	posts := func() int {
		n := 0
		for _, r := range srv.Ledger().Requests {
			if r.Method == "POST" {
				n++
			}
		}
		return n
	}
	before := posts()
	time.Sleep(300 * time.Millisecond) // the crashed workers' leases (200 ms) must expire: real time, the store's clock
	t.Setenv("PAGPOLAR_TOKEN", srv.Token)
	out, errs, code = ops(t, "settle", "-store", url, "-credential", srv.CredentialID, "-base-url", srv.URL, "-all")
	if code != 0 || !strings.Contains(out, "succeeded") || !strings.Contains(out, "not_executed") {
		t.Fatalf("settle: code %d\n%s%s", code, out, errs)
	}
	if posts() != before {
		t.Fatal("ops settle sent a money request")
	}
	if _, errs, code := ops(t, "reap", "-store", url, "-retention", "1h"); code == 0 || !strings.Contains(errs, "minimum") {
		t.Fatalf("reap below the minimum retention: code %d %s", code, errs)
	}
	out, _, code = ops(t, "reap", "-store", url, "-json")
	if code != 0 || !strings.Contains(out, `"removed": 0`) {
		t.Fatalf("reap: code %d %s", code, out)
	}
}

func TestOpsBadInput(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"list"},
		{"list", "-store", "ftp://x"},
		{"list", "-store", "sqlite:" + filepath.Join(t.TempDir(), "k.db"), "-state", "nope"},
		{"frobnicate", "-store", "memory:"},
	} {
		_, errs, code := ops(t, args...)
		if code == 0 || errs == "" {
			t.Errorf("%q: code %d, stderr %q; want a clear error", args, code, errs)
		}
	}
	_, errs, _ := ops(t, "list", "-store", "postgres://user:hunter2@127.0.0.1:1/db")
	if strings.Contains(errs, "hunter2") {
		t.Fatalf("error echoes the password: %s", errs)
	}
}
