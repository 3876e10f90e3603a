package pagpolartest

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"time"
)

// Fault makes the server misbehave on the requests it matches. Faults are
// injected with Server.Inject and checked in injection order; the first one
// that matches a request applies to it.
//
// A request meets faults at two points. Before anything is processed (right
// after authentication) it meets the faults whose action happens in front of
// the API: FaultDropBeforeProcessing, FaultGateway, FaultRateLimit,
// FaultUnavailable and FaultLatency. Only if it then gets as far as being
// processed (valid, and its key free) does it meet the others, so a fault that
// needs a commit is never spent on a request that was answered 400, 409 or
// with a replay. A request can therefore meet one fault of each kind, e.g.
// added latency and then a dropped answer.
type Fault struct {
	// Route names the route the fault applies to: "pix", "boleto",
	// "credit_card", "subscribe", "plan_change", "refund" (the money routes)
	// or "get_sales", "get_sale", "get_refunds", "get_subscription",
	// "list_subscriptions" (the read routes). "" means any money route.
	Route string

	// ExternalReference, if set, matches the body's external_reference; for
	// refunds it matches sale_identifier, for plan changes the subscription
	// ID of the path, and on the read routes the query parameter (or the path
	// identifier) being looked up.
	ExternalReference string

	// Key, if set, matches the Idempotency-Key header.
	Key string

	// Times is how many matching requests the fault applies to; 0 means all.
	Times int

	// Probability, if strictly between 0 and 1, makes the fault apply to a
	// matching request only when a coin says so (Times counts the requests
	// it did apply to). 0 and 1 mean always. By default the coins are one
	// random sequence seeded by WithSeed and drawn in the order requests
	// arrive, so concurrent clients (or one whose retries depend on timing)
	// meet different faults in every run; WithDeterministicFaults makes
	// each coin a function of the seed and of the request's subject and
	// attempt instead (see there).
	Probability float64

	// OnlyFirst, if positive, makes the fault apply only to the first
	// OnlyFirst requests about the same subject that reach it (see
	// WithDeterministicFaults for what a subject is): e.g. 1 on a read route
	// fails a lookup's first read at most, however many times a client
	// polls. 0 means any request.
	OnlyFirst int

	Action FaultAction

	// Delay is the duration of FaultCommitThen500After, FaultHold,
	// FaultLookupLag and FaultLatency, measured on the server's Clock. For
	// FaultRateLimit and FaultUnavailable it is the Retry-After (default 1 s).
	Delay time.Duration

	// LookupLag, with an action that commits (FaultCommitThen500,
	// FaultCommitThenDrop, ...), also keeps what the request creates out of
	// the list lookups for this long, as FaultLookupLag does on its own: a
	// read replica lagging behind a commit that ended in an error.
	LookupLag time.Duration

	// Status is the status of FaultGateway and FaultGatewayAfterCommit:
	// 502, 503 or 504 (anything else means 502).
	Status int
}

// FaultAction is what a Fault does to the request it applies to. Its zero
// value is invalid, so that a Fault without an Action is caught by Inject.
type FaultAction int

