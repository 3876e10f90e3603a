package scenario

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// The windows of a run: the production relations, shortened as the root
// package's tests shorten them, so that a scenario settles in
// milliseconds.
const (
	window        = 300 * time.Millisecond // the fake's in-processing mark
	callBudget    = 20 * time.Second       // each call's context (real time)
	contextGrace  = 3 * time.Second        // how late after its context a call may return
	setupSale     = "9001"                 // the card sale refunds are made of
	setupSub      = "9002"                 // the subscription plan changes are made to
	refundAmount  = 1500
	attemptBudget = time.Second
	settleDelay   = 60 * time.Millisecond // the client's wait for a lagging replica
	// exclusionMargin is how far before a floor the SDK's time rule
	// excludes effects with the policy's 1 ms tolerance: a step of the
	// API's clock back by more, seen by no answer, is the open exposure.
	exclusionMargin = 2*time.Second + 3*time.Millisecond
)

func policy() pagpolar.RetryPolicy {
	return pagpolar.RetryPolicy{
		MaxAttempts:          6,
		NewBackOff:           pagpolar.Exponential(5*time.Millisecond, 40*time.Millisecond),
		MaxRetryAfter:        20 * time.Millisecond,
		AttemptTimeout:       attemptBudget,
		ProcessingWindow:     window,
		WindowMargin:         50 * time.Millisecond,
		SettleDelay:          settleDelay,
		LookupInterval:       20 * time.Millisecond,
		MaxSettleWait:        5 * time.Second,
		LeaseTTL:             5 * time.Second,
		LeaseWaitInterval:    5 * time.Millisecond,
		ServerClockTolerance: time.Millisecond,
	}
}

var quiet = slog.New(slog.DiscardHandler)

var customer = pagpolar.Customer{Name: "Maria Silva", Email: "maria@exemplo.com", Document: "123.456.789-09", Phone: "11999990000"}

// orderRef is the external reference of order i: digits only, so that a
// string-to-number edit can bite.
func orderRef(i int) string { return strconv.Itoa(1001 + i) }

// Result is what a run found.
type Result struct {
	Violations []Violation
	Reports    []Report
	Unknown    int // calls that answered unknown
	Unsettled  int // operations still unknown after the final settling
	Calls      int
}

// Failures are the violations outside documented exposures.
func (r Result) Failures() []Violation {
	var out []Violation
	for _, v := range r.Violations {
		if !v.Exposure {
			out = append(out, v)
		}
	}
	return out
}

type runner struct {
	sc     Scenario
	srv    *pagpolartest.Server
	clock  *pagpolartest.Clock
	warp   atomic.Bool
	store  *keystore.Memory
	tap    *tap
	tr     *http.Transport
	hosts  []*hostClock
	cls    []*pagpolar.Client
	saleID string
	subID  string

	mu      sync.Mutex
	keys    map[string]string
	exposed map[string]bool
	setup   map[string]bool
	reports []Report
	late    []string // calls that returned past their context
	// apiOff is how far DoAPIStep has stepped the API's own clock, and
	// apiMaxOff the furthest ahead it has been.
	apiOff, apiMaxOff time.Duration
	logged            atomic.Int64
}

