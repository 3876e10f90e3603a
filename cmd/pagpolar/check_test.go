package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/apicheck"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// simEnv points the check at a sim's printed variables.
func simEnv(t *testing.T, vars map[string]string) {
	t.Helper()
	for _, k := range []string{"PAGPOLAR_BASE_URL", "PAGPOLAR_CREDENTIAL_ID", "PAGPOLAR_TOKEN", "PAGPOLAR_OFFER_ID", "PAGPOLAR_PLAN_ID", "PAGPOLAR_OTHER_PLAN_ID"} {
		t.Setenv(k, vars[k])
	}
	t.Setenv("PAGPOLAR_CARD_TOKEN", "")
}

func runCheckCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), append([]string{"check"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// The command against `pagpolar sim` as a team would run it: every shape
// confirmed against the default sim (exit 0), exactly the variant's field
// against -shapes method-hyphen (exit 1: the SDK reads "credit-card"), and
// an SDK path ending unknown against -shapes plan-change-as-subscription
// (exit 3: a plan change whose answer was lost cannot be told from the
// subscription alone).
func TestCheckAgainstSim(t *testing.T) {
	for _, c := range []struct {
		shapes   string
		exit     int
		differ   []string
		unknowns []string
	}{
		{"today", apicheck.ExitConfirmed, nil, nil},
		{"method-hyphen", apicheck.ExitDiffers, []string{"method.credit_card"}, nil},
		{"plan-change-as-subscription", apicheck.ExitUnknown, []string{"plan-change.answer"}, nil},
	} {
		t.Run(c.shapes, func(t *testing.T) {
			vars, _, _ := startSim(t, "-addr", "127.0.0.1:0", "-processing-window", "300ms", "-shapes", c.shapes)
			simEnv(t, vars)
			code, out, errs := runCheckCmd(t, "-card-token", "tok_ok", "-processing-window", "300ms", "-json")
			if code != c.exit {
				t.Fatalf("exit %d, want %d\nstderr: %s\nstdout: %.3000s", code, c.exit, errs, out)
			}
			var rep apicheck.Report
			if err := json.Unmarshal([]byte(out), &rep); err != nil {
				t.Fatalf("-json output: %v\n%.2000s", err, out)
			}
			var differ []string
			for _, it := range rep.Items {
				if it.Status == apicheck.Differs || it.Status == apicheck.Absent {
					differ = append(differ, it.ID)
				}
			}
			if !slices.Equal(differ, c.differ) {
				t.Errorf("differs %v, want %v", differ, c.differ)
			}
			for _, name := range c.unknowns {
				found := false
				for _, p := range rep.Paths {
					found = found || (p.Name == name && p.Outcome == apicheck.OutcomeUnknown)
				}
				if !found {
					t.Errorf("path %s did not end unknown: %+v", name, rep.Paths)
				}
			}
			if len(rep.Created) == 0 {
				t.Error("the report lists nothing created")
			}
			// The table says the same.
			code, table, _ := runCheckCmd(t, "-card-token", "tok_ok", "-processing-window", "300ms")
			if code != c.exit {
				t.Errorf("table run: exit %d, want %d", code, c.exit)
			}
			for _, id := range c.differ {
				if !strings.Contains(table, "  "+id+": differs") {
					t.Errorf("the table does not list %s as differing:\n%s", id, table)
				}
			}
			if len(c.differ) == 0 && !strings.Contains(table, "Every shape the check exercised is as the SDK assumes.") {
				t.Errorf("table:\n%s", table)
			}
			if !strings.Contains(table, "Created on the API") || !strings.Contains(table, "sale_") {
				t.Errorf("the table does not print what was created:\n%s", table)
			}
		})
	}
}

// recordingTransport records every request the check sends and answers
// none (nothing leaves the machine).
type recordingTransport struct {
	mu   sync.Mutex
	sent []string
}

func (rt *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rt.mu.Lock()
	rt.sent = append(rt.sent, req.Method+" "+req.URL.Redacted())
	rt.mu.Unlock()
	return nil, errors.New("test: recording transport sends nothing")
}

func (rt *recordingTransport) requests() []string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return append([]string(nil), rt.sent...)
}

// useRecordingTransport makes the command's requests go to a recorder.
func useRecordingTransport(t *testing.T) *recordingTransport {
	t.Helper()
	rt := &recordingTransport{}
	checkTransport = rt
	t.Cleanup(func() { checkTransport = nil })
	return rt
}

func TestCheckRefusesProduction(t *testing.T) {
	rt := useRecordingTransport(t)
	for _, base := range []string{"https://api.pagpolar.com/v1", "https://api.pagpolar.com./v1", "https://payments.example.com/v1", "http://[::ffff:192.0.2.2%25sandbox]:8080/v1"} {
		t.Setenv("PAGPOLAR_BASE_URL", base)
		t.Setenv("PAGPOLAR_CREDENTIAL_ID", "cred")
		t.Setenv("PAGPOLAR_TOKEN", "tok")
		code, out, errs := runCheckCmd(t, "-offer", "o", "-plan", "p", "-other-plan", "q")
		if code != apicheck.ExitUsage || !strings.Contains(errs, "looks like production") || !strings.Contains(errs, "-i-know-this-is-production") || out != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", base, code, out, errs)
		}
	}
	if sent := rt.requests(); len(sent) != 0 {
		t.Fatalf("requests sent before the refusal: %q", sent)
	}
	// With the flag the check goes ahead: its first request (the
	// preflight read) reaches the transport, which sends nothing.
	t.Setenv("PAGPOLAR_BASE_URL", "https://api.pagpolar.com/v1")
	code, _, errs := runCheckCmd(t, "-offer", "o", "-plan", "p", "-other-plan", "q", "-i-know-this-is-production")
	if code != apicheck.ExitUsage || !strings.Contains(errs, "cannot reach") {
		t.Errorf("with -i-know-this-is-production: exit %d, stderr %q", code, errs)
	}
	if sent := rt.requests(); len(sent) != 1 || !strings.HasPrefix(sent[0], "GET https://api.pagpolar.com/v1/sales?") {
		t.Errorf("with -i-know-this-is-production: requests %q, want the one preflight GET", sent)
	}
}