const (
	// FaultCommitThenDrop processes and commits the request, stores a 2xx
	// answer for replay, then closes the connection without answering.
	FaultCommitThenDrop FaultAction = iota + 1
	// FaultCommitDropRelease commits, releases the key (as an error after the
	// commit would) and closes the connection without answering.
	FaultCommitDropRelease
	// FaultDropBeforeProcessing reads the request and closes the connection
	// without answering; nothing is processed and the key is not registered.
	FaultDropBeforeProcessing
	// FaultCommitThen500 commits and answers 500 at once; the key is released.
	FaultCommitThen500
	// FaultCommitThen500After commits at t, keeps the key in processing and
	// answers 500 at t+Delay, releasing the key then.
	FaultCommitThen500After
	// Fault500NoCommit answers 500 without committing; the key is released.
	// On a read route it is a plain 500.
	Fault500NoCommit
	// FaultHold holds processing for Delay, then processes normally. Requests
	// with the same key meanwhile get 409, until the processing window has
	// passed: then a same-key request is processed again while the held one
	// will still commit later (the documented exposure). On a read route it
	// delays the answer. The hold continues if the client gives up, as a real
	// server's processing would; Close ends it.
	FaultHold
	// FaultLookupLag keeps what the request creates (a sale, refund,
	// subscription or plan change) out of the lookups for Delay: the list
	// lookups GET /sales?external_reference=, GET /refunds?sale_identifier=
	// and GET /subscriptions?external_reference=, and for a plan change also
	// the plan_changes of GET /subscriptions/{id}. The object exists (it is
	// in the Ledger and GET /sales/{id} finds a sale).
	FaultLookupLag
	// FaultGateway makes an intermediary answer Status with an HTML body;
	// nothing is processed and the key is not registered.
	FaultGateway
	// FaultGatewayAfterCommit commits, releases the key, and then an
	// intermediary answers Status with an HTML body.
	FaultGatewayAfterCommit
	// FaultRateLimit answers 429 with Retry-After before validation; the key
	// is not registered.
	FaultRateLimit
	// FaultUnavailable answers the API's own 503 (a wire.Error with code
	// service_unavailable and Retry-After); nothing is processed and the key
	// is not registered.
	FaultUnavailable
	// FaultLatency adds Delay, then the request is handled normally. A client
	// that gives up during the delay has sent a request never processed.
	FaultLatency
	// FaultDecline declines a card charge or a card subscription: a declined
	// sale is recorded (visible to lookups), the answer is 402 with code
	// "declined" and the key is released. It matches only requests paying by
	// card.
	FaultDecline
)

var faultNames = map[FaultAction]string{
	FaultCommitThenDrop:       "commit_then_drop",
	FaultCommitDropRelease:    "commit_drop_release",
	FaultDropBeforeProcessing: "drop_before_processing",
	FaultCommitThen500:        "commit_then_500",
	FaultCommitThen500After:   "commit_then_500_after",
	Fault500NoCommit:          "500_no_commit",
	FaultHold:                 "hold",
	FaultLookupLag:            "lookup_lag",
	FaultGateway:              "gateway",
	FaultGatewayAfterCommit:   "gateway_after_commit",
	FaultRateLimit:            "rate_limit",
	FaultUnavailable:          "unavailable",
	FaultLatency:              "latency",
	FaultDecline:              "decline",
}

// String returns the name under which the action appears in RequestLog.Fault.
func (a FaultAction) String() string {
	if n, ok := faultNames[a]; ok {
		return n
	}
	return fmt.Sprintf("FaultAction(%d)", int(a))
}

// front reports whether the action happens before the request is processed.
func (a FaultAction) front() bool {
	switch a {
	case FaultDropBeforeProcessing, FaultGateway, FaultRateLimit, FaultUnavailable, FaultLatency:
		return true
	}
	return false
}

// onReads reports whether the action can apply to a read route.
func (a FaultAction) onReads() bool { return a.front() || a == Fault500NoCommit || a == FaultHold }

// Route names, as used in Fault.Route and RequestLog.Route.
const (
	routePix               = "pix"
	routeBoleto            = "boleto"
	routeCreditCard        = "credit_card"
	routeSubscribe         = "subscribe"
	routePlanChange        = "plan_change"
	routeRefund            = "refund"
	routeGetSales          = "get_sales"
	routeGetSale           = "get_sale"
	routeGetRefunds        = "get_refunds"
	routeGetSubscription   = "get_subscription"
	routeListSubscriptions = "list_subscriptions"
)

var moneyRoutes = map[string]bool{
	routePix: true, routeBoleto: true, routeCreditCard: true,
	routeSubscribe: true, routePlanChange: true, routeRefund: true,
	routeGetSales: false, routeGetSale: false, routeGetRefunds: false,
	routeGetSubscription: false, routeListSubscriptions: false,
}

// activeFault is an injected Fault and how often it has applied.
type activeFault struct {
	Fault
	applied int
	// reached counts, per subject, the requests that were checked against
	// this fault (WithDeterministicFaults and OnlyFirst); nil until needed.
	reached map[string]int
}

// faultQuery describes a request for matching.
type faultQuery struct {
	route string
	ref   string
	key   string
	card  bool // pays by card (FaultDecline matches only these)
	front bool // the phase: before processing or at processing
}

