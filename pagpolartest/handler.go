package pagpolartest

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// maxBodyBytes is the largest request body the fake reads (ASSUMED 1 MiB);
// a larger one is answered 413.
const maxBodyBytes = 1 << 20

// exchange is one request being served: what has been decided so far and
// its log entry.
type exchange struct {
	s      *Server
	w      http.ResponseWriter
	r      *http.Request
	log    RequestLog
	logIdx int // index of log in s.requests once logged; -1 before

	cred    string
	key     string
	gen     uint64 // generation of the claimed key
	claimed bool   // the key is ours and still in processing
}

// serveHTTP is the server's handler. The order of checks is the documented
// one: authentication, front faults, rate limit, validation, key lookup,
// processing. It never lets a panic escape: a recovered panic releases the
// key, answers 500 and is recorded in the request log.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		panic(http.ErrAbortHandler) // closes the connection without an answer
	}
	s.handlers.Add(1)
	s.mu.Unlock()
	defer s.handlers.Done()

	x := &exchange{s: s, w: w, r: r, logIdx: -1}
	x.log = RequestLog{
		At:        s.Clock.Now(),
		Method:    r.Method,
		Path:      r.URL.Path,
		Key:       r.Header.Get(wire.HeaderIdempotencyKey),
		RequestID: newID("req_"),
	}
	w.Header().Set(wire.HeaderRequestID, x.log.RequestID)
	// The Date header comes from the server's Clock, the clock its
	// created_at stamps come from (net/http would use the real time).
	w.Header().Set("Date", s.apiClock(x.log.At).UTC().Format(http.TimeFormat))
	if s.has(ShapeNoDate) {
		w.Header()["Date"] = nil // net/http then sends none
	}
	defer x.recover()
	x.serve()
}

func (x *exchange) recover() {
	p := recover()
	if p == nil {
		return
	}
	if p == http.ErrAbortHandler { //nolint:errorlint // sentinel compared as net/http does
		panic(p)
	}
	s := x.s
	msg := fmt.Sprintf("%v\n%s", p, debug.Stack())
	if x.claimed {
		s.releaseKey(x.cred, x.key, x.gen)
		x.claimed = false
	}
	if x.logIdx >= 0 { // already answered or dropped: note the panic
		s.mu.Lock()
		s.requests[x.logIdx].Panic = msg
		s.mu.Unlock()
		return
	}
	x.log.Panic = msg
	x.error(http.StatusInternalServerError, wire.CodeInternal, "internal error")
}

func (x *exchange) serve() {
	s, r := x.s, x.r
	if s.cfg.latency > 0 && !s.sleep(r.Context(), s.cfg.latency) {
		x.drop() // the client gave up, or the server is closing
		return
	}

	rt, status, allow := resolve(r.Method, r.URL.Path)
	x.log.Route = rt.name
	switch status {
	case http.StatusNotFound:
		// The router's page, as a web framework answers a path it has no
		// route for: plain text, not the API's JSON error (the API's own
		// 404 names a resource it does not know).
		x.respond(status, "text/plain; charset=utf-8", []byte("404 page not found\n"))
		return
	case http.StatusMethodNotAllowed:
		x.w.Header().Set("Allow", allow)
		x.respond(status, "text/plain; charset=utf-8", []byte("405 method not allowed\n"))
		return
	}

	if !x.authenticate() {
		return
	}

	var body []byte
	if rt.money {
		var err error
		body, err = io.ReadAll(http.MaxBytesReader(x.w, r.Body, maxBodyBytes))
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			x.error(http.StatusRequestEntityTooLarge, wire.CodePayloadTooLarge,
				fmt.Sprintf("body: larger than %d bytes", maxBodyBytes))
			return
		case err != nil: // the client went away mid-body
			x.drop()
			return
		}
	}
	ref, card := matchFields(rt, body, r)
	x.log.ExternalReference = ref

	if !x.frontFault(rt, ref, card) {
		return
	}
	if !rt.money {
		x.serveRead(rt)
		return
	}
	if ok, retry := s.allowRate(x.cred); !ok {
		x.w.Header().Set(wire.HeaderRetryAfter, strconv.Itoa(retry))
		x.error(http.StatusTooManyRequests, wire.CodeRateLimited, "rate limit exceeded for this credential")
		return
	}
	x.serveMoney(rt, body, ref, card)
}

// authenticate maps the bearer token to its credential, or answers 401.
func (x *exchange) authenticate() bool {
	h := x.r.Header.Get(wire.HeaderAuthorization)
	tok, ok := strings.CutPrefix(h, "Bearer ")
	x.s.mu.Lock()
	cred, known := x.s.tokens[tok]
	x.s.mu.Unlock()
	if !ok || tok == "" || !known {
		x.w.Header().Set("WWW-Authenticate", `Bearer realm="pagpolar"`)
		x.error(http.StatusUnauthorized, wire.CodeUnauthorized, "Authorization: a valid Bearer access token is required")
		return false
	}
	x.cred = cred
	x.log.CredentialID = cred
	return true
}