// A base URL with user information is refused before anything is
// sent, and its password is not printed.
func TestCheck_BaseURLUserinfoIsRefused(t *testing.T) {
	rt := useRecordingTransport(t)
	for _, base := range []string{"http://user:hunter2secret@127.0.0.1:1/v1", "https://user:hunter2secret@api-staging.example.com/v1?k=hunter2secret"} {
		t.Setenv("PAGPOLAR_BASE_URL", base)
		t.Setenv("PAGPOLAR_CREDENTIAL_ID", "cred")
		t.Setenv("PAGPOLAR_TOKEN", "tok")
		code, out, errs := runCheckCmd(t, "-offer", "o", "-plan", "p", "-other-plan", "q")
		if code != apicheck.ExitUsage || strings.Contains(out+errs, "hunter2secret") || !strings.Contains(errs, "user information") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", base, code, out, errs)
		}
	}
	if sent := rt.requests(); len(sent) != 0 {
		t.Errorf("requests sent: %q", sent)
	}
}

func TestCheckUsage(t *testing.T) {
	for _, k := range []string{"PAGPOLAR_BASE_URL", "PAGPOLAR_CREDENTIAL_ID", "PAGPOLAR_TOKEN", "PAGPOLAR_OFFER_ID", "PAGPOLAR_PLAN_ID", "PAGPOLAR_OTHER_PLAN_ID"} {
		t.Setenv(k, "")
	}
	code, _, errs := runCheckCmd(t)
	if code != apicheck.ExitUsage || !strings.Contains(errs, "$PAGPOLAR_BASE_URL, $PAGPOLAR_CREDENTIAL_ID, $PAGPOLAR_TOKEN, -offer ($PAGPOLAR_OFFER_ID)") {
		t.Errorf("no variables: exit %d, stderr %q", code, errs)
	}
	if code, _, _ := runCheckCmd(t, "-no-such-flag"); code != apicheck.ExitUsage {
		t.Errorf("unknown flag: exit %d", code)
	}
	code, out, _ := runCheckCmd(t, "-h")
	if code != 0 || !strings.Contains(out, "exit codes:") || !strings.Contains(out, "-card-token") {
		t.Errorf("-h: exit %d\n%s", code, out)
	}
	var hc bytes.Buffer
	if code := run(context.Background(), []string{"help", "check"}, &hc, &hc); code != 0 || !strings.HasPrefix(hc.String(), "usage: pagpolar check") {
		t.Errorf("help check: exit %d\n%s", code, hc.String())
	}
	var help bytes.Buffer
	run(context.Background(), []string{"help"}, &help, &help)
	if !strings.Contains(help.String(), "  check ") {
		t.Errorf("help does not list check:\n%s", help.String())
	}
}

