package main

import (
	"bytes"
	"context"
	"encoding/hex"
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

// The CLI test suite of `pagpolar ops`: exit codes, help, flag order, the
// truncation notice, ID forms, dry runs, and read commands that never write.

func ops(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := runOps(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), code
}

// pagpolarCmd runs the whole command line, as main does.
func pagpolarCmd(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), code
}

// sqliteStore returns the URL of a migrated SQLite key store holding a
// pending record for each operation ID of cred.
func sqliteStore(t *testing.T, cred string, opIDs ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keys.db")
	s, err := sqlstore.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, op := range opIDs {
		if _, err := s.Create(ctx, keystore.Record{OperationID: pagpolar.RecordID(cred, op), Key: pagpolar.DerivedKey(cred, op), Kind: "pix", Fingerprint: "f", Meta: []byte(`{"path":"/payments/pix"}`)}, "test", time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	return "sqlite:" + path
}

// memOpener is a storeOpener over one Memory store (tests only).
type memOpener struct{ m *keystore.Memory }

// readOnly hides every method but the reads: list and show get nothing
// they could write with.
type readOnly struct{ recordReader }

func (o memOpener) OpenReadOnly(context.Context, string, func(string)) (recordReader, func() error, error) {
	return readOnly{o.m}, func() error { return nil }, nil
}

func (o memOpener) OpenWritable(context.Context, string) (keystore.Store, func() error, error) {
	return o.m, func() error { return nil }, nil
}

func useOpener(t *testing.T, o storeOpener) {
	old := opsStores
	opsStores = o
	t.Cleanup(func() { opsStores = old })
}

// putRecord stores a record of cred/op in state st at m's current time.
func putRecord(t *testing.T, m *keystore.Memory, cred, op string, st keystore.State) {
	t.Helper()
	ctx := context.Background()
	rec, err := m.Create(ctx, keystore.Record{OperationID: pagpolar.RecordID(cred, op), Key: "key-" + op, Kind: "pix", Fingerprint: "f"}, "test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if st != keystore.StatePending {
		rec.State = st
		if _, err := m.Update(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOpsListShowSettleReap: operations left by a crash are listed, shown
// without personal data or tokens, settled by lookup without any charge,
// and settled records are reaped only past retention. settle prints the
// same ID form as list and show.
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
	crash(pagpolar.EventSent, "o-third")
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	url := "sqlite:" + path
	sent := pagpolar.RecordID(srv.CredentialID, "pix:o-sent")

	out, errs, code := ops(t, "list", "-store", url, "-state", "pending")
	if code != 0 || !strings.Contains(out, sent) || !strings.Contains(out, "pix:o-unsent") || !strings.Contains(out, "3 operation(s)") {
		t.Fatalf("list: code %d\n%s%s", code, out, errs)
	}
	out, _, code = ops(t, "show", "-store", url, "-json", sent)
	var v opView
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.State != keystore.StatePending || v.Key == "" {
		t.Fatalf("show: code %d\n%s", code, out)
	}
	for _, secret := range []string{srv.Token, "maria", "123.456.789-09", "12345678909"} {
		if strings.Contains(strings.ToLower(out), strings.ToLower(secret)) {
			t.Fatalf("show prints %q:\n%s", secret, out)
		}
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
	time.Sleep(400 * time.Millisecond) // the crashed workers' leases (300 ms) must expire: real time, the store's clock
	t.Setenv("PAGPOLAR_TOKEN", srv.Token)
	// One operation by its listed ID, one by the operation alone with
	// -credential: settle prints both in the listed form.
	out, errs, code = ops(t, "settle", "-store", url, "-base-url", srv.URL, sent)
	if code != 0 || !strings.Contains(out, sent+" ") || !strings.Contains(out, "succeeded") {
		t.Fatalf("settle by listed ID: code %d\n%s%s", code, out, errs)
	}
	out, errs, code = ops(t, "settle", "pix:o-third", "-store", url, "-credential", srv.CredentialID, "-base-url", srv.URL)
	if code != 0 || !strings.Contains(out, pagpolar.RecordID(srv.CredentialID, "pix:o-third")+" ") {
		t.Fatalf("settle by operation ID: code %d\n%s%s", code, out, errs)
	}
	out, errs, code = ops(t, "settle", "-store", url, "-credential", srv.CredentialID, "-base-url", srv.URL, "-all")
	if code != 0 || !strings.Contains(out, pagpolar.RecordID(srv.CredentialID, "pix:o-unsent")) || !strings.Contains(out, "not_executed") {
		t.Fatalf("settle -all: code %d\n%s%s", code, out, errs)
	}
	if posts() != before {
		t.Fatal("ops settle sent a money request")
	}
	if _, errs, code := ops(t, "reap", "-store", url, "-retention", "1h"); code != 2 || !strings.Contains(errs, "minimum") {
		t.Fatalf("reap below the minimum retention: code %d %s", code, errs)
	}
	out, _, code = ops(t, "reap", "-store", url, "-json")
	if code != 0 || !strings.Contains(out, `"removed": 0`) {
		t.Fatalf("reap: code %d %s", code, out)
	}
}

// TestOpsHelp: "ops <command> -h" prints that command's own flags on
// stdout and exits 0; "ops -h", "help ops" and "ops help <command>" too.
func TestOpsHelp(t *testing.T) {
	own := map[string][]string{
		"list":   {"-state", "-older-than", "-prefix", "-limit", "-all", "-credential"},
		"show":   {"-store", "-json", "-credential"},
		"settle": {"-credential", "-base-url", "-all", "-dry-run"},
		"reap":   {"-retention", "-batch", "-dry-run"},
	}
	notOwn := map[string][]string{
		"list":   {"-base-url", "-retention", "-dry-run"},
		"show":   {"-state", "-base-url", "-retention", "-all"},
		"settle": {"-state", "-retention", "-older-than"},
		"reap":   {"-state", "-base-url", "-credential"},
	}
	for cmd, flags := range own {
		for _, args := range [][]string{{cmd, "-h"}, {cmd, "--help"}, {"help", cmd}} {
			out, errs, code := ops(t, args...)
			if code != 0 || errs != "" || !strings.HasPrefix(out, "usage: pagpolar ops "+cmd) {
				t.Errorf("ops %v: code %d, stdout %q, stderr %q", args, code, out, errs)
				continue
			}
			for _, f := range flags {
				if !strings.Contains(out, "  "+f+" ") && !strings.Contains(out, "  "+f+"\n") {
					t.Errorf("ops %v lacks its flag %s:\n%s", args, f, out)
				}
			}
			for _, f := range notOwn[cmd] {
				if strings.Contains(out, "  "+f+" ") || strings.Contains(out, "  "+f+"\n") {
					t.Errorf("ops %v shows another command's flag %s:\n%s", args, f, out)
				}
			}
		}
	}
	for _, args := range [][]string{{"ops", "-h"}, {"ops", "help"}, {"help", "ops"}} {
		out, _, code := pagpolarCmd(t, args...)
		if code != 0 || !strings.Contains(out, "exit codes:") || !strings.Contains(out, "3  no such operation") {
			t.Errorf("%v: code %d\n%s", args, code, out)
		}
	}
	if _, errs, code := ops(t); code != 2 || !strings.Contains(errs, "usage") {
		t.Errorf("ops without a command: code %d %q", code, errs)
	}
	out, _, code := pagpolarCmd(t, "version")
	if code != 0 || !strings.Contains(out, pagpolar.Version) {
		t.Errorf("version: code %d %q, want %s", code, out, pagpolar.Version)
	}
}

// TestOpsFlagsAfterTheID: flags are accepted before and after the ID.
func TestOpsFlagsAfterTheID(t *testing.T) {
	url := sqliteStore(t, "cred_1", "pix:A")
	id := pagpolar.RecordID("cred_1", "pix:A")
	for _, args := range [][]string{
		{"show", "-store", url, "-json", id},
		{"show", id, "-json", "-store", url},
		{"show", "-store", url, id, "-json"},
	} {
		out, errs, code := ops(t, args...)
		var v opView
		if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.OperationID != id {
			t.Errorf("ops %v: code %d\n%s%s", args, code, out, errs)
		}
	}
	// After "--" everything is an ID.
	if _, errs, code := ops(t, "show", "-store", url, "--", "-json"); code != 2 && code != 3 || !strings.Contains(errs, "-json") {
		t.Errorf(`show -- -json: code %d %q, want "-json" taken as an ID`, code, errs)
	}
}

// TestOpsFlagOfAnotherCommand: a flag that does not apply to the command
// is an error (exit 2) that says which command has it.
func TestOpsFlagOfAnotherCommand(t *testing.T) {
	url := sqliteStore(t, "cred_1", "pix:A")
	for _, c := range []struct {
		args  []string
		owner string
	}{
		{[]string{"list", "-store", url, "-base-url", "http://x"}, "settle"},
		{[]string{"list", "-store", url, "-dry-run"}, "settle, reap"},
		{[]string{"show", "-store", url, "-all", "cred_1/pix:A"}, "list, settle"},
		{[]string{"reap", "-store", url, "-credential", "c"}, "list, show, settle"},
		{[]string{"settle", "-store", url, "-retention", "720h", "-all"}, "reap"},
	} {
		out, errs, code := ops(t, c.args...)
		if code != 2 || out != "" || !strings.Contains(errs, "it is one of: "+c.owner) {
			t.Errorf("ops %v: code %d, stdout %q, stderr %q; want 2 naming %s", c.args, code, out, errs, c.owner)
		}
	}
	if _, errs, code := ops(t, "list", "-store", url, "-frobnicate"); code != 2 || !strings.Contains(errs, "-frobnicate is not a flag of ops list") {
		t.Errorf("unknown flag: code %d %q", code, errs)
	}
}

// TestOpsListTruncation: list never stops silently at its limit.
func TestOpsListTruncation(t *testing.T) {
	url := sqliteStore(t, "cred_1", "pix:1", "pix:2", "pix:3", "pix:4", "pix:5")
	out, errs, code := ops(t, "list", "-store", url, "-limit", "3")
	if code != 0 || strings.Count(out, "cred_1/pix:") != 3 || !strings.Contains(out, "showing 3 of at least 4; -limit N or -all") {
		t.Errorf("-limit 3: code %d\n%s%s", code, out, errs)
	}
	out, _, _ = ops(t, "list", "-store", url, "-all")
	if strings.Count(out, "cred_1/pix:") != 5 || !strings.Contains(out, "5 operation(s)") || strings.Contains(out, "showing") {
		t.Errorf("-all:\n%s", out)
	}
	out, _, _ = ops(t, "list", "-store", url, "-limit", "5")
	if !strings.Contains(out, "5 operation(s)") || strings.Contains(out, "showing") {
		t.Errorf("-limit 5 of 5:\n%s", out)
	}
	// JSON: the truncation is in the JSON itself.
	out, errs, code = ops(t, "list", "-store", url, "-limit", "2", "-json")
	var lv listView
	if code != 0 || json.Unmarshal([]byte(out), &lv) != nil || len(lv.Operations) != 2 || !lv.More || !strings.Contains(lv.Notice, "showing 2 of at least 3") {
		t.Errorf("-json -limit 2: code %d\n%s%s", code, out, errs)
	}
	// Default limit 100: 101 records are not shown as 100.
	m := keystore.NewMemory()
	for i := range 101 {
		putRecord(t, m, "cred_1", "pix:"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+hex.EncodeToString([]byte{byte(i)}), keystore.StatePending)
	}
	useOpener(t, memOpener{m})
	if out, _, _ := ops(t, "list", "-store", "test:"); !strings.Contains(out, "showing 100 of at least 101; -limit N or -all") {
		t.Errorf("101 records under the default limit:\n%s", out[max(0, len(out)-200):])
	}
}

// TestOpsIDForms: show and settle accept <credential>/<operation> as
// listed and the operation alone with -credential; a credential holding
// "/" is escaped as RecordID does; a miss says what was looked for.
func TestOpsIDForms(t *testing.T) {
	url := sqliteStore(t, "acme/eu", "pix:PEDIDO-1")
	id := pagpolar.RecordID("acme/eu", "pix:PEDIDO-1")
	if id != "acme%2Feu/pix:PEDIDO-1" {
		t.Fatalf("RecordID = %q", id)
	}
	if out, _, _ := ops(t, "list", "-store", url); !strings.Contains(out, id) {
		t.Fatalf("list does not print %s:\n%s", id, out)
	}
	if out, _, _ := ops(t, "list", "-store", url, "-credential", "acme/eu"); !strings.Contains(out, id) || !strings.Contains(out, "1 operation(s)") {
		t.Errorf("list -credential:\n%s", out)
	}
	for _, args := range [][]string{
		{"show", "-store", url, id},
		{"show", "-store", url, "-credential", "acme/eu", "pix:PEDIDO-1"},
		{"show", "-store", url, "-credential", "acme/eu", id},
	} {
		if out, errs, code := ops(t, args...); code != 0 || !strings.Contains(out, id) {
			t.Errorf("ops %v: code %d\n%s%s", args, code, out, errs)
		}
	}
	t.Setenv("PAGPOLAR_CREDENTIAL_ID", "")
	_, errs, code := ops(t, "show", "-store", url, "pix:PEDIDO-1")
	if code != 2 || !strings.Contains(errs, "-credential") || !strings.Contains(errs, "<credential>/pix:PEDIDO-1") {
		t.Errorf("bare ID without a credential: code %d %q", code, errs)
	}
	_, errs, code = ops(t, "show", "-store", url, "-credential", "acme/eu", "pix:PEDIDO-2")
	if code != 3 || !strings.Contains(errs, `"acme%2Feu/pix:PEDIDO-2"`) || !strings.Contains(errs, "pagpolar ops list") {
		t.Errorf("missing operation: code %d %q", code, errs)
	}
	// settle -dry-run resolves the same forms and prints the listed one.
	for _, args := range [][]string{
		{"settle", "-dry-run", "-store", url, id},
		{"settle", "-dry-run", "-store", url, "-credential", "acme/eu", "pix:PEDIDO-1"},
	} {
		if out, errs, code := ops(t, args...); code != 0 || !strings.Contains(out, id+" ") {
			t.Errorf("ops %v: code %d\n%s%s", args, code, out, errs)
		}
	}
	if _, errs, code := ops(t, "settle", "-store", url, "pix:PEDIDO-1"); code != 2 || !strings.Contains(errs, "-credential") {
		t.Errorf("settle of a bare ID without a credential: code %d %q", code, errs)
	}
}

// TestOpsDryRuns: settle -dry-run and reap -dry-run say what they would
// change, need no token, and change nothing.
func TestOpsDryRuns(t *testing.T) {
	clock := &stepClock{t: time.Now().Add(-40 * 24 * time.Hour)}
	m := keystore.NewMemoryWithClock(clock)
	putRecord(t, m, "cred_1", "pix:old-ok", keystore.StateSucceeded)
	putRecord(t, m, "cred_1", "pix:old-failed", keystore.StateFailed)
	putRecord(t, m, "cred_1", "pix:old-unknown", keystore.StateUnknown)
	clock.t = time.Now()
	putRecord(t, m, "cred_1", "pix:new-ok", keystore.StateSucceeded)
	putRecord(t, m, "cred_1", "pix:never-sent", keystore.StatePending) // leased for an hour by "test"
	useOpener(t, memOpener{m})
	snapshot := func() string {
		recs, err := m.List(context.Background(), keystore.Filter{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(recs)
		return string(b)
	}
	before := snapshot()

	t.Setenv("PAGPOLAR_TOKEN", "")
	out, errs, code := ops(t, "settle", "-dry-run", "-store", "test:", "-credential", "cred_1", "-all")
	if code != 0 || !strings.Contains(out, "cred_1/pix:old-unknown") || !strings.Contains(out, "look its pix up") ||
		!strings.Contains(out, "leased by test") || strings.Contains(out, "pix:old-ok") || !strings.Contains(out, "nothing changed") {
		t.Errorf("settle -dry-run: code %d\n%s%s", code, out, errs)
	}
	out, errs, code = ops(t, "reap", "-dry-run", "-store", "test:")
	if code != 0 || !strings.Contains(out, "cred_1/pix:old-ok") || !strings.Contains(out, "cred_1/pix:old-failed") ||
		strings.Contains(out, "new-ok") || strings.Contains(out, "old-unknown") || !strings.Contains(out, "would delete 2 ") {
		t.Errorf("reap -dry-run: code %d\n%s%s", code, out, errs)
	}
	if out, _, _ := ops(t, "reap", "-dry-run", "-store", "test:", "-limit", "1"); !strings.Contains(out, "more than 1") {
		t.Errorf("reap -dry-run -limit 1:\n%s", out)
	}
	if snapshot() != before {
		t.Fatal("a dry run changed the store")
	}
	out, _, code = ops(t, "reap", "-store", "test:")
	if code != 0 || !strings.Contains(out, "removed 2 ") {
		t.Errorf("reap: code %d %s", code, out)
	}
}

type stepClock struct{ t time.Time }

func (c *stepClock) Now() time.Time { return c.t }

// TestOpsExitCodes: every documented exit code, from the command line.
func TestOpsExitCodes(t *testing.T) {
	url := sqliteStore(t, "cred_1", "pix:A")
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"list", "-store", url}, 0},
		{[]string{"list", "-store", url, "-json"}, 0},
		{[]string{"list"}, 2}, // no -store
		{[]string{"list", "-store", "ftp://x"}, 2},
		{[]string{"list", "-store", url, "-state", "nope"}, 2},
		{[]string{"list", "-store", url, "stray"}, 2},
		{[]string{"frobnicate", "-store", url}, 2},
		{[]string{"show", "-store", url}, 2},
		{[]string{"show", "-store", url, "cred_1/pix:A"}, 0},
		{[]string{"show", "-store", url, "cred_1/pix:nope"}, 3},
		{[]string{"settle", "-store", url, "-credential", "cred_1"}, 2}, // neither an ID nor -all
		{[]string{"settle", "-dry-run", "-store", url, "cred_1/pix:nope"}, 3},
		{[]string{"reap", "-store", url, "-retention", "24h"}, 2},
		{[]string{"reap", "-store", url, "-dry-run"}, 0},
		{[]string{"list", "-store", "postgres://user:hunter2@127.0.0.1:1/db"}, 1}, // unreachable
	} {
		out, errs, code := ops(t, c.args...)
		if code != c.code {
			t.Errorf("ops %v: exit %d, want %d\n%s%s", c.args, code, c.code, out, errs)
		}
		if code != 0 && errs == "" {
			t.Errorf("ops %v: exit %d without a message", c.args, code)
		}
		if strings.Contains(errs, "hunter2") {
			t.Errorf("ops %v: the error echoes the password: %s", c.args, errs)
		}
	}
}