// frontFault applies the fault that acts before processing, if one
// matches. It returns false when the request has been answered or dropped.
func (x *exchange) frontFault(rt route, ref string, card bool) bool {
	s := x.s
	s.mu.Lock()
	f, ok := s.pickFault(faultQuery{route: rt.name, ref: ref, key: x.log.Key, card: card, front: true})
	s.mu.Unlock()
	if !ok {
		return true
	}
	x.noteFault(f.Action)
	switch f.Action {
	case FaultDropBeforeProcessing:
		x.drop()
	case FaultGateway:
		x.gateway(f.Status)
	case FaultRateLimit:
		x.w.Header().Set(wire.HeaderRetryAfter, strconv.Itoa(retryAfterSeconds(orOneSecond(f.Delay))))
		x.error(http.StatusTooManyRequests, wire.CodeRateLimited, "rate limit exceeded for this credential")
	case FaultUnavailable:
		x.w.Header().Set(wire.HeaderRetryAfter, strconv.Itoa(retryAfterSeconds(orOneSecond(f.Delay))))
		x.error(http.StatusServiceUnavailable, wire.CodeUnavailable, "service temporarily unavailable, try again later")
	case FaultLatency:
		if s.sleep(x.r.Context(), f.Delay) {
			return true
		}
		x.drop() // the client gave up during the delay: nothing processed
	}
	return false
}

// serveMoney validates a money request, looks its key up and processes it,
// applying the processing fault that matches, if any.
func (x *exchange) serveMoney(rt route, body []byte, ref string, card bool) {
	s := x.s
	vals := x.r.Header.Values(wire.HeaderIdempotencyKey)
	switch {
	case len(vals) == 0:
		x.error(http.StatusBadRequest, wire.CodeValidation, wire.HeaderIdempotencyKey+": header required")
		return
	case vals[0] == "":
		x.error(http.StatusBadRequest, wire.CodeValidation, wire.HeaderIdempotencyKey+": must not be empty")
		return
	case len(vals[0]) > wire.MaxIdempotencyKeyLen:
		x.error(http.StatusBadRequest, wire.CodeValidation,
			fmt.Sprintf("%s: longer than %d characters", wire.HeaderIdempotencyKey, wire.MaxIdempotencyKeyLen))
		return
	}
	x.key = vals[0]
	req, err := decodeMoney(rt.name, body)
	if err != nil {
		x.error(http.StatusBadRequest, wire.CodeValidation, err.Error())
		return
	}

	c, stored := s.claimKey(x.cred, x.key)
	switch c {
	case claimInProgress:
		x.error(http.StatusConflict, wire.CodeInProgress, wire.MsgInProgress)
		return
	case claimReplay:
		x.log.Replayed = true
		x.w.Header().Set(wire.HeaderReplayed, "true")
		x.respondMoney(rt, stored.status, stored.body)
		return
	}
	x.gen, x.claimed = stored.gen, true

	s.mu.Lock()
	f, faulted := s.pickFault(faultQuery{route: rt.name, ref: ref, key: x.key, card: card})
	s.mu.Unlock()
	if faulted {
		x.noteFault(f.Action)
	}
	switch f.Action {
	case Fault500NoCommit:
		x.release()
		x.error(http.StatusInternalServerError, wire.CodeInternal, "internal error")
		return
	case FaultHold:
		// Processing goes on when the client gives up, as a real server's
		// would; only Close ends the hold (and then nothing is committed).
		if !s.sleep(s.ctx, f.Delay) {
			x.release()
			x.drop()
			return
		}
	}
	lag := f.LookupLag
	if f.Action == FaultLookupLag {
		lag = f.Delay
	}
	res := s.commit(rt, x.cred, x.key, req, lag, f.Action == FaultDecline)
	s.deliverEvents()

	switch f.Action {
	case FaultCommitThenDrop:
		x.finish(res)
		x.drop()
	case FaultCommitDropRelease:
		x.release()
		x.drop()
	case FaultCommitThen500:
		x.release()
		x.error(http.StatusInternalServerError, wire.CodeInternal, "internal error")
	case FaultCommitThen500After:
		// The key stays in processing until the answer; a client that gave
		// up does not shorten that, Close does.
		if !s.sleep(s.ctx, f.Delay) {
			x.release()
			x.drop()
			return
		}
		x.release()
		x.error(http.StatusInternalServerError, wire.CodeInternal, "internal error")
	case FaultGatewayAfterCommit:
		x.release()
		x.gateway(f.Status)
	default:
		x.finish(res)
		x.respondMoney(rt, res.status, res.body)
	}
}

// respondMoney answers a money route's result in the server's shapes.
func (x *exchange) respondMoney(rt route, status int, body []byte) {
	if status < 200 || status > 299 {
		x.respond(status, "application/json", x.s.reshapeError(body))
		return
	}
	kind := bodySale
	switch rt.name {
	case routeSubscribe:
		kind = bodySubscription
	case routePlanChange:
		kind = bodyPlanChange
		if x.s.has(ShapePlanChangeAsSubscription) {
			kind = bodySubscription
		}
	case routeRefund:
		kind = bodyRefund
	}
	x.respond(status, "application/json", x.s.render(kind, body))
}

