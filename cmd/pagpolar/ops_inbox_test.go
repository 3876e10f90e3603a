package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/webhook"
	"github.com/pagpolar/pagpolar-go/webhook/sqlinbox"
)

// newInboxFile returns a migrated SQLite inbox file and the store on it.
func newInboxFile(t *testing.T) (string, *sqlinbox.Store) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "inbox.db")
	s, err := sqlinbox.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return path, s
}

// settle stores key and takes it to state (received: left as stored).
func settle(t *testing.T, s webhook.Store, key string, st webhook.State) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := s.Insert(ctx, webhook.Record{Key: key, Event: strings.SplitN(key, ":", 2)[0], Entity: "sale:" + key,
		Payload: []byte(`{"event":"TRANSACTION_PAID"}`)}); err != nil {
		t.Fatal(err)
	}
	if st == webhook.StateReceived {
		return
	}
	rec, err := s.Claim(ctx, key, "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Complete(ctx, rec.Key, rec.LeaseToken, webhook.Outcome{State: st, Error: "boom"}); err != nil {
		t.Fatal(err)
	}
}

// TestOpsInbox: a dead webhook event is listed and retried.
func TestOpsInbox(t *testing.T) {
	path, s := newInboxFile(t)
	settle(t, s, "TRANSACTION_PAID:sale_1", webhook.StateDead)
	url := "sqlite:" + path
	out, errs, code := ops(t, "inbox", "list", "-store", url, "-state", "dead")
	if code != 0 || !strings.Contains(out, "TRANSACTION_PAID:sale_1") || !strings.Contains(out, "boom") {
		t.Fatalf("inbox list: %d\n%s%s", code, out, errs)
	}
	out, errs, code = ops(t, "inbox", "retry", "-store", url, "-json", "TRANSACTION_PAID:sale_1")
	if code != 0 || !strings.Contains(out, `"state": "received"`) {
		t.Fatalf("inbox retry: %d\n%s%s", code, out, errs)
	}
	if _, _, code := ops(t, "inbox", "retry", "-store", url, "TRANSACTION_PAID:sale_1"); code == 0 {
		t.Fatal("retrying a received event should be refused")
	}
}

