package pagpolar

import (
	"bytes"
	"context"
	"github.com/pagpolar/pagpolar-go/keystore"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// closingServer answers GETs normally and, on a POST, hijacks the reused
// connection and closes it without answering: the case where net/http's
// transport silently resends a request it considers replayable.
func closingServer(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"data":[]}`))
			return
		}
		posts.Add(1)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		conn.Close()
	}))
	t.Cleanup(srv.Close)
	return srv, &posts
}

// TestSafetyRule2_TransportNeverResends: a POST with an Idempotency-Key on a
// reused connection that closes before the answer reaches the server exactly
// once; only the engine decides resends.
func TestSafetyRule2_TransportNeverResends(t *testing.T) {
	srv, posts := closingServer(t)
	c, err := NewClient("cred", StaticToken("tok"), WithBaseURL(srv.URL+"/v1"), WithHTTPClient(srv.Client()), WithStore(keystore.NewMemory()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Warm a keep-alive connection so the POST reuses it.
	if _, err := c.send(ctx, http.MethodGet, c.url("/sales", nil), nil, ""); err != nil {
		t.Fatal(err)
	}
	_, err = c.send(ctx, http.MethodPost, c.url("/payments/pix", nil), []byte(`{"external_reference":"o-1"}`), "key-1")
	if err == nil {
		t.Fatal("want a transport error from the dropped connection")
	}
	if se, ok := err.(*sendError); !ok || !se.written {
		t.Fatalf("want an ambiguous (written) send error, got %#v", err)
	}
	if n := posts.Load(); n != 1 {
		t.Fatalf("server saw %d POSTs, want exactly 1 (the transport resent it)", n)
	}
}

// TestSafetyRule2_ControlReplayableRequestIsResent proves the test above can
// fail: the same request built the ordinary way (GetBody set) is resent by
// net/http on its own.
func TestSafetyRule2_ControlReplayableRequestIsResent(t *testing.T) {
	srv, posts := closingServer(t)
	hc := srv.Client()
	get, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/sales", nil)
	resp, err := hc.Do(get)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body) // read to EOF so the connection is reused
	resp.Body.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/payments/pix", bytes.NewReader([]byte(`{}`)))
	req.Header.Set("Idempotency-Key", "key-1")
	if _, err := hc.Do(req); err == nil {
		t.Fatal("want an error")
	}
	if n := posts.Load(); n < 2 {
		t.Fatalf("server saw %d POSTs; expected net/http to resend a replayable request (has the transport changed?)", n)
	}
}

func TestSendDialFailureIsNotWritten(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there now
	c, err := NewClient("cred", StaticToken("tok"), WithBaseURL(url+"/v1"), WithStore(keystore.NewMemory()))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.send(context.Background(), http.MethodPost, c.url("/payments/pix", nil), []byte(`{}`), "k")
	se, ok := err.(*sendError)
	if !ok || se.written {
		t.Fatalf("want a not-written send error for a refused connection, got %#v", err)
	}
	if strings.Contains(err.Error(), "tok") {
		t.Fatalf("error leaks the token: %v", err)
	}
}
