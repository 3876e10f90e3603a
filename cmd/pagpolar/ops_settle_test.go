package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore/sqlstore"
	"github.com/pagpolar/pagpolar-go/keystore/storetest"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// TestOpsSettleSaysWhy: settle names the cause of what stops it, with the
// exit code its -h gives: the API unreachable, the credential refused or a
// base URL without /v1 (1, before any lookup); no base URL (2: never a
// default to production); a -credential the store holds nothing of (3,
// naming the credentials it does hold).
func TestOpsSettleSaysWhy(t *testing.T) {
	srv := pagpolartest.NewServer(t)
	url := sqliteStore(t, srv.CredentialID, "pix:A")
	// A store in service, its history proven (ops init): in a file opened
	// fresh, a record that says it was never sent proves nothing (it is
	// left unsettled, TestOpsSettleLeavesNeverSentUnsettledOnAnUnprovenStore).
	declareNew(t, strings.TrimPrefix(url, "sqlite:"))
	id := pagpolar.RecordID(srv.CredentialID, "pix:A")
	t.Setenv("PAGPOLAR_BASE_URL", "")
	for _, c := range []struct {
		name  string
		token string
		args  []string
		code  int
		want  string
	}{
		{"unreachable", srv.Token, []string{"-base-url", "http://127.0.0.1:1/v1", id}, exitFailed, "cannot reach 127.0.0.1:1"},
		{"wrong token", "wrong", []string{"-base-url", srv.URL, id}, exitFailed, "GET /sales answered 401: the credential was refused"},
		{"no /v1", srv.Token, []string{"-base-url", strings.TrimSuffix(srv.URL, "/v1"), "-credential", srv.CredentialID, "-all"}, exitFailed, "the base URL must end in /v1"},
		{"no base URL", srv.Token, []string{id}, exitUsage, "give -base-url or set $PAGPOLAR_BASE_URL"},
		{"no token", "", []string{"-base-url", srv.URL, id}, exitUsage, "set $PAGPOLAR_TOKEN"},
		{"mistyped credential", srv.Token, []string{"-base-url", srv.URL, "-credential", "cred_typo", "-all"}, exitNoSuchOp, `no operation of credential "cred_typo" in the store (it holds operations of "` + srv.CredentialID + `")`},
		{"mistyped credential, dry run", "", []string{"-dry-run", "-credential", "cred_typo", "-all"}, exitNoSuchOp, `no operation of credential "cred_typo"`},
		{"settled", srv.Token, []string{"-base-url", srv.URL, "-credential", srv.CredentialID, "-all"}, exitOK, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("PAGPOLAR_TOKEN", c.token)
			out, errs, code := ops(t, append([]string{"settle", "-store", url}, c.args...)...)
			if code != c.code || !strings.Contains(errs, c.want) {
				t.Errorf("exit %d, want %d; stderr %q, want %q\nstdout: %s", code, c.code, errs, c.want, out)
			}
			if strings.Contains(errs+out, "the lookup failed") {
				t.Errorf("the cause is hidden behind a failed lookup:\n%s%s", out, errs)
			}
		})
	}
}

// TestHelpFlagsExitZero: -h of every command and subcommand, and help -h,
// print usage on stdout and exit 0.
func TestHelpFlagsExitZero(t *testing.T) {
	for _, args := range [][]string{
		{"help"}, {"help", "-h"}, {"-h"}, {"help", "ops"},
		{"ops", "-h"}, {"ops", "help"}, {"ops", "list", "-h"}, {"ops", "show", "-h"}, {"ops", "settle", "-h"}, {"ops", "reap", "-h"}, {"ops", "recover", "-h"},
		{"ops", "inbox", "-h"}, {"ops", "inbox", "list", "-h"}, {"ops", "inbox", "show", "-h"}, {"ops", "inbox", "retry", "-h"}, {"ops", "inbox", "reap", "-h"},
		{"check", "-h"}, {"demo", "-h"}, {"sim", "-h"}, {"chaos", "-h"},
	} {
		out, errs, code := pagpolarCmd(t, args...)
		if code != 0 || !strings.Contains(out, "usage") || errs != "" {
			t.Errorf("pagpolar %s: exit %d, stdout %.80q, stderr %.200q; want 0 with the usage on stdout", strings.Join(args, " "), code, out, errs)
		}
	}
}

