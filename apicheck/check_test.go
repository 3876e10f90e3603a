package apicheck

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// The fake's in-processing window, shortened, and a client policy that
// knows it (as exampleenv does): a path that waits the window then takes
// a fraction of a second.
const testWindow = 300 * time.Millisecond

func testPolicy() *pagpolar.RetryPolicy {
	return &pagpolar.RetryPolicy{ProcessingWindow: testWindow, WindowMargin: 50 * time.Millisecond, SettleDelay: 50 * time.Millisecond,
		LookupInterval: 20 * time.Millisecond, MaxRetryAfter: 50 * time.Millisecond, MaxSettleWait: time.Second}
}

func runAgainst(t *testing.T, shapes ...pagpolartest.Shape) (*Report, *pagpolartest.Server) {
	t.Helper()
	srv := pagpolartest.NewServer(t, pagpolartest.WithShapes(shapes...), pagpolartest.WithProcessingWindow(testWindow))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := Run(ctx, Config{BaseURL: srv.URL, CredentialID: srv.CredentialID, Token: pagpolar.StaticToken(srv.Token),
		OfferID: "offer-basic", PlanID: "plan-basic", OtherPlanID: "plan-pro", CardToken: "tok_ok", Policy: testPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	return rep, srv
}

// neverExercised are the shapes no call of the check can show against the
// fake: no 429/503 happens, no card declines, no webhook arrives. The 409
// depends on the race of three sends of one key: the fake answers too
// fast for it to happen reliably, so it may be confirmed or not exercised,
// never anything else.
var neverExercised = []string{"header.retry-after", "http.declined", "status.sale.declined", "webhooks"}

const maybeExercised = "in-progress.409"

// shapeCases: for each shape variant of the fake, every item the check
// must report not confirmed (and how), and its exit code. Every other item
// must be confirmed (or in neverExercised).
var shapeCases = []struct {
	shape pagpolartest.Shape
	want  map[string]Status
	exit  int
}{
	{pagpolartest.ShapeToday, map[string]Status{}, ExitConfirmed},
	{pagpolartest.ShapeMethodHyphen, map[string]Status{"method.credit_card": Differs}, ExitDiffers},
	{pagpolartest.ShapeMethodUpper, map[string]Status{"method.pix": Differs, "method.boleto": Differs, "method.credit_card": Differs}, ExitDiffers},
	{pagpolartest.ShapeMethodCard, map[string]Status{"method.credit_card": Differs}, ExitDiffers},
	{pagpolartest.ShapePlanChangeAsSubscription, map[string]Status{"plan-change.answer": Differs}, ExitUnknown},
	{pagpolartest.ShapeNoPlanChanges, map[string]Status{"subscription.plan_changes": Absent}, ExitDiffers},
	{pagpolartest.ShapeRefundRequested, map[string]Status{"status.refund": Differs}, ExitDiffers}, // a requested refund is an answer (succeeded, decision requested)
	{pagpolartest.ShapeErrorMessageOnly, map[string]Status{"error.shape": Differs, "error.codes": Absent}, ExitDiffers},
	// Only intermediaries' error pages change, and the check meets none
	// (it injects no faults): nothing it can see differs.
	{pagpolartest.ShapeGatewayJSON, map[string]Status{}, ExitConfirmed},
	{pagpolartest.ShapePagedCursor, map[string]Status{"list.shape": Differs}, ExitDiffers},
	{pagpolartest.ShapePagedLink, map[string]Status{"list.shape": Differs}, ExitDiffers},
	{pagpolartest.ShapePagedPages, map[string]Status{"list.shape": Differs}, ExitDiffers},
	{pagpolartest.ShapeTimeZone, allCreatedAt(Differs), ExitDiffers},
	{pagpolartest.ShapeTimeSeconds, allCreatedAt(Differs), ExitDiffers},
	{pagpolartest.ShapeTimeMissing, allCreatedAt(Absent), ExitDiffers},
	{pagpolartest.ShapeAmountReais, map[string]Status{"sale.amount": Differs, "sale.refunded_amount": Differs, "refund.amount": Differs, "subscription.amount": Differs}, ExitDiffers},
	{pagpolartest.ShapeSubscriptionSparse, map[string]Status{"subscription.created_at": Absent, "subscription.payment_method": Absent}, ExitUnknown},
	{pagpolartest.ShapeFieldID, map[string]Status{"sale.identifier": Differs, "refund.identifier": Differs}, ExitDiffers},
	{pagpolartest.ShapeNoDate, map[string]Status{"header.date": Absent, "list.current": Absent}, ExitDiffers},
	// A field that looks like one the SDK knows and is another, in list
	// items or GET answers only: lookups end unknown, never excluded.
	{pagpolartest.ShapeSaleFKID, map[string]Status{"refund.sale_identifier": Differs, "plan_change.subscription_id": Differs}, ExitUnknown},
	{pagpolartest.ShapeListOfferID, map[string]Status{"sale.offer_identifier": Differs, "subscription.offer_identifier": Differs}, ExitUnknown},
	{pagpolartest.ShapeSparseItems, map[string]Status{"sale.payment_method": Differs, "sale.offer_identifier": Differs, "subscription.offer_identifier": Differs, "subscription.payment_method": Differs}, ExitUnknown},
	// The check runs within the first processing window, while the API's
	// clock is steadily an hour ahead: nothing it sees differs.
	{pagpolartest.ShapeDateStepBack, map[string]Status{}, ExitConfirmed},
	// A micro-cache that ignores no-cache serves the refunds list it read
	// for the partial refund to the full refund's pre-send snapshot: that
	// copy cannot be proven current, so the full refund is never sent
	// (and the check says the card sale is left to refund by hand).
	{pagpolartest.ShapeCacheNoAge, map[string]Status{"list.current": Differs, "status.sale.refunded": NotExercised}, ExitUnknown},
	{pagpolartest.ShapeUpgradedBeforeRetry, map[string]Status{"subscription.plan_changes": Differs}, ExitUnknown},
}

func allCreatedAt(st Status) map[string]Status {
	return map[string]Status{"sale.created_at": st, "refund.created_at": st, "subscription.created_at": st, "plan_change.created_at": st}
}

func TestShapeCasesCoverEveryShape(t *testing.T) {
	var got []pagpolartest.Shape
	for _, c := range shapeCases {
		got = append(got, c.shape)
	}
	want := append([]pagpolartest.Shape{pagpolartest.ShapeToday}, pagpolartest.AllShapes()...)
	if !slices.Equal(got, want) {
		t.Fatalf("shapeCases cover %v, the fake has %v", got, want)
	}
}

// TestCheckReportsExactlyTheVariantsDifferences is the check's main promise:
// against the fake in each shape, the check reports exactly that shape's
// differences, confirms everything else it can exercise, and its exit code
// says whether some SDK path ended unknown.
func TestCheckReportsExactlyTheVariantsDifferences(t *testing.T) {
	for _, c := range shapeCases {
		t.Run(string(c.shape), func(t *testing.T) {
			t.Parallel()
			began := time.Now()
			rep, srv := runAgainst(t, c.shape)
			if c.shape == pagpolartest.ShapeDateStepBack && time.Since(began) > testWindow {
				// The run outlived the hour-ahead window (a slow machine)
				// and met the step back wherever it fell: which paths end
				// unknown or unsent then depends on where, so only what
				// must hold wherever it falls is asserted.
				if d := srv.Ledger().Duplicates(pagpolartest.DefaultGroup); len(d) > 0 {
					t.Errorf("the clock's step back made %d operations take two effects: %v", len(d), d)
				}
				t.Logf("the run outlived the hour-ahead window (%s > %s); paths: %s", time.Since(began).Round(time.Millisecond), testWindow, pathsOf(rep))
				return
			}
			for _, it := range rep.Items {
				want, listed := c.want[it.ID]
				switch {
				case listed && it.Status != want:
					t.Errorf("%s: %s (%s), want %s", it.ID, it.Status, it.Observed, want)
				case listed && it.Observed == "" && want != NotExercised:
					t.Errorf("%s: %s without saying what was observed", it.ID, it.Status)
				case listed:
				case slices.Contains(neverExercised, it.ID):
					if it.Status != NotExercised {
						t.Errorf("%s: %s (%s), want not exercised", it.ID, it.Status, it.Observed)
					}
				case it.ID == maybeExercised:
					if it.Status != NotExercised && it.Status != Confirmed {
						t.Errorf("%s: %s (%s)", it.ID, it.Status, it.Observed)
					}
				case it.Status != Confirmed:
					t.Errorf("%s: %s (%s), want confirmed", it.ID, it.Status, it.Observed)
				}
			}
			if got := rep.ExitCode(); got != c.exit {
				t.Errorf("exit %d, want %d; paths: %s", got, c.exit, pathsOf(rep))
			}
			// A path that did not settle is explained by a shape that differs.
			for _, p := range rep.Paths {
				if p.Outcome == OutcomeSettled {
					continue
				}
				explained := false
				for id := range c.want {
					it, _ := rep.Item(id)
					if it.EndsUnknown && strings.Contains(it.SDK, "unknown") {
						explained = true
					}
				}
				if !explained {
					t.Errorf("path %s ended %s (%s) and no differing shape says so", p.Name, p.Outcome, p.Detail)
				}
			}
			checkCleanup(t, rep, srv, c.shape != pagpolartest.ShapeCacheNoAge)
		})
	}
}

func pathsOf(rep *Report) string {
	var s []string
	for _, p := range rep.Paths {
		s = append(s, p.Name+"="+p.Outcome)
	}
	return strings.Join(s, " ")
}

// checkCleanup: the card sale is refunded in full (unless fullRefund is
// false: then it is refunded in part and a note says so), every effect on
// the fake's ledger is in the report's Created list, and every reference
// and key starts with the run's prefix.
func checkCleanup(t *testing.T, rep *Report, srv *pagpolartest.Server, fullRefund bool) {
	t.Helper()
	l := srv.Ledger()
	prefix := "pagpolar-check-" + rep.RunID + "-"
	created := map[string]bool{}
	for _, c := range rep.Created {
		if c.ID != "" && created[c.ID] {
			// The in-progress race's second 2xx named the same sale, and
			// was listed twice.
			t.Errorf("Created lists %s %s twice", c.Kind, c.ID)
		}
		created[c.ID] = true
	}
	var cards int
	for _, s := range l.Sales {
		if !strings.HasPrefix(s.ExternalReference, prefix) {
			t.Errorf("sale %s under reference %q, not the run's prefix %q", s.Identifier, s.ExternalReference, prefix)
		}
		if s.SubscriptionID == "" && !created[s.Identifier] {
			t.Errorf("sale %s is on the ledger, not in the report's Created list", s.Identifier)
		}
		if s.PaymentMethod == "credit_card" {
			cards++
			if fullRefund && s.RefundedAmount != s.Amount {
				t.Errorf("card sale %s: %d of %d centavos refunded, want all", s.Identifier, s.RefundedAmount, s.Amount)
			}
		}
	}
	noted := false
	for _, n := range rep.Notes {
		if strings.HasPrefix(n, "card sale") {
			noted = true
			if fullRefund {
				t.Errorf("note: %s", n)
			}
		}
	}
	if !fullRefund && !noted {
		t.Error("the card sale is not refunded in full, and no note says so")
	}
	if cards != 1 {
		t.Errorf("%d card sales, want 1", cards)
	}
	for _, r := range l.Refunds {
		if !created[r.Identifier] {
			t.Errorf("refund %s is on the ledger, not in the report's Created list", r.Identifier)
		}
	}
	for _, s := range l.Subscriptions {
		if !created[s.ID] {
			t.Errorf("subscription %s is on the ledger, not in the report's Created list", s.ID)
		}
	}
	for _, p := range l.PlanChanges {
		if !created[p.ID] {
			t.Errorf("plan change %s is on the ledger, not in the report's Created list", p.ID)
		}
	}
	keys := map[string]bool{}
	for _, e := range l.Effects() {
		keys[e.Key] = true
	}
	wantRefunds := 2
	if !fullRefund {
		wantRefunds = 1
	}
	if len(l.Sales) == 0 || len(l.Refunds) != wantRefunds || len(l.Subscriptions) != 1 || len(l.PlanChanges) != 2 {
		t.Errorf("ledger: %d sales, %d refunds, %d subscriptions, %d plan changes; want %d refunds, 1 subscription, 2 plan changes",
			len(l.Sales), len(l.Refunds), len(l.Subscriptions), len(l.PlanChanges), wantRefunds)
	}
}

func TestReportListsEveryAssumedShapeOnce(t *testing.T) {
	rep, _ := runAgainst(t)
	seen := map[string]bool{}
	for _, it := range rep.Items {
		if seen[it.ID] {
			t.Errorf("item %s twice", it.ID)
		}
		seen[it.ID] = true
		if it.Assumed == "" || it.SDK == "" {
			t.Errorf("item %s: assumed %q, sdk %q", it.ID, it.Assumed, it.SDK)
		}
	}
	var names []string
	for _, p := range rep.Paths {
		names = append(names, p.Name)
		if strings.HasSuffix(p.Name, "/lost-answer") && p.Detail != "succeeded (lookup)" {
			t.Errorf("%s: %s %s, want settled by the SDK's lookup", p.Name, p.Outcome, p.Detail)
		}
	}
	if len(rep.Notes) != 1 || !strings.HasPrefix(rep.Notes[0], "subscription ") {
		t.Errorf("notes %q, want only the subscription's", rep.Notes)
	}
	sort.Strings(names)
	want := cat(chargePaths, refundPaths, subPaths, pcPaths)
	sort.Strings(want)
	if !slices.Equal(names, want) {
		t.Errorf("paths run %v, want %v", names, want)
	}
}

func TestWithoutCardToken(t *testing.T) {
	srv := pagpolartest.NewServer(t, pagpolartest.WithProcessingWindow(testWindow))
	rep, err := Run(context.Background(), Config{BaseURL: srv.URL, CredentialID: srv.CredentialID, Token: pagpolar.StaticToken(srv.Token),
		OfferID: "offer-basic", PlanID: "plan-basic", OtherPlanID: "plan-pro", Policy: testPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"method.credit_card", "status.sale.paid", "refund.amount", "http.refund"} {
		if it, _ := rep.Item(id); it.Status != NotExercised {
			t.Errorf("%s without a card token: %s, want not exercised", id, it.Status)
		}
	}
	// Shapes the script would show were not exercised: not everything is
	// confirmed, so not exit 0.
	if len(srv.Ledger().Refunds) != 0 || rep.ExitCode() != ExitDiffers {
		t.Errorf("refunds %d, exit %d", len(srv.Ledger().Refunds), rep.ExitCode())
	}
}

func TestRefusesProductionSendingNothing(t *testing.T) {
	srv := pagpolartest.NewServer(t)
	// A recording transport: the refusal must come before any request
	// (none may reach the real host).
	var sent []string
	var mu sync.Mutex
	rec := &http.Client{Transport: rtFunc(func(req *http.Request) (*http.Response, error) {
		mu.Lock()
		sent = append(sent, req.Method+" "+req.URL.String())
		mu.Unlock()
		return nil, errors.New("test: no request may be sent")
	})}
	for _, base := range []string{"https://api.pagpolar.com/v1", "https://api.pagpolar.com./v1", "https://payments.example.com/v1", "http://[::ffff:192.0.2.2%25sandbox]:8080/v1"} {
		cfg := Config{BaseURL: base, CredentialID: "cred", Token: pagpolar.StaticToken("tok"),
			OfferID: "o", PlanID: "p", OtherPlanID: "q", CardToken: "tok_ok", HTTPClient: rec}
		if _, err := Run(context.Background(), cfg); !errors.Is(err, ErrProduction) {
			t.Fatalf("Run against %s: %v, want ErrProduction", base, err)
		}
	}
	mu.Lock()
	if len(sent) != 0 {
		t.Fatalf("requests sent before the refusal: %q", sent)
	}
	mu.Unlock()
	cfg := Config{CardToken: "tok_ok"}
	// AllowProduction lifts the refusal (shown against the fake: the
	// check itself does not know a host it trusts from one it does not).
	cfg.BaseURL, cfg.CredentialID, cfg.Token, cfg.AllowProduction = srv.URL, srv.CredentialID, pagpolar.StaticToken(srv.Token), true
	cfg.OfferID, cfg.PlanID, cfg.OtherPlanID = "offer-basic", "plan-basic", "plan-pro"
	cfg.Policy = testPolicy()
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatalf("with AllowProduction: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "Config.BaseURL, Config.CredentialID, Config.OfferID, Config.PlanID, Config.OtherPlanID, Config.Token not set"},
		{Config{BaseURL: "http://127.0.0.1:1/v1", CredentialID: "c", Token: pagpolar.StaticToken("t"), OfferID: "o", PlanID: "p", OtherPlanID: "p"}, "both \"p\""},
		{Config{BaseURL: "ftp://127.0.0.1/v1", CredentialID: "c", Token: pagpolar.StaticToken("t"), OfferID: "o", PlanID: "p", OtherPlanID: "q"}, "want http(s)://"},
	} {
		_, err := Run(context.Background(), c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Run(%+v): %v, want %q", c.cfg, err, c.want)
		}
	}
}

func TestUnreachableOrRefusedCredential(t *testing.T) {
	srv := pagpolartest.NewServer(t)
	cfg := Config{BaseURL: srv.URL, CredentialID: srv.CredentialID, Token: pagpolar.StaticToken("wrong"),
		OfferID: "offer-basic", PlanID: "plan-basic", OtherPlanID: "plan-pro"}
	if _, err := Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "GET /sales answered 401: the credential was refused") || !errors.Is(err, ErrCredentialRefused) {
		t.Errorf("wrong token: %v", err)
	}
	if n := len(srv.Ledger().Sales); n != 0 {
		t.Errorf("%d sales after a refused credential", n)
	}
	cfg.BaseURL = "http://127.0.0.1:1/v1"
	if _, err := Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "cannot reach 127.0.0.1:1") || !errors.Is(err, ErrUnreachable) {
		t.Errorf("unreachable: %v", err)
	}
}

// failingReads fails every GET /sales/{id} without an answer.
type failingReads struct{ base http.RoundTripper }

func (f failingReads) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/sales/") {
		return nil, errors.New("connection reset by peer (test)")
	}
	return f.base.RoundTrip(req)
}