// pickFault returns the first injected fault that applies to q, spending one
// of its Times and, for a probabilistic one, one coin. Called with s.mu held.
func (s *Server) pickFault(q faultQuery) (Fault, bool) {
	money := moneyRoutes[q.route]
	subject := ""
	for i, f := range s.faults {
		switch {
		case f.Action.front() != q.front,
			f.Route == "" && !money,
			f.Route != "" && f.Route != q.route,
			!money && !f.Action.onReads(),
			f.Action == FaultDecline && !q.card,
			f.ExternalReference != "" && f.ExternalReference != q.ref,
			f.Key != "" && f.Key != q.key,
			f.Times > 0 && f.applied >= f.Times:
			continue
		}
		coin := f.Probability > 0 && f.Probability < 1
		n := 0 // this request's rank among its subject's requests that reached f
		if f.OnlyFirst > 0 || (coin && s.cfg.deterministicFaults) {
			if subject == "" {
				subject = s.faultSubject(q)
			}
			if f.reached == nil {
				f.reached = map[string]int{}
			}
			f.reached[subject]++
			n = f.reached[subject]
			if f.OnlyFirst > 0 && n > f.OnlyFirst {
				continue
			}
		}
		if coin {
			u := 0.0
			if s.cfg.deterministicFaults {
				u = faultCoin(s.cfg.seed, i, subject, n)
			} else {
				u = s.rng.Float64()
			}
			if u >= f.Probability {
				continue
			}
		}
		f.applied++
		return f.Fault, true
	}
	return Fault{}, false
}

// faultSubject names what a request is about in words that are the same in
// every run: its route and the external reference of the order it concerns.
// A refund, a plan change and a read of a sale, its refunds or a
// subscription by ID are about the external reference of that sale or
// subscription (their IDs are new in every run); a request with no
// reference at all is about its Idempotency-Key. Called with s.mu held.
func (s *Server) faultSubject(q faultQuery) string {
	ref := q.ref
	switch q.route {
	case routeRefund, routeGetRefunds, routeGetSale: // a sale ID
		if sl, ok := s.saleByID[q.ref]; ok {
			ref = sl.v.ExternalReference
		}
	case routePlanChange, routeGetSubscription: // a subscription ID
		if sb, ok := s.subByID[q.ref]; ok {
			ref = sb.v.ExternalReference
		}
	}
	if ref == "" {
		return q.route + " key " + q.key
	}
	return q.route + " ref " + ref
}

// faultCoin is a number in [0, 1) that depends only on its arguments: the
// seed, the fault's position among the injected faults, the request's
// subject and its rank among the subject's requests that reached the fault.
func faultCoin(seed int64, fault int, subject string, n int) float64 {
	h := fnv.New64a()
	var b [8]byte
	for _, v := range []uint64{uint64(seed), uint64(fault), uint64(n)} {
		binary.LittleEndian.PutUint64(b[:], v)
		_, _ = h.Write(b[:])
	}
	_, _ = h.Write([]byte(subject))
	// splitmix64's finaliser spreads FNV's weak low bits over the word.
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / (1 << 53)
}

func validateFault(f Fault) error {
	if _, ok := faultNames[f.Action]; !ok {
		return fmt.Errorf("pagpolartest: Fault.Action %d is not a FaultAction", int(f.Action))
	}
	if _, ok := moneyRoutes[f.Route]; f.Route != "" && !ok {
		return fmt.Errorf("pagpolartest: Fault.Route %q is not a route name", f.Route)
	}
	if f.Probability < 0 || f.Probability > 1 {
		return fmt.Errorf("pagpolartest: Fault.Probability %v is outside [0, 1]", f.Probability)
	}
	if f.Times < 0 || f.Delay < 0 || f.OnlyFirst < 0 {
		return fmt.Errorf("pagpolartest: Fault.Times, Fault.Delay and Fault.OnlyFirst must not be negative")
	}
	return nil
}

func gatewayStatus(st int) int {
	if st == 502 || st == 503 || st == 504 {
		return st
	}
	return 502
}
