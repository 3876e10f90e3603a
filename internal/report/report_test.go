package report

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	pagpolar "github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

func TestSummarizeNearestRank(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	got := Summarize(d)
	if got.N != 100 || got.P50MS != 50 || got.P99MS != 99 || got.MaxMS != 100 {
		t.Fatalf("Summarize = %+v, want n=100 p50=50 p99=99 max=100", got)
	}
	if one := Summarize([]time.Duration{7 * time.Millisecond}); one.P50MS != 7 || one.P99MS != 7 {
		t.Fatalf("one value: %+v", one)
	}
	if (Summarize(nil) != Latency{}) {
		t.Fatal("no values must give a zero summary")
	}
}

func TestCollectorCountsCauses(t *testing.T) {
	c := NewCollector()
	ctx := context.Background()
	for _, e := range []pagpolar.Event{
		{Kind: pagpolar.EventSaved, OperationID: "a"},
		{Kind: pagpolar.EventAttempt, OperationID: "a", Cause: "429"},
		{Kind: pagpolar.EventRetry, OperationID: "a", Cause: "429"},
		{Kind: pagpolar.EventAttempt, OperationID: "a", Cause: "503"}, // the API's own: a retry follows
		{Kind: pagpolar.EventRetry, OperationID: "a", Cause: "503"},
		{Kind: pagpolar.EventAttempt, OperationID: "b", Cause: "503"}, // a gateway's: a lookup follows
		{Kind: pagpolar.EventLookup, OperationID: "b"},
		{Kind: pagpolar.EventAttempt, OperationID: "c", Cause: "transport"},
		{Kind: pagpolar.EventLookup, OperationID: "c"},
		{Kind: pagpolar.EventBudget, OperationID: "d", Cause: "429"},
		{Kind: pagpolar.EventReplay, OperationID: "e"},
	} {
		c.Observe(ctx, e)
	}
	s := c.Snapshot()
	if s.Attempts != 4 || s.Retries["429"] != 1 || s.Retries["503"] != 1 || s.Ambiguous["503"] != 1 ||
		s.Ambiguous["transport"] != 1 || s.Lookups != 2 || s.Budget != 1 || s.Replays != 1 {
		t.Fatalf("snapshot %+v", s)
	}
	var sum Stats
	sum.Add(s)
	sum.Add(s)
	if sum.Attempts != 8 || sum.Retries.Total() != 4 {
		t.Fatalf("Add: %+v", sum)
	}
}