// Requests left without an answer make the run incomplete: exit 2, and a
// note says so.
func TestNoAnswerIsIncomplete(t *testing.T) {
	srv := pagpolartest.NewServer(t, pagpolartest.WithProcessingWindow(testWindow))
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	rep, err := Run(context.Background(), Config{BaseURL: srv.URL, CredentialID: srv.CredentialID, Token: pagpolar.StaticToken(srv.Token),
		OfferID: "offer-basic", PlanID: "plan-basic", OtherPlanID: "plan-pro", CardToken: "tok_ok", Policy: testPolicy(),
		HTTPClient: &http.Client{Transport: failingReads{tr}}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.NoAnswer == 0 || rep.ExitCode() != ExitUsage {
		t.Fatalf("no answer %d, exit %d", rep.NoAnswer, rep.ExitCode())
	}
	found := false
	for _, n := range rep.Notes {
		found = found || strings.Contains(n, "got no answer")
	}
	if !found {
		t.Errorf("notes %q", rep.Notes)
	}
}

// With the fake holding the race's key in processing and rate-limiting one
// read, the shapes only such answers show are exercised too: the 409's
// documented message and Retry-After. Everything else stays confirmed.
func TestInProgressAndRetryAfterExercised(t *testing.T) {
	// The documented 60 s window and the SDK's default policy: the hold
	// (2 s) ends long before the key's mark would, and the other two
	// sends of the race need only reach the fake during it.
	srv := pagpolartest.NewServer(t)
	srv.Inject(pagpolartest.Fault{Action: pagpolartest.FaultHold, Route: "pix", ExternalReference: "pagpolar-check-hold-in-progress", Delay: 2 * time.Second, Times: 1})
	srv.Inject(pagpolartest.Fault{Action: pagpolartest.FaultRateLimit, Route: "get_sale", Times: 1, Delay: time.Second})
	rep, err := Run(context.Background(), Config{BaseURL: srv.URL, CredentialID: srv.CredentialID, Token: pagpolar.StaticToken(srv.Token),
		OfferID: "offer-basic", PlanID: "plan-basic", OtherPlanID: "plan-pro", CardToken: "tok_ok", RunID: "hold"})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range rep.Items {
		switch {
		case it.ID == "in-progress.409" || it.ID == "header.retry-after":
			if it.Status != Confirmed {
				t.Errorf("%s: %s (%s), want confirmed", it.ID, it.Status, it.Observed)
			}
		case slices.Contains(neverExercised, it.ID):
		case it.Status != Confirmed:
			t.Errorf("%s: %s (%s), want confirmed", it.ID, it.Status, it.Observed)
		}
	}
	if rep.ExitCode() != ExitConfirmed {
		t.Errorf("exit %d: %s", rep.ExitCode(), pathsOf(rep))
	}
}

// Without GET /subscriptions?external_reference= (the assumed route), a
// subscribe whose answer is lost ends unknown: the check says which route
// is absent and that the path ends unknown.
func TestWithoutSubscriptionLookupRoute(t *testing.T) {
	srv := pagpolartest.NewServer(t, pagpolartest.WithProcessingWindow(testWindow), pagpolartest.WithoutSubscriptionLookup())
	rep, err := Run(context.Background(), Config{BaseURL: srv.URL, CredentialID: srv.CredentialID, Token: pagpolar.StaticToken(srv.Token),
		OfferID: "offer-basic", PlanID: "plan-basic", OtherPlanID: "plan-pro", CardToken: "tok_ok", Policy: testPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	it, _ := rep.Item("route.subscriptions-by-reference")
	if it.Status != Absent || !it.EndsUnknown || !strings.Contains(it.SDK, "subscribe/lost-answer") {
		t.Errorf("route.subscriptions-by-reference: %+v", it)
	}
	if rep.ExitCode() != ExitUnknown {
		t.Errorf("exit %d: %s", rep.ExitCode(), pathsOf(rep))
	}
}