// TestOpsInboxReap: the dry run lists the processed and dead events past
// retention and deletes nothing; reap deletes exactly those; unfinished
// events are kept however old; a retention below the minimum is refused.
func TestOpsInboxReap(t *testing.T) {
	path, s := newInboxFile(t)
	for _, k := range []string{"TRANSACTION_PAID:old1", "TRANSACTION_PAID:old2", "TRANSACTION_PAID:old3"} {
		settle(t, s, k, webhook.StateProcessed)
	}
	settle(t, s, "TRANSACTION_DECLINED:olddead", webhook.StateDead)
	settle(t, s, "TRANSACTION_CREATED:olderror", webhook.StateError)
	settle(t, s, "TRANSACTION_PAID:oldreceived", webhook.StateReceived)
	settle(t, s, "TRANSACTION_PAID:recent", webhook.StateProcessed)
	settle(t, s, "TRANSACTION_DECLINED:recentdead", webhook.StateDead)
	// Age the "old" rows by 40 days, as time would (the store's clock sets
	// updated_at, so the test moves the rows instead of the clock).
	db, err := sql.Open("sqlite", sqlinbox.SQLiteDSN(path, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE `+sqlinbox.DefaultTable+` SET updated_at = updated_at - ? WHERE dedupe_key LIKE '%:old%'`,
		(40 * 24 * time.Hour).Microseconds()); err != nil {
		t.Fatal(err)
	}
	url := "sqlite:" + path
	count := func() int {
		t.Helper()
		rs, err := s.List(context.Background(), webhook.Filter{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return len(rs)
	}

	out, errs, code := ops(t, "inbox", "reap", "-store", url, "-dry-run")
	if code != 0 {
		t.Fatalf("reap -dry-run: %d\n%s%s", code, out, errs)
	}
	for _, k := range []string{"old1", "old2", "old3", "olddead"} {
		if !strings.Contains(out, k) {
			t.Errorf("dry run does not list %s:\n%s", k, out)
		}
	}
	for _, k := range []string{"olderror", "oldreceived", "recent"} {
		if strings.Contains(out, k) {
			t.Errorf("dry run lists %s:\n%s", k, out)
		}
	}
	if !strings.Contains(out, "would delete 4 event(s)") || !strings.Contains(out, "3 processed, 1 dead") || !strings.Contains(out, "nothing deleted") {
		t.Errorf("dry run summary:\n%s", out)
	}
	if n := count(); n != 8 {
		t.Fatalf("the dry run deleted something: %d events left, want 8", n)
	}
	// The dry run's list is bounded by -limit and says so.
	if out, _, _ := ops(t, "inbox", "reap", "-store", url, "-dry-run", "-limit", "2"); !strings.Contains(out, "at least") {
		t.Errorf("dry run with -limit 2 does not say the list was cut:\n%s", out)
	}

	out, errs, code = ops(t, "inbox", "reap", "-store", url, "-batch", "1", "-pause", "0s")
	if code != 0 || !strings.Contains(out, "removed 4 ") {
		t.Fatalf("reap: %d\n%s%s", code, out, errs)
	}
	if n := count(); n != 4 {
		t.Errorf("%d events left after reap, want 4 (the unfinished old ones and the recent ones)", n)
	}
	for _, k := range []string{"TRANSACTION_CREATED:olderror", "TRANSACTION_PAID:oldreceived", "TRANSACTION_PAID:recent", "TRANSACTION_DECLINED:recentdead"} {
		if _, err := s.Get(context.Background(), k); err != nil {
			t.Errorf("%s: %v, want kept", k, err)
		}
	}
	out, errs, code = ops(t, "inbox", "reap", "-store", url, "-json")
	if code != 0 || !strings.Contains(out, `"removed": 0`) {
		t.Errorf("second reap: %d\n%s%s", code, out, errs)
	}
	if _, errs, code := ops(t, "inbox", "reap", "-store", url, "-retention", "24h"); code != 2 || !strings.Contains(errs, "minimum") {
		t.Errorf("reap -retention 24h: %d %s; want 2 and the minimum named", code, errs)
	}
}

// TestOpsInboxShowSealed: a sealed body is shown only with its key; without
// it the operator sees which key sealed it and everything else in clear.
func TestOpsInboxShowSealed(t *testing.T) {
	path, s := newInboxFile(t)
	key := webhook.PayloadKey{ID: "k1", Secret: bytes.Repeat([]byte{9}, 32)}
	in, err := webhook.New(webhook.Config{Store: s, Tokens: []string{"whk"}, PayloadKeys: []webhook.PayloadKey{key},
		Default: func(context.Context, *webhook.Event) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"event":"TRANSACTION_PAID","data":{"transaction":{"id":"sale_7","customer":{"email":"maria@exemplo.com"}}}}`
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer whk")
	w := httptest.NewRecorder()
	in.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("delivery: %d", w.Code)
	}
	url := "sqlite:" + path
	t.Setenv("PAGPOLAR_WEBHOOK_PAYLOAD_KEYS", "")
	out, errs, code := ops(t, "inbox", "show", "-store", url, "-payload", "TRANSACTION_PAID:sale_7")
	if code != 0 || strings.Contains(out, "maria@") || !strings.Contains(out, `sealed with key "k1"`) || !strings.Contains(out, "sale:sale_7") {
		t.Fatalf("show -payload without the key: %d\n%s%s", code, out, errs)
	}
	t.Setenv("PAGPOLAR_WEBHOOK_PAYLOAD_KEYS", "k1:"+base64.StdEncoding.EncodeToString(key.Secret))
	out, errs, code = ops(t, "inbox", "show", "-store", url, "-payload", "-json", "TRANSACTION_PAID:sale_7")
	if code != 0 || !strings.Contains(out, `maria@exemplo.com`) || !strings.Contains(out, `"payload_sealed_with": "k1"`) {
		t.Fatalf("show -payload with the key: %d\n%s%s", code, out, errs)
	}
	out, _, _ = ops(t, "inbox", "show", "-store", url, "TRANSACTION_PAID:sale_7")
	if strings.Contains(out, "maria@") {
		t.Errorf("show without -payload printed the body:\n%s", out)
	}
}

// TestOpsInboxListSaysMoreInJSON: a list cut at -limit says so, in the
// JSON itself and on the text's last line.
func TestOpsInboxListSaysMoreInJSON(t *testing.T) {
	path, s := newInboxFile(t)
	for _, k := range []string{"TRANSACTION_PAID:a", "TRANSACTION_PAID:b", "TRANSACTION_PAID:c"} {
		settle(t, s, k, webhook.StateDead)
	}
	out, errs, code := ops(t, "inbox", "list", "-store", "sqlite:"+path, "-limit", "2", "-json")
	var v struct {
		Events []eventView `json:"events"`
		More   bool        `json:"more"`
		Notice string      `json:"notice"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || len(v.Events) != 2 || !v.More || !strings.Contains(v.Notice, "showing 2 of at least 3") {
		t.Errorf("-json -limit 2: exit %d\n%s%s", code, out, errs)
	}
	if out, _, _ := ops(t, "inbox", "list", "-store", "sqlite:"+path, "-limit", "2"); !strings.Contains(out, "showing 2 of at least 3") {
		t.Errorf("text -limit 2:\n%s", out)
	}
	if out, _, _ := ops(t, "inbox", "list", "-store", "sqlite:"+path, "-limit", "3", "-json"); !strings.Contains(out, `"more": false`) {
		t.Errorf("-limit 3 of 3:\n%s", out)
	}
}

// TestOpsInboxExitCodes: every exit code of ops inbox -h, from the
// command line, each with a message; the old -allow-* flags say where the
// opt-outs went.
func TestOpsInboxExitCodes(t *testing.T) {
	path, s := newInboxFile(t)
	settle(t, s, "TRANSACTION_PAID:x", webhook.StateDead)
	url := "sqlite:" + path
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"list", "-store", url}, 0, ""},
		{[]string{"show", "-store", url, "TRANSACTION_PAID:x"}, 0, ""},
		{[]string{"list"}, 2, "-store is required"},
		{[]string{"frobnicate", "-store", url}, 2, "unknown command"},
		{[]string{"list", "-store", url, "-allow-volatile"}, 2, "?volatile=1"},
		{[]string{"list", "-store", url, "stray"}, 2, "unexpected argument"},
		{[]string{"list", "-store", url + "x"}, 2, "does not exist"},
		{[]string{"list", "-store", url + "?wait=1"}, 2, "unknown parameter \"wait\""},
		{[]string{"list", "-store", "redis://127.0.0.1:1/0?wait=1"}, 2, "takes no wait="},
		{[]string{"show", "-store", url, "TRANSACTION_PAID:nope"}, 3, "not found"},
		{[]string{"list", "-store", "postgres://u:hunter2@127.0.0.1:1/db?connect_timeout=2"}, 1, ""},
	} {
		out, errs, code := ops(t, append([]string{"inbox"}, c.args...)...)
		if code != c.code || (code != 0 && errs == "") || !strings.Contains(errs, c.want) || strings.Contains(errs, "hunter2") {
			t.Errorf("ops inbox %v: exit %d, want %d with %q\n%s%s", c.args, code, c.code, c.want, out, errs)
		}
	}
}