// Run runs sc against a fresh fake and checks the invariants. It never
// fails a test itself: the caller decides what to do with the Result.
func Run(sc Scenario) (Result, error) {
	if sc.Clients < 1 {
		sc.Clients = 1
	}
	r := &runner{sc: sc, keys: map[string]string{}, exposed: map[string]bool{}, setup: map[string]bool{}}
	r.clock = pagpolartest.NewClock()
	opts := []pagpolartest.Option{pagpolartest.WithClock(r.clock), pagpolartest.WithProcessingWindow(window),
		pagpolartest.WithSeed(sc.Seed), pagpolartest.WithDeterministicFaults(), pagpolartest.WithShapes(sc.Shapes...)}
	if sc.NoSubscriptionLookup {
		opts = append(opts, pagpolartest.WithoutSubscriptionLookup())
	}
	r.srv = pagpolartest.NewUnstartedServer(opts...)
	if err := r.srv.Start(); err != nil {
		return Result{}, err
	}
	r.srv.OnRequest(func(pagpolartest.RequestLog) { r.logged.Add(1) })
	r.store = keystore.NewMemoryWithClock(r.clock)
	r.tr = &http.Transport{MaxIdleConnsPerHost: 16}
	r.tap = newTap(r.tr, &r.sc, r.clock)
	r.warp.Store(true)
	closed := false
	shut := func() {
		if !closed {
			closed = true
			r.srv.Close()
			r.tr.CloseIdleConnections()
		}
	}
	defer shut()
	if err := r.setUp(); err != nil {
		return Result{}, err
	}
	for i := range sc.Clients {
		h := &hostClock{base: r.clock, warp: &r.warp, held: r.held}
		h.skew.Store(int64(sc.ClientSkew))
		r.hosts = append(r.hosts, h)
		c, err := r.newClient(i)
		if err != nil {
			return Result{}, err
		}
		r.cls = append(r.cls, c)
	}
	for i := 0; i < len(sc.Steps); {
		j := i + 1
		for j < len(sc.Steps) && sc.Steps[j].Concurrent {
			j++
		}
		r.batch(i, sc.Steps[i:j])
		i = j
	}
	if afterSteps != nil {
		afterSteps()
	}
	res, err := r.finish()
	shut()
	// No goroutine left: once the calls have returned and the fake and
	// the connections are closed, nothing of the SDK's may still run.
	var left []string
	for wait := 0; wait < 200; wait++ {
		if left = leftGoroutines(); len(left) == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, g := range left {
		res.Violations = append(res.Violations, Violation{OpID: "goroutine", What: "left running after the run: " + g})
	}
	return res, err
}

// afterSteps, set only by this package's tests, runs once a run's steps
// have ended: a test plants there what the run's checks must catch (a
// goroutine left running SDK code).
var afterSteps func()

// held reports whether the fake has a request waiting on the Clock.
func (r *runner) held() bool {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return r.srv.WaitHolds(ctx, 1) == nil
}

func (r *runner) newClient(actor int) (*pagpolar.Client, error) {
	return pagpolar.NewClient(r.srv.CredentialID, pagpolar.StaticToken(r.srv.AddToken(r.srv.CredentialID)),
		pagpolar.WithBaseURL(r.srv.URL), pagpolar.WithStore(r.store), pagpolar.WithClock(r.hosts[actor]),
		pagpolar.WithRetryPolicy(policy()), pagpolar.WithLogger(quiet),
		pagpolar.WithHTTPClient(&http.Client{Transport: r.tap}), pagpolar.WithHook(giveUpHook))
}

// setUp makes, outside the scenario, the sale its refunds refund and the
// subscription its plan changes change: straight to the fake, no faults.
func (r *runner) setUp() error {
	c, err := pagpolar.NewClient(r.srv.CredentialID, pagpolar.StaticToken(r.srv.Token), pagpolar.WithBaseURL(r.srv.URL),
		pagpolar.WithStore(keystore.NewMemoryWithClock(r.clock)), pagpolar.WithClock(r.clock),
		pagpolar.WithRetryPolicy(policy()), pagpolar.WithLogger(quiet), pagpolar.WithHTTPClient(&http.Client{Transport: r.tr}))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), callBudget)
	defer cancel()
	ch, err := c.Payments.CreditCard(ctx, pagpolar.CreditCardParams{OfferID: "offer-premium", ExternalReference: setupSale, Customer: customer, CardToken: "tok_setup"})
	if err != nil {
		return fmt.Errorf("setup sale: %w", err)
	}
	sub, err := c.Subscriptions.Subscribe(ctx, pagpolar.SubscribeParams{OfferID: "plan-basic", ExternalReference: setupSub, Customer: customer, PaymentMethod: "pix"})
	if err != nil {
		return fmt.Errorf("setup subscription: %w", err)
	}
	r.saleID, r.subID = ch.Sale.ID, sub.Subscription.ID
	r.setup[ch.Operation.Key], r.setup[sub.Operation.Key] = true, true
	return nil
}

// opID names the operation of a step's kind: the SDK's default for
// charges, the caller's own for refunds and plan changes.
func opID(a Action, order, n int) string {
	ref := orderRef(order)
	switch a {
	case DoPix:
		return "pix:" + ref
	case DoBoleto:
		return "boleto:" + ref
	case DoCard:
		return "credit_card:" + ref
	case DoSubscribe:
		return "subscribe:" + ref
	case DoRefund:
		return "refund-" + setupSale + "-" + strconv.Itoa(n)
	case DoPlanChange:
		return "plan-change-" + setupSub + "-" + strconv.Itoa(n)
	}
	return ""
}

