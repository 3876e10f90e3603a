package scenario

import (
	"fmt"
	"strings"
	"time"

	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// Scenario is one world the SDK is run in: how the API answers, how its
// clocks and caches behave, which faults its requests meet and what the
// clients do. It is plain data, so that a failing one prints as Go source
// (GoString) and runs again with Run.
type Scenario struct {
	// Seed seeds the fake's fault coins (WithDeterministicFaults).
	Seed int64
	// Shapes are the fake's own answer variants (pagpolartest.AllShapes):
	// the shapes a real PagPolar could plausibly use, all at once.
	Shapes []pagpolartest.Shape
	// NoSubscriptionLookup: the API has no GET /subscriptions?external_reference=
	// (the one assumed lookup route), so a lost subscribe cannot be looked up.
	NoSubscriptionLookup bool
	// Mutations are generated edits of the answers beyond the fake's
	// shapes: another API version, a proxy that rewrites JSON, a field
	// the docs never showed.
	Mutations []Mutation
	// APIClock is how the API's Date headers relate to the clock that
	// stamps created_at.
	APIClock APIClock
	// ClientSkew is how far the client hosts' clock is off the API's
	// (an unsynchronised NTP, a VM resumed from a snapshot).
	ClientSkew time.Duration
	// Cache is a cache between the client and the API.
	Cache Cache
	// Clients is how many client processes share the one key store (1–3):
	// workers of one service, or hosts behind a load balancer.
	Clients int
	// Steps are what happens, in order.
	Steps []Step
}

// Mutation edits every answer of one kind, as an API that answers in a
// shape of its own would.
type Mutation struct {
	Answers Answers // which answers
	Edit    Edit    // what is done to them
	Field   string  // the field edited (for field edits)
	// OtherHost: only the second API host's answers are edited (every
	// other answer, counted as APIClock.OtherHost counts them): a rolling
	// deploy in which one host already runs the API's next version, so
	// one kind of answer carries a field under two names.
	OtherHost bool
	// Later: only answers after a DoDeploy step are edited: the API's
	// next version deployed while the clients run, so what they learned
	// of one version they meet in the next.
	Later bool
}

// Answers names a kind of answer: a money route's POST answer, a list
// lookup or a read by ID.
type Answers string

// The kinds of answers.
const (
	PostPix         Answers = "post pix"
	PostBoleto      Answers = "post boleto"
	PostCard        Answers = "post credit_card"
	PostSubscribe   Answers = "post subscribe"
	PostPlanChange  Answers = "post plan_change"
	PostRefund      Answers = "post refund"
	ListSales       Answers = "list sales"
	ListRefunds     Answers = "list refunds"
	ListSubs        Answers = "list subscriptions"
	GetSale         Answers = "get sale"
	GetSubscription Answers = "get subscription"
	AnyAnswer       Answers = "any"
	noAnswerKind    Answers = ""
)

// Edit is one way of rewriting an answer.
type Edit string

// The edits. Field edits act on the field named by Mutation.Field in the
// answer's object (every item of a list).
const (
	EditRename       Edit = "rename"        // the field under another name (camelCase, a prefix dropped)
	EditAlias        Edit = "alias"         // a lookalike beside it (sale_id: 5012 beside sale_identifier)
	EditRekey        Edit = "rekey"         // the lookalike instead of it: another name, another value (offer_id: 3 for offer_identifier)
	EditRemove       Edit = "remove"        // the field left out
	EditNumberString Edit = "number-string" // a number written as a string ("9990")
	EditStringNumber Edit = "string-number" // a numeric string written as a number (external_reference 1001)
	EditUpper        Edit = "upper"         // the value in capitals (PIX, PAID)
	EditTitle        Edit = "title"         // the value capitalised (Pix, Paid)
	EditTimeUnix     Edit = "time-unix"     // a time as Unix seconds
	EditTimeNoZone   Edit = "time-no-zone"  // a time without zone ("2026-12-01 21:00:00")
	EditTimeOffset   Edit = "time-offset"   // a time in another zone (+05:30)
	EditSaleAmount   Edit = "sale-amount"   // a refund's amount is its sale's; its own is under refund_amount
	// Body edits (Field unused).
	EditWrap      Edit = "wrap"       // the object nested: {"data": {...}} or a list's {"data": {"items": [...]}}
	EditBareList  Edit = "bare-list"  // a list as a top-level JSON array
	EditMoreFlag  Edit = "more-flag"  // a list says has_more: true with no way to the next page
	EditCompact   Edit = "compact"    // list items carry only their identifier and status
	EditTotalMore Edit = "total-more" // a list's total says more items exist than it holds
)

// APIClock is the API's Date header as the client sees it. Date always has
// whole seconds (HTTP's format).
type APIClock struct {
	// Shift: Date runs this far from the clock that stamps created_at
	// (front servers and database on different clocks).
	Shift time.Duration
	// StepAt, Step: from the StepAt-th answer on (1-based), Date jumps by
	// Step (an NTP step, a new load balancer); 0: never.
	StepAt int
	Step   time.Duration
	// OtherHost: every other answer comes from a second host whose Date
	// is this far off the first's (0: one host).
	OtherHost time.Duration
	// DropEvery: every DropEvery-th answer has no Date (0: never; the
	// fake's ShapeNoDate drops it from all).
	DropEvery int
}

// Cache is what sits between the client and the API.
type Cache int

// The caches.
const (
	CacheNone Cache = iota
	// CacheStale serves every other read of a URL from its first copy,
	// ignoring the request's no-cache, with a truthful Age.
	CacheStale
	// CacheAgeZero stamps "Age: 0" on every fresh answer (a CDN in front).
	CacheAgeZero
	// CacheStaleGarbled serves copies as CacheStale does, with an Age no
	// one can read ("soon").
	CacheStaleGarbled
	// CacheStaleTwoAges serves copies with two Age headers: "0" from an
	// edge and the true age from the shield behind it.
	CacheStaleTwoAges
	// CacheStaleNoAge serves every other read of a URL from its first
	// copy, ignoring no-cache, without any Age (a micro-cache that passes
	// the copy's own Date on), once the copy is at least staleNoAge old:
	// only the copy's Date can tell it is not the list as it is now. (A
	// copy younger than Date's second is the open exposure README lists,
	// the fake's cache-no-age shape.)
	CacheStaleNoAge
)

// staleNoAge is how old a copy CacheStaleNoAge serves is, at least.
const staleNoAge = 3 * time.Second

var cacheNames = [...]string{"none", "stale", "age-zero", "stale-garbled-age", "stale-two-ages", "stale-no-age"}

func (c Cache) String() string {
	if int(c) < len(cacheNames) {
		return cacheNames[c]
	}
	return fmt.Sprintf("Cache(%d)", int(c))
}

// Step is one thing that happens.
type Step struct {
	Actor int    // the client (0 ≤ Actor < Clients) that acts
	Do    Action // what it does
	// Order is which order a charge or subscribe is for (0–1; 2 and up
	// are the warm-up's, one per client); N numbers
	// a refund of the setup sale or a plan change of the setup
	// subscription (several per sale or subscription are legitimate).
	Order, N int
	// Of (with Do == DoResume) is the kind of operation resumed: the
	// operation of that kind for Order / N.
	Of Action
	// Faults are what this step's requests meet at the fake, each once,
	// in order (front faults before processing faults).
	Faults []Fault
	// Truncate cuts the first answer to this step's money route after its
	// first bytes: the connection broke mid-body after the API committed.
	Truncate bool
	// GiveUp: the caller's context ends as soon as the first answer (or
	// its loss) arrives — a caller's deadline, a crash after sending.
	GiveUp bool
	// Concurrent: runs at the same time as the previous step (two workers,
	// two hosts).
	Concurrent bool
	// Advance (with Do == DoAdvance): how far time moves on; with
	// DoClientStep and DoAPIStep, how far that clock steps.
	Advance time.Duration
	// Events (with Do == DoWebhooks): which of the events so far are
	// delivered, by index modulo their count, in this order: late,
	// duplicated and out of order.
	Events []int
}

// Fault is one fault of the fake, aimed at the step's operation.
type Fault struct {
	Action pagpolartest.FaultAction
	// Read aims it at the lookup route of the step's operation instead of
	// its money route.
	Read      bool
	Status    int           // FaultGateway*: 502, 503, 504
	Delay     time.Duration // hold, latency, slow 500, lag, Retry-After
	LookupLag time.Duration // with a committing action: a replica behind
}

// Action is what a step does.
type Action int

// The actions.
const (
	DoPix        Action = iota // charge the order by PIX
	DoBoleto                   // charge the order by boleto
	DoCard                     // charge the order by card
	DoSubscribe                // subscribe the order to plan-basic
	DoRefund                   // refund #N (R$15 + R$10×N) of the setup card sale
	DoPlanChange               // plan change #N of the setup subscription
	DoResume                   // Resume the operation of kind Of for Order / N (a settling job)
	DoResumeAll                // ResumeAll
	DoRestart                  // the actor's process restarts: a new client on the same store
	DoAdvance                  // time passes (Advance)
	DoClientStep               // the actor hosts' clock steps by Advance
	DoWebhooks                 // webhook deliveries (Events) reach the actor
	DoPay                      // the customer pays the order's PIX or boleto (a decision moves later)
	DoAmnesia                  // the key store forgets everything (a Redis without persistence restarts)
	DoForgetOne                // the store forgets its newest record (a failover to a replica that lagged)
	DoAcceptLoss               // the operator settles what is open and accepts the store's loss
	DoDeploy                   // the API's next version is deployed: the Later mutations apply from now on
	DoAPIStep                  // the API's own clock steps by Advance: its Date and the creation times it stamps from now on (an NTP correction on its servers)
)

var actionNames = [...]string{"pix", "boleto", "card", "subscribe", "refund", "plan-change", "resume", "resume-all",
	"restart", "advance", "client-clock-step", "webhooks", "pay", "amnesia", "forget-one", "accept-loss", "deploy", "api-clock-step"}

func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// isCall reports whether the action calls a money method of the SDK.
func (a Action) isCall() bool { return a <= DoPlanChange }

// chargesByReference reports whether the action's effect is found by the
// order's reference, and can be excluded by time (a charge or a
// subscription), not by a snapshot of identifiers (refunds, plan changes).
func (a Action) chargesByReference() bool {
	return a == DoPix || a == DoBoleto || a == DoCard || a == DoSubscribe
}

// GoString prints the scenario as Go source for a regression test.
func (s Scenario) GoString() string {
	type plain Scenario // without the method, or %#v would call it again
	out := fmt.Sprintf("%#v", plain(s))
	out = strings.ReplaceAll(out, "scenario.plain", "Scenario")
	return strings.ReplaceAll(out, "scenario.", "")
}

// String describes the scenario in words, one step a line.
func (s Scenario) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d, %d client(s), shapes %v, cache %s, client skew %s, API clock %+v",
		s.Seed, s.Clients, s.Shapes, s.Cache, s.ClientSkew, s.APIClock)
	if s.NoSubscriptionLookup {
		b.WriteString(", no subscription lookup")
	}
	for _, m := range s.Mutations {
		fmt.Fprintf(&b, "\n  answers %q: %s %s", m.Answers, m.Edit, m.Field)
		if m.OtherHost {
			b.WriteString(" (the second host's only)")
		}
		if m.Later {
			b.WriteString(" (once deployed)")
		}
	}
	for i, st := range s.Steps {
		fmt.Fprintf(&b, "\n  %d. client %d %s", i+1, st.Actor, st.Do)
		switch st.Do {
		case DoAdvance, DoClientStep, DoAPIStep:
			fmt.Fprintf(&b, " %s", st.Advance)
		case DoWebhooks:
			fmt.Fprintf(&b, " events %v", st.Events)
		case DoRefund, DoPlanChange:
			fmt.Fprintf(&b, " #%d", st.N)
		default:
			fmt.Fprintf(&b, " order %d", st.Order)
		}
		for _, f := range st.Faults {
			fmt.Fprintf(&b, " [%s", f.Action)
			if f.Read {
				b.WriteString(" on lookup")
			}
			if f.Status != 0 {
				fmt.Fprintf(&b, " %d", f.Status)
			}
			if f.Delay != 0 {
				fmt.Fprintf(&b, " %s", f.Delay)
			}
			if f.LookupLag != 0 {
				fmt.Fprintf(&b, " lag %s", f.LookupLag)
			}
			b.WriteString("]")
		}
		if st.Truncate {
			b.WriteString(" [truncated answer]")
		}
		if st.GiveUp {
			b.WriteString(" [caller gives up after the first answer]")
		}
		if st.Concurrent {
			b.WriteString(" (concurrently with the previous step)")
		}
	}
	return b.String()
}
