// Scrubbing and redaction of tokens and personal data in errors, logs and
// stored reasons.

package pagpolar

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// Redaction replaced every occurrence of a short token, inside words:
// with the token "t", errors read `Pos[redacted] "h[redacted][redacted]p://`.
func TestRedaction_OnlyWholeValues(t *testing.T) {
	for _, c := range []struct{ in, tok, want string }{
		{`Post "http://x/v1": Bearer t`, "t", `Post "http://x/v1": Bearer [redacted]`},
		{`token=abc123&x=1`, "abc123", `token=[redacted]&x=1`},
		{`xabc123 abc123y`, "abc123", `xabc123 abc123y`},
		{`"abc123"`, "abc123", `"[redacted]"`},
	} {
		if got := redactToken(c.in, c.tok); got != c.want {
			t.Errorf("redactToken(%q, %q) = %q, want %q", c.in, c.tok, got, c.want)
		}
	}
	f := newFixture(t, nil)
	bad, err := NewClient(f.srv.CredentialID, StaticToken("t"), WithBaseURL(f.srv.URL), WithStore(keystore.NewMemory()), WithRetryPolicy(testPolicy()), WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.Payments.GetSale(f.ctx, "sale_x")
	if err == nil || strings.Contains(err.Error(), "[redacted]") && strings.Contains(err.Error(), "h[redacted]") {
		t.Fatalf("%v", err)
	}
}

// A short token (< 16 bytes) followed by a sentence period (or any
// RFC 6750 char: - _ ~ + /) is not "whole", so it is not redacted.
func TestScrub_ShortTokenBeforeAPeriodIsRedacted(t *testing.T) {
	const tok = "tok_abc123XYZ"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(401)
		fmt.Fprintf(w, `{"code":"unauthorized","message":"Invalid token %s."}`, tok)
	}))
	defer srv.Close()
	c, _ := NewClient("cred", StaticToken(tok), WithBaseURL(srv.URL+"/v1"), WithStore(keystore.NewMemory()), WithRetryPolicy(testPolicy()), WithLogger(quiet))
	_, err := c.Payments.GetSale(context.Background(), "sale_x")
	if err == nil || strings.Contains(err.Error(), tok) {
		t.Errorf("error text holds the token: %v", err)
	}
}

// A gateway echoing the Authorization header in X-Request-Id: the
// header is copied unscrubbed into APIError.RequestID, Error(), and the
// failed record's Result (ops show -json).
func TestScrub_TokenEchoedInRequestIDHeaderIsRedacted(t *testing.T) {
	const tok = "sk_live_0123456789abcdefXYZ"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"data":[]}`))
			return
		}
		w.Header().Set("X-Request-Id", "req-"+r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		_, _ = w.Write([]byte(`{"code":"validation_error","message":"bad"}`))
	}))
	defer srv.Close()
	store := keystore.NewMemory()
	c, _ := NewClient("cred", StaticToken(tok), WithBaseURL(srv.URL+"/v1"), WithStore(store), WithRetryPolicy(testPolicy()), WithLogger(quiet))
	_, err := c.Payments.Pix(context.Background(), PixParams{OperationID: "op-r2", OfferID: "offer", ExternalReference: "ref-r2", Customer: goodCustomer})
	if err == nil || strings.Contains(err.Error(), tok) {
		t.Errorf("error text holds the token: %v", err)
	}
	rec, _ := store.Get(context.Background(), RecordID("cred", "op-r2"))
	if strings.Contains(string(rec.Result), tok) || strings.Contains(rec.Error, tok) {
		t.Errorf("stored record holds the token: result=%s", rec.Result)
	}
}

// Raw keeps a private value an encoder escaped: JSON \u escapes of
// non-ASCII (Python's json.dumps default, Java/Jackson options) and HTML
// entities in a gateway page. Message is decoded and clean; Raw is not.
func TestScrub_EscapedPrivateValueInRawIsScrubbed(t *testing.T) {
	cust := goodCustomer
	cust.Name = "João D'Ávila"
	for name, body := range map[string]string{
		"json-ascii": `{"code":"validation_error","message":"bad","detail":"customer Jo\u00e3o D'\u00c1vila"}`,
		"html":       `<html><p>customer João D&#39;Ávila</p></html>`,
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodGet {
					w.Header().Set("Content-Type", "application/json")
					_, _ = w.Write([]byte(`{"data":[]}`))
					return
				}
				if name == "html" {
					w.Header().Set("Content-Type", "text/html")
				} else {
					w.Header().Set("Content-Type", "application/json")
				}
				w.WriteHeader(403)
				_, _ = w.Write([]byte(body))
			}))
			defer srv.Close()
			c, _ := NewClient("cred", StaticToken("sk_live_0123456789abcdef"), WithBaseURL(srv.URL+"/v1"), WithStore(keystore.NewMemory()), WithRetryPolicy(testPolicy()), WithLogger(quiet))
			_, err := c.Payments.Pix(context.Background(), PixParams{OperationID: "op-r3", OfferID: "offer", ExternalReference: "ref-r3", Customer: cust})
			var ae *APIError
			if !errors.As(err, &ae) {
				t.Fatalf("want APIError, got %v", err)
			}
			if strings.Contains(ae.Raw, "Jo\\u00e3o") || strings.Contains(ae.Raw, "D&#39;Ávila") {
				t.Errorf("Raw holds the customer's name: %s", ae.Raw)
			}
		})
	}
}

