package pagpolar

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
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

// `written` is set by the transport's write goroutine (httptrace) and
// read by the caller without synchronisation.
func TestSend_WrittenFlagIsRaceFree(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // accept, never read: the client's body write blocks
		}
	}()
	pol := testPolicy()
	pol.AttemptTimeout = 100 * time.Millisecond
	pol.MaxSettleWait = 50 * time.Millisecond
	c, err := NewClient("cred", StaticToken("tok"), WithBaseURL("http://"+ln.Addr().String()), WithRetryPolicy(pol), WithStore(keystore.NewMemory()))
	if err != nil {
		t.Fatal(err)
	}
	cust := goodCustomer
	cust.Name = strings.Repeat("x", 16<<20) // no length limit on Customer.Name
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = c.Payments.Pix(ctx, PixParams{OfferID: "o", ExternalReference: "r", Customer: cust})
	t.Logf("err: %v", err)
}

// Answers cut or encoded in ways a real network produces, to a charge the
// fake committed: the SDK must settle by lookup (one sale), never resend on
// a guess, never report failure.
func TestTransport_CutOrEncodedAnswersSettleByLookup(t *testing.T) {
	cases := []struct {
		name  string
		serve func(w http.ResponseWriter, status int, h http.Header, body []byte)
	}{
		{"half-body-content-length", func(w http.ResponseWriter, status int, h http.Header, body []byte) {
			maps.Copy(w.Header(), h)
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.WriteHeader(status)
			_, _ = w.Write(body[:len(body)/2])
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}},
		{"half-body-chunked", func(w http.ResponseWriter, status int, h http.Header, body []byte) {
			maps.Copy(w.Header(), h)
			w.Header().Del("Content-Length")
			w.WriteHeader(status)
			_, _ = w.Write(body[:len(body)/2])
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}},
		{"headers-then-reset", func(w http.ResponseWriter, status int, h http.Header, body []byte) {
			maps.Copy(w.Header(), h)
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.WriteHeader(status)
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}},
		{"close-delimited-half-body", func(w http.ResponseWriter, status int, h http.Header, body []byte) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				panic(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nDate: %s\r\nConnection: close\r\n\r\n", status, http.StatusText(status), h.Get("Date"))
			_, _ = conn.Write(body[:len(body)/2])
		}},
		{"gzip-body", func(w http.ResponseWriter, status int, h http.Header, body []byte) {
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			_, _ = zw.Write(body)
			_ = zw.Close()
			maps.Copy(w.Header(), h)
			w.Header().Set("Content-Encoding", "gzip")
			w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
			w.WriteHeader(status)
			_, _ = w.Write(buf.Bytes())
		}},
		{"brotli-labelled-garbage", func(w http.ResponseWriter, status int, h http.Header, body []byte) {
			maps.Copy(w.Header(), h)
			w.Header().Set("Content-Encoding", "br")
			w.Header().Set("Content-Length", "16")
			w.WriteHeader(status)
			_, _ = w.Write([]byte("\x1b\x0f\x00\xf8\xa5\x40\x62\x8c\x2d\x9b\x00\x01\x02\x03\x04\x05"))
		}},
	}
	faults := []struct {
		name  string
		fault *pagpolartest.Fault
	}{
		{"201", nil},
		{"CommitThen500", &pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThen500, Times: 1}},
	}
	for _, tc := range cases {
		for _, fc := range faults {
			t.Run(tc.name+"/"+fc.name, func(t *testing.T) {
				t.Parallel()
				f := newFixture(t, nil)
				u, _ := url.Parse(f.srv.URL)
				rp := httputil.NewSingleHostReverseProxy(u)
				rp.ErrorLog = log.New(io.Discard, "", 0)
				gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if !isPost(r, "/payments/pix") {
						rp.ServeHTTP(w, r)
						return
					}
					body, _ := io.ReadAll(r.Body)
					out, _ := http.NewRequest(http.MethodPost, f.srv.URL+r.URL.Path, bytes.NewReader(body))
					out.Header = r.Header.Clone()
					out.Header.Del("Accept-Encoding")
					resp, err := http.DefaultTransport.RoundTrip(out)
					if err != nil {
						panic(http.ErrAbortHandler)
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					tc.serve(w, resp.StatusCode, resp.Header, b)
				}))
				gw.Config.ErrorLog = log.New(io.Discard, "", 0)
				t.Cleanup(gw.Close)
				c := proxiedClient(t, f, gw.URL)
				if fc.fault != nil {
					f.srv.Inject(*fc.fault)
				}
				ch, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-wire", Customer: goodCustomer})
				id := ""
				if err == nil {
					id = ch.Sale.ID
				}
				report(t, f, c, "pix:order-wire", id, err)
			})
		}
	}
}
