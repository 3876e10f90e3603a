package pagpolar

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// Tests run the real engine against the fake with every window shortened,
// on both sides, so ambiguity is settled in milliseconds rather than a
// minute. The relations between the windows are the production ones.
const (
	testWindow = 300 * time.Millisecond // the fake's in-processing mark
)

// quiet is the tests' logger: the SDK's warnings are expected in most of
// them (run with -v and a logger of your own to see them).
var quiet = slog.New(slog.DiscardHandler)

func testPolicy() RetryPolicy {
	return RetryPolicy{
		MaxAttempts:          6,
		NewBackOff:           Exponential(5*time.Millisecond, 40*time.Millisecond),
		MaxRetryAfter:        20 * time.Millisecond,
		AttemptTimeout:       2 * time.Second,
		ProcessingWindow:     testWindow,
		WindowMargin:         50 * time.Millisecond,
		SettleDelay:          60 * time.Millisecond,
		LookupInterval:       20 * time.Millisecond,
		MaxSettleWait:        5 * time.Second,
		LeaseTTL:             5 * time.Second,
		LeaseWaitInterval:    5 * time.Millisecond,
		ServerClockTolerance: time.Millisecond,
	}
}

type fixture struct {
	srv   *pagpolartest.Server
	c     *Client
	store *keystore.Memory
	ctx   context.Context
}

func newFixture(t *testing.T, srvOpts []pagpolartest.Option, opts ...Option) *fixture {
	t.Helper()
	clk := pagpolartest.NewClock()
	srv := pagpolartest.NewServer(t, append([]pagpolartest.Option{pagpolartest.WithClock(clk), pagpolartest.WithProcessingWindow(testWindow)}, srvOpts...)...)
	store := keystore.NewMemoryWithClock(clk)
	all := append([]Option{WithBaseURL(srv.URL), WithStore(store), WithClock(clk), WithRetryPolicy(testPolicy()), WithLogger(quiet), WithHook(endAtAnswerHook),
		WithHTTPClient(&http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}})}, opts...)
	c, err := NewClient(srv.CredentialID, StaticToken(srv.Token), all...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return &fixture{srv: srv, c: c, store: store, ctx: ctx}
}

// client builds a second client for the same credential (another worker,
// another host) with its own options.
func (f *fixture) client(t *testing.T, opts ...Option) *Client {
	t.Helper()
	all := append([]Option{WithBaseURL(f.srv.URL), WithClock(f.srv.Clock), WithRetryPolicy(testPolicy()), WithLogger(quiet), WithHook(endAtAnswerHook),
		WithStore(keystore.NewMemoryWithClock(f.srv.Clock))}, opts...) // another host, its own store, unless opts give one
	c, err := NewClient(f.srv.CredentialID, StaticToken(f.srv.AddToken(f.srv.CredentialID)), all...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// assertNoDuplicates is the assertion that matters: no operation got two
// successful effects.
func (f *fixture) assertNoDuplicates(t *testing.T) {
	t.Helper()
	if d := f.srv.Ledger().Duplicates(pagpolartest.DefaultGroup); len(d) > 0 {
		for g, effs := range d {
			t.Errorf("operation %s got %d successful effects", g, len(effs))
		}
	}
}

func (f *fixture) successful(kind string) int {
	n := 0
	for _, e := range f.srv.Ledger().Effects() {
		if e.Kind == kind && e.Successful && !e.Renewal {
			n++
		}
	}
	return n
}

func (f *fixture) posts(route string) int {
	n := 0
	for _, r := range f.srv.Ledger().Requests {
		if r.Method == http.MethodPost && r.Route == route {
			n++
		}
	}
	return n
}

// route is one money route driven through the SDK, with what a test needs
// to set it up and check it.
type route struct {
	name   string // the fake's route name
	effect string // the ledger effect kind it creates
	setup  func(t *testing.T, f *fixture) any
	call   func(f *fixture, c *Client, state any, ref string) (id string, op Operation, err error)
	card   bool
}

func customer() Customer { return goodCustomer }

var routes = []route{
	{name: "pix", effect: "sale", call: func(f *fixture, c *Client, _ any, ref string) (string, Operation, error) {
		r, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: ref, Customer: customer()})
		if err != nil {
			return "", Operation{}, err
		}
		return r.Sale.ID, r.Operation, nil
	}},
	{name: "boleto", effect: "sale", call: func(f *fixture, c *Client, _ any, ref string) (string, Operation, error) {
		r, err := c.Payments.Boleto(f.ctx, BoletoParams{OfferID: "offer-premium", ExternalReference: ref, Customer: customer(), DueDate: time.Date(2027, 1, 10, 0, 0, 0, 0, time.UTC)})
		if err != nil {
			return "", Operation{}, err
		}
		return r.Sale.ID, r.Operation, nil
	}},
	{name: "credit_card", effect: "sale", card: true, call: func(f *fixture, c *Client, _ any, ref string) (string, Operation, error) {
		r, err := c.Payments.CreditCard(f.ctx, CreditCardParams{OfferID: "offer-basic", ExternalReference: ref, Customer: customer(), CardToken: "tok_ok", Installments: 3})
		if err != nil {
			return "", Operation{}, err
		}
		return r.Sale.ID, r.Operation, nil
	}},
	{name: "subscribe", effect: "subscription", card: true, call: func(f *fixture, c *Client, _ any, ref string) (string, Operation, error) {
		r, err := c.Subscriptions.Subscribe(f.ctx, SubscribeParams{OfferID: "plan-basic", ExternalReference: ref, Customer: customer(), PaymentMethod: "credit_card", CardToken: "tok_ok"})
		if err != nil {
			return "", Operation{}, err
		}
		return r.Subscription.ID, r.Operation, nil
	}},
	{name: "plan_change", effect: "plan_change",
		setup: func(t *testing.T, f *fixture) any {
			r, err := f.c.Subscriptions.Subscribe(f.ctx, SubscribeParams{OfferID: "plan-basic", ExternalReference: "sub-setup", Customer: customer(), PaymentMethod: "pix"})
			if err != nil {
				t.Fatalf("setup subscribe: %v", err)
			}
			return r.Subscription.ID
		},
		call: func(f *fixture, c *Client, state any, ref string) (string, Operation, error) {
			r, err := c.Subscriptions.ChangePlan(f.ctx, ChangePlanParams{OperationID: "pc-" + ref, SubscriptionID: state.(string), NewOfferID: "plan-pro"})
			if err != nil {
				return "", Operation{}, err
			}
			return r.PlanChange.ID, r.Operation, nil
		}},
	{name: "refund", effect: "refund",
		setup: func(t *testing.T, f *fixture) any {
			r, err := f.c.Payments.CreditCard(f.ctx, CreditCardParams{OfferID: "offer-premium", ExternalReference: "refund-setup", Customer: customer(), CardToken: "tok_ok"})
			if err != nil {
				t.Fatalf("setup charge: %v", err)
			}
			return r.Sale.ID
		},
		call: func(f *fixture, c *Client, state any, ref string) (string, Operation, error) {
			r, err := c.Refunds.Create(f.ctx, RefundParams{OperationID: "rf-" + ref, SaleID: state.(string), Amount: 1500})
			if err != nil {
				return "", Operation{}, err
			}
			return r.Refund.ID, r.Operation, nil
		}},
}