// batch runs steps (the first at index first) at the same time.
func (r *runner) batch(first int, steps []Step) {
	r.warp.Store(len(steps) == 1)
	defer r.warp.Store(true)
	// Faults match requests by route and reference, so a fault drawn for
	// one of several concurrent steps on one reference may meet another's
	// request: a documented exposure drawn for one exposes them all.
	exposedRefs := map[string]bool{}
	// A step of the API's clock back run beside a call may land between
	// the call's last reading of the clock and its commit: the call is
	// then made as if sent after the step.
	r.mu.Lock()
	off, maxOff := r.apiOff, r.apiMaxOff
	r.mu.Unlock()
	behind := maxOff-off > exclusionMargin
	for _, st := range steps {
		if st.Do == DoAPIStep {
			off += st.Advance
			maxOff = max(maxOff, off)
			behind = behind || maxOff-off > exclusionMargin
		}
	}
	for _, st := range steps {
		if r.inject(st, behind) {
			_, _, ref, _ := r.routes(st)
			exposedRefs[ref] = true
		}
	}
	if len(steps) > 1 {
		for _, st := range steps {
			if _, _, ref, _ := r.routes(st); st.Do.isCall() && exposedRefs[ref] {
				r.mu.Lock()
				r.exposed[opID(st.Do, st.Order, st.N)] = true
				r.mu.Unlock()
			}
		}
	}
	var wg sync.WaitGroup
	for i, st := range steps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.step(first+i+1, st)
		}()
	}
	wg.Wait()
	r.srv.ClearFaults()
	r.tap.clearCuts()
}

// routes names the fake's money route, its lookup route and the reference
// faults match for a step's action.
func (r *runner) routes(st Step) (money, read, ref string, ans Answers) {
	o := orderRef(st.Order)
	switch st.Do {
	case DoPix:
		return "pix", "get_sales", o, PostPix
	case DoBoleto:
		return "boleto", "get_sales", o, PostBoleto
	case DoCard:
		return "credit_card", "get_sales", o, PostCard
	case DoSubscribe:
		return "subscribe", "list_subscriptions", o, PostSubscribe
	case DoRefund:
		return "refund", "get_refunds", r.saleID, PostRefund
	case DoPlanChange:
		return "plan_change", "get_subscription", r.subID, PostPlanChange
	}
	return "", "", "", noAnswerKind
}