// serveRead answers a read route. Idempotency-Key is ignored.
func (x *exchange) serveRead(rt route) {
	s := x.s
	s.mu.Lock()
	f, faulted := s.pickFault(faultQuery{route: rt.name, ref: x.log.ExternalReference, key: x.log.Key})
	s.mu.Unlock()
	if faulted {
		x.noteFault(f.Action)
		switch f.Action {
		case Fault500NoCommit:
			x.error(http.StatusInternalServerError, wire.CodeInternal, "internal error")
			return
		case FaultHold:
			if !s.sleep(x.r.Context(), f.Delay) {
				x.drop()
				return
			}
		}
	}
	if c, ok := s.cachedListAnswer(x.cred, x.r, x.log.At); ok && isListRoute(rt.name) {
		// The micro-cache's copy, with the Date it was made at and no Age.
		x.w.Header().Set("Date", c.date)
		if c.link != "" {
			x.w.Header().Set("Link", c.link)
		}
		x.respond(c.status, "application/json", c.body)
		return
	}
	q := x.r.URL.Query()
	required := func(name string) (string, bool) {
		v := q.Get(name)
		if v == "" {
			x.error(http.StatusBadRequest, wire.CodeValidation, name+": query parameter required")
			return "", false
		}
		return v, true
	}
	var res result
	kind, list := bodySale, false
	switch rt.name {
	case routeGetSales:
		list = true
		ref, ok := required("external_reference")
		if !ok {
			return
		}
		res = s.lookupSales(x.cred, ref)
	case routeGetSale:
		res = s.lookupSale(x.cred, rt.id)
	case routeGetRefunds:
		kind, list = bodyRefund, true
		saleID, ok := required("sale_identifier")
		if !ok {
			return
		}
		res = s.lookupRefunds(x.cred, saleID)
	case routeGetSubscription:
		kind = bodySubscription
		res = s.lookupSubscription(x.cred, rt.id)
	case routeListSubscriptions:
		kind, list = bodySubscription, true
		if s.cfg.noSubLookup {
			x.error(http.StatusNotFound, wire.CodeNotFound, "no route GET "+x.r.URL.Path)
			return
		}
		ref, ok := required("external_reference")
		if !ok {
			return
		}
		res = s.lookupSubscriptions(x.cred, ref)
	default:
		panic("pagpolartest: serveRead of " + rt.name)
	}
	s.deliverEvents() // of the decisions the lookup made (WithAsync)
	switch {
	case res.status < 200 || res.status > 299:
		x.respond(res.status, "application/json", s.reshapeError(res.body))
	case list:
		body := s.renderList(kind, res.body, x.r, x.w.Header())
		s.storeListAnswer(x.cred, x.r, x.log.At, res.status, x.w.Header(), body)
		x.respond(res.status, "application/json", body)
	default:
		x.respond(res.status, "application/json", s.render(kind, res.body))
	}
}

func (x *exchange) noteFault(a FaultAction) {
	if x.log.Fault != "" {
		x.log.Fault += "+"
	}
	x.log.Fault += a.String()
}

// finish ends the key's processing with res: a 2xx is stored for replay,
// anything else releases the key.
func (x *exchange) finish(res result) {
	x.s.finishKey(x.cred, x.key, x.gen, res.status, res.body)
	x.claimed = false
}

// release releases the key, as an error answer does.
func (x *exchange) release() {
	x.s.releaseKey(x.cred, x.key, x.gen)
	x.claimed = false
}

// logged appends the request's log entry; it is called before the client
// can see anything, so that a test reading the ledger after its answer
// finds it.
func (x *exchange) logged(status int, dropped bool) {
	x.log.Status, x.log.Dropped = status, dropped
	s := x.s
	s.mu.Lock()
	x.logIdx = len(s.requests)
	s.requests = append(s.requests, x.log)
	fns := s.requestFns
	s.mu.Unlock()
	for _, fn := range fns {
		fn(x.log)
	}
}

func (x *exchange) respond(status int, contentType string, body []byte) {
	x.logged(status, false)
	h := x.w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	x.w.WriteHeader(status)
	_, _ = x.w.Write(body) // a client that went away is not the fake's problem
}

func (x *exchange) error(status int, code, msg string) {
	x.respond(status, "application/json", x.s.errorBody(code, msg))
}

// gateway answers as an intermediary (load balancer, CDN, API gateway)
// would: an HTML page, or JSON of the gateway's own with ShapeGatewayJSON,
// never the API's error.
func (x *exchange) gateway(status int) {
	status = gatewayStatus(status)
	contentType, body := x.s.gatewayBody(status)
	x.respond(status, contentType, body)
}

// drop closes the connection without answering: the client sees a
// transport error. The server keeps serving other connections.
func (x *exchange) drop() {
	x.logged(0, true)
	hj, ok := x.w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}

// orOneSecond is a fault's Retry-After: its Delay, or one second.
func orOneSecond(d time.Duration) time.Duration {
	if d <= 0 {
		return time.Second
	}
	return d
}
