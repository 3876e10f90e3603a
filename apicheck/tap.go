package apicheck

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// exchange is one HTTP request the check made (through the SDK or raw) and
// what came back, exactly as the API sent it.
type exchange struct {
	step    string // the scripted step that made it
	method  string
	path    string // relative to the base URL's path ("/payments/pix")
	query   url.Values
	key     string // the Idempotency-Key sent ("" none)
	status  int    // 0: no answer (transport error)
	header  http.Header
	body    []byte
	dropped bool // the answer was read here and withheld from the SDK (a lost answer)
	err     error
}

func (x exchange) replayed() bool {
	return strings.EqualFold(x.header.Get(wire.HeaderReplayed), "true")
}

// recorder keeps every exchange of a run, in order.
type recorder struct {
	base     http.RoundTripper
	basePath string
	rd       *redactor // learns every bearer token sent

	// onAdd, if set, sees every exchange once it is recorded.
	onAdd func(exchange)

	mu   sync.Mutex
	log  []exchange
	step string
}

func (r *recorder) setStep(s string) {
	r.mu.Lock()
	r.step = s
	r.mu.Unlock()
}

func (r *recorder) exchanges() []exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]exchange(nil), r.log...)
}

// errLostAnswer is what the SDK sees when the tap withholds an answer: the
// request was written and processed, the answer never arrived.
var errLostAnswer = errors.New("apicheck: answer withheld to exercise the SDK's lookup after a lost answer")

// tap is one client's transport: it records every exchange and, when
// armed, withholds the answer to the next POST from its caller after
// reading it (the API processed the request; the SDK sees the connection
// lost after sending, and must settle by lookup).
type tap struct {
	rec *recorder

	mu   sync.Mutex
	drop bool
}

func (t *tap) dropNextAnswer() {
	t.mu.Lock()
	t.drop = true
	t.mu.Unlock()
}

// maxBody bounds what the check reads of one answer.
const maxBody = 4 << 20

func (t *tap) RoundTrip(req *http.Request) (*http.Response, error) {
	x := exchange{
		method: req.Method,
		path:   strings.TrimPrefix(req.URL.Path, strings.TrimRight(t.rec.basePath, "/")),
		query:  req.URL.Query(),
		key:    req.Header.Get(wire.HeaderIdempotencyKey),
	}
	if a := req.Header.Get(wire.HeaderAuthorization); a != "" {
		tok := a
		if len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
			tok = a[7:]
		}
		t.rec.rd.addSecret(strings.TrimSpace(tok))
	}
	drop := false
	if req.Method == http.MethodPost {
		t.mu.Lock()
		drop, t.drop = t.drop, false
		t.mu.Unlock()
	}
	resp, err := t.rec.base.RoundTrip(req)
	if err != nil {
		x.err = err
		t.rec.add(x)
		return nil, err
	}
	body, rerr := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	resp.Body.Close()
	x.status, x.header, x.body = resp.StatusCode, resp.Header.Clone(), body
	if rerr != nil {
		x.err = rerr
	}
	x.dropped = drop
	t.rec.add(x)
	if rerr != nil {
		return nil, rerr
	}
	if drop {
		return nil, errLostAnswer
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

func (r *recorder) add(x exchange) {
	r.mu.Lock()
	x.step = r.step
	r.log = append(r.log, x)
	r.mu.Unlock()
	if r.onAdd != nil {
		r.onAdd(x)
	}
}