// TestOpsSettleStillUnsettled: an operation whose lookup cannot be trusted
// yet is reported with the moment it becomes conclusive, in its own
// column (and in JSON), and settle exits 4.
func TestOpsSettleStillUnsettled(t *testing.T) {
	ctx := context.Background()
	srv := pagpolartest.NewServer(t)
	srv.Inject(pagpolartest.Fault{Route: "pix", ExternalReference: "o-lost", Times: 1, Action: pagpolartest.FaultDropBeforeProcessing})
	path := filepath.Join(t.TempDir(), "keys.db")
	store, err := sqlstore.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	// A store this test just made: its first send needs no lookup first
	// (which would wait for the trust moment, over a minute here).
	storetest.DeclareNew(t, store)
	pol := pagpolar.RetryPolicy{ProcessingWindow: time.Minute, LeaseTTL: 300 * time.Millisecond, AttemptTimeout: 50 * time.Millisecond,
		LookupInterval: 5 * time.Millisecond, MaxRetryAfter: 10 * time.Millisecond}
	c, err := pagpolar.NewClient(srv.CredentialID, pagpolar.StaticToken(srv.Token), pagpolar.WithBaseURL(srv.URL), pagpolar.WithStore(store),
		pagpolar.WithRetryPolicy(pol), pagpolar.WithHook(func(_ context.Context, ev pagpolar.Event) {
			if ev.Kind == pagpolar.EventSent {
				panic("crash")
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() { _ = recover() }()
		_, _ = c.Payments.Pix(ctx, pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: "o-lost",
			Customer: pagpolar.Customer{Name: "Maria Silva", Email: "maria@example.com", Document: "123.456.789-09"}})
	}()
	_ = store.Close()
	time.Sleep(400 * time.Millisecond) // the crashed worker's lease (300 ms) expires
	t.Setenv("PAGPOLAR_TOKEN", srv.Token)
	url := "sqlite:" + path
	id := pagpolar.RecordID(srv.CredentialID, "pix:o-lost")
	start := time.Now()
	out, errs, code := ops(t, "settle", "-store", url, "-base-url", srv.URL, "-wait", "500ms", id)
	if code != 4 || !strings.Contains(out, "CONCLUSIVE AFTER") || !strings.Contains(out, "1 still unsettled") {
		t.Fatalf("settle: code %d\n%s%s", code, out, errs)
	}
	if el := time.Since(start); el > 20*time.Second {
		t.Errorf("settle -wait 500ms took %v", el)
	}
	var rows []settledRow
	out, _, code = ops(t, "settle", "-store", url, "-base-url", srv.URL, "-json", "-credential", srv.CredentialID, "-all")
	if code != 4 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 || rows[0].ConclusiveAfter == nil ||
		rows[0].ConclusiveAfter.Before(time.Now().Add(30*time.Second)) || rows[0].OperationID != id {
		t.Fatalf("settle -json: code %d\n%s", code, out)
	}
	// The time in the text column is the JSON one.
	if txt, _, _ := ops(t, "settle", "-store", url, "-base-url", srv.URL, "-credential", srv.CredentialID, "-all"); !strings.Contains(txt, rows[0].ConclusiveAfter.Format(time.RFC3339)) {
		t.Errorf("the text does not show %s:\n%s", rows[0].ConclusiveAfter.Format(time.RFC3339), txt)
	}
}

// declareNew declares the SQLite store at path new, as ops init does.
func declareNew(t *testing.T, path string) {
	t.Helper()
	s, err := sqlstore.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.DeclareNew(context.Background(), "test: a store in service"); err != nil {
		t.Fatal(err)
	}
}

// A record that says it was never sent, in a store that cannot prove its
// history (a SQLite file opened fresh), may be a reverted copy of one whose
// send went out: settle leaves it unsettled (exit 4, saying why) and sends
// nothing, rather than record not_executed.
func TestOpsSettleLeavesNeverSentUnsettledOnAnUnprovenStore(t *testing.T) {
	srv := pagpolartest.NewServer(t)
	url := sqliteStore(t, srv.CredentialID, "pix:A")
	t.Setenv("PAGPOLAR_TOKEN", srv.Token)
	out, errs, code := ops(t, "settle", "-store", url, "-base-url", srv.URL, "-credential", srv.CredentialID, "-all")
	if code != exitUnsettled || !strings.Contains(out, "cannot prove its history") {
		t.Fatalf("exit %d, want %d saying the store cannot prove its history\nstdout: %s\nstderr: %s", code, exitUnsettled, out, errs)
	}
	for _, r := range srv.Ledger().Requests {
		if r.Method == "POST" {
			t.Errorf("settle sent %s %s", r.Method, r.Route)
		}
	}
}