// inject arms a step's faults and reports whether one of them is a
// documented exposure. behind: the API's clock is, or during the step may
// get, behind what it showed by more than the exclusion margin.
func (r *runner) inject(st Step, behind bool) (exposed bool) {
	if !st.Do.isCall() {
		return false
	}
	money, read, ref, ans := r.routes(st)
	op := opID(st.Do, st.Order, st.N)
	if (r.sc.Cache == CacheStaleNoAge || slices.Contains(r.sc.Shapes, pagpolartest.ShapeCacheNoAge)) && storeLoses(r.sc.Steps) {
		// Open (README's limits): after the store lost records, the lookup
		// before a first send has no bound of the API's clock to judge a
		// copy's Date by (the record's prove_by is what was lost), and may
		// trust a copy without Age from this cache or the fake's
		// micro-cache (TestKnownExposure_FreshProcessOnAnUnprovenStoreTrustsACachedListWithoutAge).
		r.mu.Lock()
		r.exposed[op] = true
		r.mu.Unlock()
	}
	if slices.Contains(r.sc.Shapes, pagpolartest.ShapeNoDate) && (r.sc.Cache == CacheStaleNoAge || slices.Contains(r.sc.Shapes, pagpolartest.ShapeCacheNoAge)) {
		// Open (README's limits): an API that sends no Date at all behind
		// a cache that ignores no-cache and sends no Age: nothing tells a
		// stored copy from the list as it is, so a copy made before the
		// send may be taken for a not-found
		// (TestScenario_APIWithoutDateBehindACacheWithoutAgeIsTheOpenExposure).
		r.mu.Lock()
		r.exposed[op] = true
		r.mu.Unlock()
	}
	if slices.Contains(r.sc.Shapes, pagpolartest.ShapeCacheNoAge) && (r.sc.APIClock.StepAt > 0 && r.sc.APIClock.Step > 0 || r.sc.APIClock.OtherHost > 0) {
		// Open (README's limits): the tap moves the Date of the fake's
		// answers forward (a step, a host ahead), and the fake's
		// micro-cache copies are among them: a copy without Age under a
		// Date newer than itself, as a cache that stamps its own Date
		// would serve it. Nothing tells it from the list as it is.
		r.mu.Lock()
		r.exposed[op] = true
		r.mu.Unlock()
	}
	if constantMethod(r.sc.Mutations) {
		// Open (README's limits): list items carry, under a name the SDK
		// reads as the payment method, one value for every sale
		// ("method": "boleto"). A boleto charge of this client's met in a
		// list shows the name carrying what was sent, which then proves a
		// PIX sale listed with it another method's
		// (TestScenario_ConstantFieldNamedLikeTheMethodIsTheOpenExposure).
		r.mu.Lock()
		r.exposed[op] = true
		r.mu.Unlock()
	}
	if behind && st.Do.chargesByReference() && st.GiveUp && len(st.Faults) > 0 && !st.Faults[0].Read &&
		(st.Faults[0].Action == pagpolartest.FaultCommitThenDrop || st.Faults[0].Action == pagpolartest.FaultCommitDropRelease) {
		// Open (README's limits): the API's clock stepped back by more
		// than the exclusion margin, the answer is lost and the caller
		// gives up before any lookup, and the clock may step forward
		// again before the next, or a fresh process reads the record once
		// the clock, still behind, has passed the floor: no answer showed
		// a process that holds the floor the step, and the floor excludes
		// the operation's own effect
		// (TestScenario_UnseenAPIClockStepBackIsTheOpenExposure, and
		// ...DuringTheSend for a step beside the call).
		r.mu.Lock()
		r.exposed[op] = true
		r.mu.Unlock()
	}
	for _, f := range st.Faults {
		route := money
		if f.Read {
			route = read
		}
		// SAFETY.md's known exposures: processing past the in-processing
		// mark, and a lookup lagging behind a write by more than the
		// settle delay the client waits for before it trusts a not-found.
		if f.Action == pagpolartest.FaultHold && !f.Read && f.Delay > window ||
			f.LookupLag > settleDelay || f.Action == pagpolartest.FaultLookupLag && f.Delay > settleDelay {
			r.mu.Lock()
			r.exposed[op] = true
			r.mu.Unlock()
			exposed = true
		}
		r.srv.Inject(pagpolartest.Fault{Route: route, ExternalReference: ref, Times: 1, Action: f.Action,
			Status: f.Status, Delay: f.Delay, LookupLag: f.LookupLag})
	}
	if st.Truncate {
		r.tap.cutNext(ans)
	}
	return exposed
}

type giveUpKey struct{}

// giveUpHook ends a call's context as soon as its first answer (or the
// loss of it) arrives, when the step asked for it.
func giveUpHook(ctx context.Context, e pagpolar.Event) {
	if e.Kind != pagpolar.EventSent {
		return
	}
	if cancel, ok := ctx.Value(giveUpKey{}).(context.CancelFunc); ok {
		cancel()
	}
}

func (r *runner) report(rep Report) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reports = append(r.reports, rep)
}

func (r *runner) noteKey(op, key string) {
	if key == "" || op == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.keys[op]; !ok {
		r.keys[op] = key
	}
}

// keyFromStore records an operation's key from its record, if any.
func (r *runner) keyFromStore(op string) {
	if rec, err := r.store.Get(context.Background(), pagpolar.RecordID(r.srv.CredentialID, op)); err == nil {
		r.noteKey(op, rec.Key)
	}
}

// keyOf reads the key an error carries.
func keyOf(err error) string {
	var ou *pagpolar.OutcomeUnknownError
	var oe *pagpolar.OperationError
	switch {
	case errors.As(err, &ou):
		return ou.Key
	case errors.As(err, &oe):
		return oe.Key
	}
	return ""
}

// constantMethod reports whether a mutation puts, in what a lookup
// reads, the payment method's lookalike (one constant value) in place of
// the method.
func constantMethod(ms []Mutation) bool {
	for _, m := range ms {
		if m.Edit == EditRekey && m.Field == "payment_method" && (m.Answers == AnyAnswer || m.Answers.isList() || m.Answers == GetSale) {
			return true
		}
	}
	return false
}

// storeLoses reports whether a scenario's key store loses records.
func storeLoses(steps []Step) bool {
	for _, st := range steps {
		if st.Do == DoAmnesia || st.Do == DoForgetOne {
			return true
		}
	}
	return false
}