// A transport error whose text has an IPv4 address (every
// dial to an IP) is "scrubbed" ([number]) and so replaced by a
// redactedError: errors.As(*url.Error / *net.OpError) no longer works and
// the address is gone from the message.
func TestScrub_TransportErrorKeepsItsType(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close() // nothing listens: connection refused
	pol := testPolicy()
	pol.MaxAttempts = 1
	c, _ := NewClient("cred", StaticToken("sk_live_0123456789abcdef"), WithBaseURL("http://"+addr+"/v1"), WithStore(keystore.NewMemory()), WithRetryPolicy(pol), WithLogger(quiet))
	_, err := c.Payments.GetSale(context.Background(), "sale_x")
	var ue *url.Error
	var oe *net.OpError
	if !errors.As(err, &ue) || !errors.As(err, &oe) {
		t.Errorf("errors.As(*url.Error)=%v (*net.OpError)=%v; err: %v", errors.As(err, &ue), errors.As(err, &oe), err)
	}
	if !strings.Contains(err.Error(), "127.0.0.1") {
		t.Errorf("the address is gone from the error: %v", err)
	}
}

// Reasons built from 2xx body values (status %q) reach the Warn log,
// OutcomeUnknownError.Reason/Error() unscrubbed (only Record.Error goes
// through scrubStored; the token is removed nowhere).
func TestScrub_UnverifiableReasonIsScrubbed(t *testing.T) {
	const tok = "sk_live_0123456789abcdefXYZ"
	item := func(r *http.Request) string {
		st := "pending review for maria@example.com " + strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		return fmt.Sprintf(`{"id":"sale_1","status":%q,"external_reference":"ref-r5","payment_method":"pix","offer_id":"offer"}`, st)
	}
	posted := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet {
			if !posted {
				_, _ = w.Write([]byte(`{"data":[]}`))
				return
			}
			fmt.Fprintf(w, `{"data":[%s]}`, item(r))
			return
		}
		posted = true
		w.WriteHeader(201)
		_, _ = w.Write([]byte(item(r)))
	}))
	defer srv.Close()
	var logs bytes.Buffer
	pol := testPolicy()
	pol.MaxSettleWait = 300 * time.Millisecond
	c, _ := NewClient("cred", StaticToken(tok), WithBaseURL(srv.URL+"/v1"), WithStore(keystore.NewMemory()), WithRetryPolicy(pol),
		WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	_, err := c.Payments.Pix(context.Background(), PixParams{OperationID: "op-r5", OfferID: "offer", ExternalReference: "ref-r5", Customer: goodCustomer})
	for what, s := range map[string]string{"error": fmt.Sprint(err), "log": logs.String()} {
		if strings.Contains(s, tok) || strings.Contains(s, "maria@example.com") {
			t.Errorf("%s holds the token / e-mail: %s", what, s)
		}
	}
}

// A huge error body is cut (with room for the longest echo) before it
// is scrubbed; scrubbing 4 MiB whole took 296 ms per answer.
func BenchmarkAPIErrorBigBody(b *testing.B) {
	body := []byte(strings.Repeat("<div>Service temporarily unavailable 2026-12-01 12:00:00</div>\n", 4<<20/64))
	c, err := NewClient("cred", StaticToken("sk_live_0123456789abcdef"), WithStore(keystore.NewMemory()))
	if err != nil {
		b.Fatal(err)
	}
	priv := customerFields(goodCustomer)
	r := &response{status: 503, body: body}
	for b.Loop() {
		_ = c.apiError(r, "", "sk_live_0123456789abcdef", priv)
	}
}

// The stored reason keeps the token (scrubStored removes personal data only).
func TestScrub_StoredReasonHoldsNoToken(t *testing.T) {
	const tok = "sk_live_abcdefGHIJKLmnopQRS"
	posted := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		it := fmt.Sprintf(`{"id":"sale_1","status":%q,"external_reference":"ref-r5b","payment_method":"pix"}`, "x "+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		if r.Method == http.MethodGet {
			if !posted {
				_, _ = w.Write([]byte(`{"data":[]}`))
				return
			}
			fmt.Fprintf(w, `{"data":[%s]}`, it)
			return
		}
		posted = true
		w.WriteHeader(201)
		_, _ = w.Write([]byte(it))
	}))
	defer srv.Close()
	store := keystore.NewMemory()
	pol := testPolicy()
	pol.MaxSettleWait = 200 * time.Millisecond
	c, _ := NewClient("cred", StaticToken(tok), WithBaseURL(srv.URL+"/v1"), WithStore(store), WithRetryPolicy(pol), WithLogger(quiet))
	_, _ = c.Payments.Pix(context.Background(), PixParams{OperationID: "op-r5b", OfferID: "offer", ExternalReference: "ref-r5b", Customer: goodCustomer})
	rec, _ := store.Get(context.Background(), RecordID("cred", "op-r5b"))
	t.Logf("rec.Error=%q", rec.Error)
	if strings.Contains(rec.Error, tok) {
		t.Errorf("Record.Error holds the token: %s", rec.Error)
	}
}

// OneLine cuts at 300 bytes before scrubStored scrubs: an e-mail across
// the cut survives in part ("maria.silva@exam…" is no longer e-mail-shaped).
func TestScrub_ScrubsBeforeCutting(t *testing.T) {
	got := scrubStored(strings.Repeat("x", 285)+" maria.silva@example.com", nil)
	t.Logf("%q", got[len(got)-60:])
	if strings.Contains(got, "maria.silva@") {
		t.Errorf("stored: %q", got[len(got)-40:])
	}
}