// faultRef is the Fault.ExternalReference that targets a route's call.
func faultRef(r route, state any, ref string) string {
	switch r.name {
	case "refund", "plan_change":
		return state.(string)
	}
	return ref
}

// concurrently runs n calls at once and returns their results.
func concurrently(n int, fn func(i int) (string, error)) ([]string, []error) {
	ids, errs := make([]string, n), make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			ids[i], errs[i] = fn(i)
		}(i)
	}
	close(start)
	wg.Wait()
	return ids, errs
}

func mustState(t *testing.T, f *fixture, c *Client, opID string, want keystore.State) keystore.Record {
	t.Helper()
	rec, err := f.store.Get(context.Background(), c.storeID(opID))
	if err != nil {
		t.Fatalf("record %s: %v", opID, err)
	}
	if rec.State != want {
		t.Fatalf("record %s is %s, want %s (error %q)", opID, rec.State, want, rec.Error)
	}
	return rec
}

func isUnknown(err error) bool { return errors.Is(err, ErrOutcomeUnknown) }

func containsFold(s, sub string) bool {
	return sub != "" && strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

// warm gives c what a client that has been running has: a recent Date of
// the API's and a validated view of its clock (servertime.go), so that its
// charges are sent without a pre-send snapshot. Tests of the settle path
// use it to inject lookup faults before the first send.
func (f *fixture) warm(t *testing.T, c *Client) {
	t.Helper()
	if _, err := c.Payments.SalesByExternalReference(f.ctx, "warm-up"); err != nil {
		t.Fatalf("warm-up read: %v", err)
	}
	c.srvClock.mu.Lock()
	c.srvClock.validated = true
	c.srvClock.mu.Unlock()
}

// longCtx is the context of the tests that make hundreds of calls: a
// bound of its own, longer than the fixture's, for loaded -race runs.
func longCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// warmClock is warm without a request: a Date of the fake's clock, and the
// view validated.
func warmClock(f *fixture, c *Client) {
	now := c.clock.Now()
	c.srvClock.observe(http.Header{"Date": {f.srv.Clock.Now().UTC().Format(http.TimeFormat)}}, now, now, 0)
	c.srvClock.mu.Lock()
	c.srvClock.validated = true
	c.srvClock.mu.Unlock()
}

// endAtAnswerKey marks a call's context as ending at its first answer.
type endAtAnswerKey struct{}

// endAtAnswer is a context for a call whose process ends once its first
// send is answered (or its transport fails): the call meets its fault and
// stops there, however long a loaded machine spent before the send (a
// fixed 100 ms ended some calls before they sent, on a loaded -race run).
// The fixture's clients have endAtAnswerHook; a client given a hook of its
// own calls it from there. It is bounded on its own.
func endAtAnswer(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(parent, 30*time.Second)
	return context.WithValue(ctx, endAtAnswerKey{}, cancel), cancel
}

// endAtAnswerHook ends a call made under endAtAnswer at its first answer.
func endAtAnswerHook(ctx context.Context, e Event) {
	if cancel, ok := ctx.Value(endAtAnswerKey{}).(context.CancelFunc); ok && e.Kind == EventSent {
		cancel()
	}
}

// crashedInSnapshot turns a never-sent operation's not_executed record
// (a first send stopped at its snapshot) back into what a process that
// crashed in that snapshot leaves: pending, no attempt.
func crashedInSnapshot(t *testing.T, st keystore.Store, id string) {
	t.Helper()
	ctx := context.Background()
	rec, err := st.Acquire(ctx, id, "crashed", time.Minute)
	if err != nil || rec.State != keystore.StateNotExecuted || rec.Attempts != 0 {
		t.Fatalf("record %s: %s, %d attempts (%v); want not_executed, never sent", id, rec.State, rec.Attempts, err)
	}
	rec.State, rec.Error = keystore.StatePending, ""
	if rec, err = st.Update(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := st.Release(ctx, rec.OperationID, rec.LeaseToken); err != nil {
		t.Fatal(err)
	}
}
