package scenario

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// tap is the network between the clients and the fake: it rewrites the
// fake's answers as the scenario's API would give them (Mutations), puts
// the scenario's Date and Age headers on them, serves copies as its cache
// would and cuts answers short. It wraps the clients' transport, so the
// request the SDK built reaches the fake untouched (the transport still
// cannot resend it) and only what comes back changes.
type tap struct {
	base  http.RoundTripper
	sc    *Scenario
	clock *pagpolartest.Clock

	mu       sync.Mutex
	answers  int                   // answers seen so far (the Date edits count them)
	copies   map[string]cachedCopy // the cache's first copy of each GET URL
	reads    map[string]int        // reads of each GET URL so far
	truncate map[Answers]int       // answers of a kind still to cut short
	inFlight int                   // requests sent, not yet answered
	sent     int                   // requests sent to the fake
	deployed atomic.Bool           // a DoDeploy step ran: the Later mutations apply
}

type cachedCopy struct {
	at     time.Time
	status int
	header http.Header
	body   []byte
}

func newTap(base http.RoundTripper, sc *Scenario, clock *pagpolartest.Clock) *tap {
	return &tap{base: base, sc: sc, clock: clock, copies: map[string]cachedCopy{}, reads: map[string]int{}, truncate: map[Answers]int{}}
}

// cutNext makes the next answer of kind a truncated one.
func (t *tap) cutNext(a Answers) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.truncate[a]++
}

func (t *tap) clearCuts() {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.truncate)
}

// answersOf names the kind of answer a request gets.
func answersOf(method, path string) Answers {
	p := path
	if i := strings.Index(p, "/v1/"); i >= 0 {
		p = p[i+3:]
	}
	parts := strings.Split(strings.Trim(p, "/"), "/")
	switch method {
	case http.MethodPost:
		switch {
		case p == "/payments/pix":
			return PostPix
		case p == "/payments/boleto":
			return PostBoleto
		case p == "/payments/credit-card":
			return PostCard
		case p == "/refunds":
			return PostRefund
		case strings.HasSuffix(p, "/subscribe"):
			return PostSubscribe
		case strings.HasSuffix(p, "/plan-change"):
			return PostPlanChange
		}
	case http.MethodGet:
		switch {
		case p == "/sales":
			return ListSales
		case p == "/refunds":
			return ListRefunds
		case p == "/subscriptions":
			return ListSubs
		case len(parts) == 2 && parts[0] == "sales":
			return GetSale
		case len(parts) == 2 && parts[0] == "subscriptions":
			return GetSubscription
		}
	}
	return noAnswerKind
}

func (a Answers) isList() bool { return a == ListSales || a == ListRefunds || a == ListSubs }

func (t *tap) RoundTrip(req *http.Request) (*http.Response, error) {
	kind := answersOf(req.Method, req.URL.Path)
	url := req.URL.String()
	if resp, ok := t.fromCache(req, kind, url); ok {
		return resp, nil
	}
	t.mu.Lock()
	t.inFlight++
	t.sent++
	t.mu.Unlock()
	resp, err := t.base.RoundTrip(req)
	t.mu.Lock()
	t.inFlight--
	t.answers++
	n := t.answers
	cut := t.truncate[kind] > 0
	if cut && err == nil {
		t.truncate[kind]--
	}
	t.mu.Unlock()
	if err != nil {
		return nil, err
	}
	body, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	if rerr != nil {
		return nil, rerr
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		body = t.mutate(kind, body, n)
	}
	t.date(resp.Header, n)
	if t.sc.Cache == CacheAgeZero {
		resp.Header.Set("Age", "0")
	}
	if req.Method == http.MethodGet && t.sc.Cache != CacheNone && t.sc.Cache != CacheAgeZero && resp.StatusCode == 200 {
		t.mu.Lock()
		if _, ok := t.copies[url]; !ok {
			t.copies[url] = cachedCopy{at: t.clock.Now(), status: resp.StatusCode, header: resp.Header.Clone(), body: body}
		}
		t.mu.Unlock()
	}
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	resp.ContentLength = int64(len(body))
	if cut {
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body[:len(body)/2]), errReader{io.ErrUnexpectedEOF}))
		return resp, nil
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// fromCache serves every other read of a URL from the cache's copy, as a
// cache that ignores no-cache would.
func (t *tap) fromCache(req *http.Request, kind Answers, url string) (*http.Response, bool) {
	if req.Method != http.MethodGet || kind == noAnswerKind {
		return nil, false
	}
	switch t.sc.Cache {
	case CacheStale, CacheStaleGarbled, CacheStaleTwoAges, CacheStaleNoAge:
	default:
		return nil, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.reads[url]++
	c, ok := t.copies[url]
	if !ok || t.reads[url]%2 == 1 {
		return nil, false
	}
	if t.sc.Cache == CacheStaleNoAge && t.clock.Now().Sub(c.at) < staleNoAge {
		return nil, false
	}
	h := c.header.Clone()
	age := int64(t.clock.Now().Sub(c.at) / time.Second)
	switch t.sc.Cache {
	case CacheStale:
		h.Set("Age", strconv.FormatInt(age, 10))
	case CacheStaleGarbled:
		h.Set("Age", "soon")
	case CacheStaleTwoAges:
		h["Age"] = []string{"0", strconv.FormatInt(age, 10)}
	}
	return &http.Response{
		Status: strconv.Itoa(c.status) + " " + http.StatusText(c.status), StatusCode: c.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h,
		Body: io.NopCloser(bytes.NewReader(c.body)), ContentLength: int64(len(c.body)), Request: req,
	}, true
}

// date rewrites the Date header of the n-th answer by the scenario's
// APIClock.
func (t *tap) date(h http.Header, n int) {
	ac := t.sc.APIClock
	if ac.DropEvery > 0 && n%ac.DropEvery == 0 {
		h.Del("Date")
		return
	}
	d, err := http.ParseTime(h.Get("Date"))
	if err != nil {
		return
	}
	shift := ac.Shift
	if ac.StepAt > 0 && n >= ac.StepAt {
		shift += ac.Step
	}
	if ac.OtherHost != 0 && otherHost(n) {
		shift += ac.OtherHost
	}
	if shift != 0 {
		h.Set("Date", d.Add(shift).UTC().Format(http.TimeFormat))
	}
}

// otherHost reports whether the n-th answer comes from the API's second
// host: every other answer does.
func otherHost(n int) bool { return n%2 == 0 }

// mutate applies the scenario's mutations for kind to the n-th answer, a
// 2xx body.
func (t *tap) mutate(kind Answers, body []byte, n int) []byte {
	var ms []Mutation
	for _, m := range t.sc.Mutations {
		if (m.OtherHost && !otherHost(n)) || (m.Later && !t.deployed.Load()) {
			continue
		}
		if m.Answers == kind || m.Answers == AnyAnswer {
			ms = append(ms, m)
		}
	}
	if len(ms) == 0 || kind == noAnswerKind {
		return body
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v map[string]any
	if dec.Decode(&v) != nil {
		return body
	}
	var out any = v
	for _, m := range ms {
		out = applyEdit(kind, out, m)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return body
	}
	return b
}