// TestVerifyAgainstTheFake drives the fake with plain requests (one sale,
// a duplicate, a declined sale) and checks each verdict of Verify.
func TestVerifyAgainstTheFake(t *testing.T) {
	srv := pagpolartest.NewServer(t)
	c, err := pagpolar.NewClient(srv.CredentialID, pagpolar.StaticToken(srv.Token), pagpolar.WithBaseURL(srv.URL), pagpolar.WithStore(keystore.NewMemory()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cust := pagpolar.Customer{Name: "Ana", Email: "ana@example.com", Document: "52998224725"}
	one, err := c.Payments.Pix(ctx, pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: "o1", Customer: cust})
	if err != nil {
		t.Fatal(err)
	}
	// Two operation IDs for one order: the ledger gets two sales for o2.
	two, err := c.Payments.Pix(ctx, pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: "o2", Customer: cust})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Payments.Pix(ctx, pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: "o2", Customer: cust, OperationID: "again-o2"}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Payments.CreditCard(ctx, pagpolar.CreditCardParams{OfferID: "offer-basic", ExternalReference: "o3", Customer: cust, CardToken: "tok_decline_x"})
	if !errors.Is(err, pagpolar.ErrDeclined) {
		t.Fatalf("want a decline, got %v", err)
	}
	get := func(id string) keystore.Record {
		r, err := c.Store().Get(ctx, pagpolar.RecordID(srv.CredentialID, id))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	ledger := srv.Ledger()

	ok := Verify(srv.CredentialID, ledger, []Expected{
		{OperationID: "pix:o1", Record: get("pix:o1"), Found: true, Method: "pix", ExternalReference: "o1"},
		{OperationID: "credit_card:o3", Record: get("credit_card:o3"), Found: true, Method: "credit_card", ExternalReference: "o3"},
	})
	if ok.OK() {
		t.Fatal("o2's two sales belong to no expected operation: want orphans")
	}
	if len(ok.Orphans) != 1 || len(ok.Duplicates) != 0 || len(ok.FalseFailures)+len(ok.WithoutEffect) != 0 || len(ok.Unfinished) != 0 {
		t.Fatalf("check %+v", ok)
	}
	if ok.Declined != 1 || ok.Effects != 3 || ok.States["succeeded"] != 1 || ok.States["failed"] != 1 {
		t.Fatalf("counts %+v", ok)
	}

	rec2 := get("pix:o2")
	lost := rec2
	lost.ResultRef = "sale_not_in_ledger"
	pending := get("pix:o1")
	pending.State = keystore.StatePending
	bad := Verify(srv.CredentialID, ledger, []Expected{
		{OperationID: "pix:o2", Record: rec2, Found: true, Method: "pix", ExternalReference: "o2"},
		{OperationID: "pix:o2-lost", Record: lost, Found: true, Method: "pix", ExternalReference: "o2"},
		{OperationID: "pix:o1", Record: pending, Found: true, Method: "pix", ExternalReference: "o1"},
		{OperationID: "pix:o9", Method: "pix", ExternalReference: "o9"},
		{OperationID: "boleto:o1", Record: keystore.Record{State: keystore.StateFailed}, Found: true, Method: "pix", ExternalReference: "o1"},
	})
	if len(bad.Duplicates) != 2 || !strings.Contains(bad.Duplicates[0], two.Sale.ID) {
		t.Errorf("duplicates %v, want o2's two sales (twice: two operations claim the group)", bad.Duplicates)
	}
	if len(bad.Unfinished) != 2 {
		t.Errorf("unfinished %v, want the pending o1 and the missing o9", bad.Unfinished)
	}
	if len(bad.WithoutEffect) != 1 || len(bad.FalseFailures) != 1 || !strings.Contains(bad.FalseFailures[0], one.Sale.ID) {
		t.Errorf("without effect %v, false failures %v: want the wrong ref, and the failed record with a sale", bad.WithoutEffect, bad.FalseFailures)
	}
	if bad.OK() {
		t.Fatal("a bad run reported OK")
	}

	// The report prints the verdicts and round-trips as JSON.
	rep := &Report{Mode: "demo", Check: bad, Obtained: Counts{"response": 2}}
	var txt bytes.Buffer
	if err := rep.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"pagpolar demo: FAILED", "charged twice (two successful effects for one operation)  2   <-- must be 0", "the API's answer 2"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, txt.String())
		}
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Check.Duplicates) != 2 {
		t.Fatalf("JSON round trip: %v %+v", err, back.Check)
	}
}

// TestReportJSONHasNoNull: empty lists and counters are written [] and {},
// so that a script can iterate over any of them without a null check.
func TestReportJSONHasNoNull(t *testing.T) {
	for _, rep := range []*Report{{Mode: "demo"}, {Mode: "demo", Webhooks: &Webhooks{}}, {Mode: "chaos", Chaos: &ChaosStats{}}} {
		var js bytes.Buffer
		if err := rep.WriteJSON(&js); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(js.String(), "null") {
			t.Errorf("%s report has a null:\n%s", rep.Mode, js.String())
		}
		// A list of reports (demo -shapes all) too.
		b, err := json.Marshal([]*Report{rep})
		if err != nil || strings.Contains(string(b), "null") {
			t.Errorf("list of reports: %v %s", err, b)
		}
	}
}