// For every shape variant, the command against `pagpolar sim -shapes X`
// reports the same statuses and exit code as apicheck.Run against the
// in-process fake in X (whose exact expectations apicheck's tests pin).
func TestCheckCommandMatchesAPIForEveryShape(t *testing.T) {
	for _, shape := range pagpolartest.AllShapes() {
		t.Run(string(shape), func(t *testing.T) {
			switch shape {
			case pagpolartest.ShapeCacheNoAge:
				// Which paths end unknown there depends on when the
				// micro-cache's copies expire against each run's own waits
				// (the command's policy and this one differ), so the two
				// reports are not comparable item by item; apicheck's own
				// test asserts the shape's report.
				t.Skip("cache-no-age: outcomes depend on the micro-cache's copy ages against each run's waits")
			case pagpolartest.ShapeDateStepBack:
				// Each fake steps its clock back 300 ms after it starts:
				// where each run meets the step (which paths end unsent or
				// unknown) depends on how fast each ran, so the reports are
				// not comparable item by item; apicheck's own test asserts
				// the shape's report, and what holds wherever the step falls.
				t.Skip("date-step-back: outcomes depend on where each run meets the clock's step")
			}
			vars, _, _ := startSim(t, "-addr", "127.0.0.1:0", "-processing-window", "300ms", "-shapes", string(shape))
			simEnv(t, vars)
			code, out, errs := runCheckCmd(t, "-card-token", "tok_ok", "-processing-window", "300ms", "-json")
			var cmdRep apicheck.Report
			if err := json.Unmarshal([]byte(out), &cmdRep); err != nil {
				t.Fatalf("exit %d, stderr %s: -json output: %v", code, errs, err)
			}

			srv := pagpolartest.NewServer(t, pagpolartest.WithShapes(shape), pagpolartest.WithProcessingWindow(300*time.Millisecond))
			short := 50 * time.Millisecond
			apiRep, err := apicheck.Run(context.Background(), apicheck.Config{BaseURL: srv.URL, CredentialID: srv.CredentialID,
				Token: pagpolar.StaticToken(srv.Token), OfferID: "offer-basic", PlanID: "plan-basic", OtherPlanID: "plan-pro", CardToken: "tok_ok",
				Policy: &pagpolar.RetryPolicy{ProcessingWindow: 300 * time.Millisecond, WindowMargin: short, SettleDelay: short,
					LookupInterval: short / 2, MaxRetryAfter: short, MaxSettleWait: 900 * time.Millisecond}})
			if err != nil {
				t.Fatal(err)
			}
			if code != apiRep.ExitCode() {
				t.Errorf("command exit %d, API %d", code, apiRep.ExitCode())
			}
			if got, want := statuses(&cmdRep), statuses(apiRep); got != want {
				t.Errorf("command reports\n%s\nthe API\n%s", got, want)
			}
		})
	}
}

// statuses is every item's status but the race's (in-progress.409 may or
// may not happen), one per line.
func statuses(r *apicheck.Report) string {
	var b strings.Builder
	for _, it := range r.Items {
		if it.ID != "in-progress.409" {
			b.WriteString(it.ID + " " + string(it.Status) + "\n")
		}
	}
	return b.String()
}
