// Proxies that stand between the client and the fake API and rewrite its
// answers into shapes a real deployment produces (other pagings, clocks,
// caches, spellings), and the client that goes through them.

package pagpolar

import (
	"bytes"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// bodyRewrite rewrites one answer of the fake: the request it answers, its
// status, its headers (modifiable) and its body; it returns the new body.
type bodyRewrite func(r *http.Request, status int, h http.Header, body []byte) []byte

// bodyProxy puts a reverse proxy in front of the fake that passes every
// answer through rw. A connection the fake drops becomes the proxy's 502
// with an empty body (ambiguous, as a drop is).
func bodyProxy(t *testing.T, f *fixture, rw bodyRewrite) string {
	t.Helper()
	u, _ := url.Parse(f.srv.URL)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0)
	rp.ModifyResponse = func(resp *http.Response) error {
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		b = rw(resp.Request, resp.StatusCode, resp.Header, b)
		resp.Body = io.NopCloser(bytes.NewReader(b))
		resp.ContentLength = int64(len(b))
		resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
		return nil
	}
	ps := httptest.NewServer(rp)
	t.Cleanup(ps.Close)
	return ps.URL
}

// isList reports whether the request is GET of a list route ending in path.
func isGet(r *http.Request, suffix string) bool {
	return r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, suffix)
}

// editObjects applies fn to every JSON object of a body: the object itself,
// or every item of its "data" list. Numbers are kept as json.Number so
// that fn can write a number in any literal form.
func editObjects(body []byte, fn func(m map[string]any)) []byte {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v map[string]any
	if dec.Decode(&v) != nil {
		return body
	}
	if data, ok := v["data"].([]any); ok {
		for _, it := range data {
			if m, ok := it.(map[string]any); ok {
				fn(m)
			}
		}
	} else {
		fn(v)
	}
	b, _ := json.Marshal(v)
	return b
}

// rewritingProxy puts an HTTP proxy in front of the fake that rewrites JSON
// bodies of 2xx responses matching (method, path part); method "" matches
// every method.
func rewritingProxy(t *testing.T, f *fixture, method, pathPrefix string, rewrite func(v any) any) string {
	t.Helper()
	u, _ := url.Parse(f.srv.URL)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(r *http.Response) error {
		if (method != "" && r.Request.Method != method) || !strings.Contains(r.Request.URL.Path, pathPrefix) || r.StatusCode >= 300 {
			return nil
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		var v any
		if json.Unmarshal(b, &v) == nil {
			v = rewrite(v)
			b, _ = json.Marshal(v)
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		r.ContentLength = int64(len(b))
		r.Header.Set("Content-Length", strconv.Itoa(len(b)))
		return nil
	}
	ps := httptest.NewServer(rp)
	t.Cleanup(ps.Close)
	return ps.URL
}

// proxiedClient is a client of f's credential, with f's store, talking to
// base.
func proxiedClient(t *testing.T, f *fixture, base string) *Client {
	t.Helper()
	return f.client(t, WithStore(f.store), WithBaseURL(base))
}

// answerRewrite edits one answer of the fake: its status and headers in
// resp (modifiable), its body returned.
type answerRewrite func(req *http.Request, resp *http.Response, body []byte) []byte

// answerProxy is bodyProxy with the status modifiable too.
func answerProxy(t *testing.T, f *fixture, rw answerRewrite) string {
	t.Helper()
	u, _ := url.Parse(f.srv.URL)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0)
	rp.ModifyResponse = func(resp *http.Response) error {
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		b = rw(resp.Request, resp, b)
		resp.Body = io.NopCloser(bytes.NewReader(b))
		resp.ContentLength = int64(len(b))
		resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
		return nil
	}
	ps := httptest.NewServer(rp)
	t.Cleanup(ps.Close)
	return ps.URL
}

func isPost(r *http.Request, suffix string) bool {
	return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, suffix)
}

// listItems returns the items of the fake's {"data": [...]} list answer.
func listItems(body []byte) ([]json.RawMessage, bool) {
	var l struct {
		Data []json.RawMessage `json:"data"`
	}
	if json.Unmarshal(body, &l) != nil || l.Data == nil {
		return nil, false
	}
	return l.Data, true
}

// onSales rewrites the sale list answers (GET /sales) with fn.
func onSales(fn func(items []json.RawMessage, resp *http.Response) []byte) answerRewrite {
	return func(req *http.Request, resp *http.Response, body []byte) []byte {
		if !isGet(req, "/sales") || resp.StatusCode != 200 {
			return body
		}
		items, ok := listItems(body)
		if !ok {
			return body
		}
		return fn(items, resp)
	}
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// editSales applies fn to every sale object of POST /payments/pix answers
// and of GET /sales lists.
func editSales(fn func(m map[string]any)) answerRewrite {
	return func(req *http.Request, resp *http.Response, body []byte) []byte {
		if isPost(req, "/payments/pix") && resp.StatusCode < 300 || isGet(req, "/sales") && resp.StatusCode == 200 {
			return editObjects(body, fn)
		}
		return body
	}
}

// onPixAnswer rewrites the 2xx answers of POST /payments/pix.
func onPixAnswer(fn func(resp *http.Response, body []byte) []byte) answerRewrite {
	return func(req *http.Request, resp *http.Response, body []byte) []byte {
		if !isPost(req, "/payments/pix") || resp.StatusCode >= 300 {
			return body
		}
		return fn(resp, body)
	}
}