// TestReportTextSpeaksPlainly: the text report names no internal jargon
// without saying what it means, says what the shortened window stands for,
// and pluralises.
func TestReportTextSpeaksPlainly(t *testing.T) {
	rep := &Report{Mode: "demo", WindowMS: 1000, Store: "memory:",
		Settling:      Settling{LeftUnsettled: 1, SettledByReissue: 1, ReconcileRounds: 1},
		SDK:           Stats{Retries: Counts{"trusted-not-found": 3}, Ambiguous: Counts{"transport": 2}},
		FaultsApplied: Counts{"commit_drop_release": 4}}
	var b bytes.Buffer
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	txt := b.String()
	for _, want := range []string{"standing in for the API's 60 s", "proven absent by lookup 3", "connection lost or timed out 2",
		"the key released (a blind resend would charge again) [commit_drop_release]", "1 operation had", "after 1 round of"} {
		if !strings.Contains(txt, want) {
			t.Errorf("text lacks %q:\n%s", want, txt)
		}
	}
	for _, jargon := range []string{"trusted-not-found", "effects of no operation", "1 rounds", "re-issue"} {
		if strings.Contains(txt, jargon) {
			t.Errorf("text says %q:\n%s", jargon, txt)
		}
	}
}

func TestTrafficCountsFaults(t *testing.T) {
	l := pagpolartest.Ledger{Requests: []pagpolartest.RequestLog{
		{Method: "POST", CredentialID: "c", Fault: "latency+commit_then_drop"},
		{Method: "GET", CredentialID: "c"},
		{Method: "POST", CredentialID: "other", Fault: "gateway"},
	}}
	r, f := Traffic(l, "c", 2)
	if r.Total != 2 || r.Posts != 1 || r.Reads != 1 || r.PerOrder != 1 || f["latency"] != 1 || f["commit_then_drop"] != 1 || f["gateway"] != 0 {
		t.Fatalf("traffic %+v faults %v", r, f)
	}
}

// TestReportWebhooks: the webhook phase's counts are printed as measured,
// and a request sent or a non-success settled by an event fails the run.
func TestReportWebhooks(t *testing.T) {
	w := &Webhooks{UnknownBefore: 12, Settled: 8, StillUnknown: 4, CarriedOn: 8, Events: 316, Deliveries: 318}
	rep := &Report{Mode: "demo", Webhooks: w}
	var b bytes.Buffer
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"8 unknown outcomes settled by webhook events, 4 still unknown", "316 events (318 deliveries)", "0 requests reached the API meanwhile,", "then 8 orders went on"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
	if !rep.OK() {
		t.Fatal("a clean webhook phase fails the run")
	}
	for _, bad := range []Webhooks{{UnknownBefore: 1, Requests: 1}, {UnknownBefore: 1, Other: []string{"pix:o-1: unknown, then failed"}}} {
		rep.Webhooks = &bad
		b.Reset()
		_ = rep.WriteText(&b)
		if rep.OK() || !strings.Contains(b.String(), "<-- must be 0") {
			t.Errorf("%+v: want a failed run with the line marked:\n%s", bad, b.String())
		}
	}
}

// TestWriteTextEndsWithTheVerdict: the verdict is the text's last line,
// with the checks just above it, so the first screen a run leaves shows
// them; each CheckLine is printed.
func TestWriteTextEndsWithTheVerdict(t *testing.T) {
	for _, c := range []struct {
		rep  *Report
		want string
	}{
		{&Report{Mode: "demo"}, "pagpolar demo: OK: no order was charged twice, and every operation has an outcome"},
		{&Report{Mode: "chaos", Check: Check{Duplicates: []string{"o1: sale_1, sale_2"}}}, "pagpolar chaos: FAILED: see the lines marked <-- above"},
	} {
		var txt bytes.Buffer
		if err := c.rep.WriteText(&txt); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimRight(txt.String(), "\n"), "\n")
		if last := lines[len(lines)-1]; last != c.want {
			t.Errorf("last line %q, want %q", last, c.want)
		}
		checks := c.rep.CheckLines()
		above := strings.Join(lines[len(lines)-2-len(checks):len(lines)-2], "\n")
		for _, cl := range checks {
			if !strings.Contains(above, cl.Label) {
				t.Errorf("check %q is not just above the verdict:\n%s", cl.Label, above)
			}
		}
	}
}
