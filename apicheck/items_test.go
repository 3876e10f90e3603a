// The check's items against APIs that misbehave: a double charge, replays it
// cannot trust, refunds and a keyless POST that creates.

package apicheck

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// rtFunc is a RoundTripper from a function.
type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// runThrough runs the check against a fake (with a card token) through
// wrap(the default transport).
func runThrough(t *testing.T, srv *pagpolartest.Server, wrap func(http.RoundTripper) http.RoundTripper) *Report {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := Run(ctx, Config{BaseURL: srv.URL, CredentialID: srv.CredentialID, Token: pagpolar.StaticToken(srv.Token),
		OfferID: "offer-basic", PlanID: "plan-basic", OtherPlanID: "plan-pro", CardToken: "tok_ok", Policy: testPolicy(),
		HTTPClient: &http.Client{Transport: wrap(tr)}})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func replaceBody(req *http.Request, b []byte) {
	req.Body = io.NopCloser(bytes.NewReader(b))
	req.ContentLength = int64(len(b))
	req.Header.Set("Content-Length", strconv.Itoa(len(b)))
}

// An API that ignores Idempotency-Key (here: every POST reaches the
// fake under a fresh key) charges twice for one operation. The check says
// so (idempotency.one-effect differs, exit 3) and refunds every card sale it
// made, or names it in the notes.
//
// With lie, the API also marks the answer to a repeated key as a replay
// (Idempotent-Replayed: true) while making a new effect: the new sale is
// still listed as created, and refunded.
func TestCheck_APIIgnoringKeysIsCaughtAndRefunded(t *testing.T) {
	for _, lie := range []bool{false, true} {
		t.Run(fmt.Sprintf("lie=%v", lie), func(t *testing.T) { doubleCharge(t, lie) })
	}
}

func doubleCharge(t *testing.T, lie bool) {
	srv := pagpolartest.NewServer(t, pagpolartest.WithProcessingWindow(testWindow))
	var n atomic.Int64
	var mu sync.Mutex
	seen := map[string]bool{}
	rep := runThrough(t, srv, func(base http.RoundTripper) http.RoundTripper {
		return rtFunc(func(req *http.Request) (*http.Response, error) {
			key := req.Header.Get(wire.HeaderIdempotencyKey)
			if req.Method != http.MethodPost || key == "" {
				return base.RoundTrip(req)
			}
			req = req.Clone(req.Context())
			req.Header.Set(wire.HeaderIdempotencyKey, fmt.Sprintf("%s-fresh-%d", key, n.Add(1)))
			resp, err := base.RoundTrip(req)
			mu.Lock()
			again := seen[key]
			seen[key] = true
			mu.Unlock()
			if err == nil && lie && again {
				resp.Header.Set(wire.HeaderReplayed, "true")
			}
			return resp, err
		})
	})
	created := map[string]bool{}
	for _, c := range rep.Created {
		created[c.ID] = true
	}
	it, _ := rep.Item("idempotency.one-effect")
	if it.Status != Differs || !strings.Contains(it.Observed, "more than once") || !it.EndsUnknown {
		t.Errorf("idempotency.one-effect: %+v", it)
	}
	if got := rep.ExitCode(); got != ExitUnknown {
		t.Errorf("exit %d, want %d (%s)", got, ExitUnknown, pathsOf(rep))
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "idempotency.one-effect: differs") || !strings.Contains(table.String(), "double charge") ||
		!strings.Contains(table.String(), "note: the API made one operation more than once") {
		t.Errorf("table:\n%s", table.String())
	}
	cards := 0
	for _, s := range srv.Ledger().Sales {
		if s.PaymentMethod != wire.MethodCreditCard {
			continue
		}
		cards++
		if !created[s.Identifier] {
			t.Errorf("card sale %s is not in Created", s.Identifier)
		}
		if s.RefundedAmount == s.Amount {
			continue
		}
		named := false
		for _, note := range rep.Notes {
			named = named || strings.Contains(note, s.Identifier)
		}
		if !named {
			t.Errorf("card sale %s: %d of %d refunded, and no note names it; notes %q", s.Identifier, s.RefundedAmount, s.Amount, rep.Notes)
		}
	}
	if cards < 2 {
		t.Errorf("%d card sales on the ledger: the transport did not make the fake charge twice", cards)
	}
}

// A replay without its header, or with another body, is a
// path the SDK cannot keep safe: exit 3, not 1.
func TestCheck_UntrustworthyReplayExitsUnknown(t *testing.T) {
	for _, id := range []string{"replay.header", "replay.body", "idempotency.one-effect"} {
		for _, st := range []Status{Differs, Absent} {
			rep := &Report{Items: []Item{{ID: id, Status: st}}}
			if got := rep.ExitCode(); got != ExitUnknown {
				t.Errorf("%s %s: exit %d, want %d", id, st, got, ExitUnknown)
			}
		}
	}
}

// When the over-refund is accepted, the rest is not sent (it could
// refund what the over-refund already took), and a note says why.
func TestCheck_RefundRestOnlyAfterOverRefundRefused(t *testing.T) {
	srv := pagpolartest.NewServer(t, pagpolartest.WithProcessingWindow(testWindow))
	var mu sync.Mutex
	over := int64(0) // the over-refund's amount, once seen
	var after []int64
	rep := runThrough(t, srv, func(base http.RoundTripper) http.RoundTripper {
		return rtFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, wire.RouteRefunds) {
				b, _ := io.ReadAll(req.Body)
				var body map[string]any
				_ = json.Unmarshal(b, &body)
				amount, _ := body["amount"].(float64)
				mu.Lock()
				switch {
				case over == 0 && amount > 1: // the over-refund: make the fake accept it (1 less)
					over = int64(amount)
					body["amount"] = amount - 1
					b, _ = json.Marshal(body)
				case over != 0 && int64(amount) != over:
					after = append(after, int64(amount))
				}
				mu.Unlock()
				req = req.Clone(req.Context())
				replaceBody(req, b)
			}
			return base.RoundTrip(req)
		})
	})
	mu.Lock()
	defer mu.Unlock()
	if over == 0 {
		t.Fatal("no over-refund was sent")
	}
	if len(after) > 0 {
		t.Errorf("refunds sent after the over-refund was accepted: %v centavos", after)
	}
	noted := false
	for _, n := range rep.Notes {
		noted = noted || strings.Contains(n, "was not refused") && strings.Contains(n, "no more refunds")
	}
	if !noted {
		t.Errorf("notes %q", rep.Notes)
	}
	if p := pathNamed(rep, "refund/refused"); p == nil || p.Outcome == OutcomeSettled {
		t.Errorf("refund/refused: %+v", p)
	}
	if rep.ExitCode() != ExitUnknown {
		t.Errorf("exit %d", rep.ExitCode())
	}
}

func pathNamed(rep *Report, name string) *Path {
	for _, p := range rep.Paths {
		if p.Name == name {
			return p
		}
	}
	return nil
}

func TestCheck_OverRefundRefused(t *testing.T) {
	x := func(status int) exchange {
		return exchange{step: "refund/over", method: http.MethodPost, status: status}
	}
	for _, c := range []struct {
		name    string
		xs      []exchange
		refused bool
	}{
		{"422", []exchange{x(422)}, true},
		{"409 then 400", []exchange{x(409), x(400)}, true},
		{"accepted", []exchange{x(201)}, false},
		{"no answer", []exchange{x(0)}, false},
		{"503 then 400", []exchange{x(503), x(400)}, false},
		{"only 429", []exchange{x(429)}, false},
		{"nothing sent", nil, false},
		{"other step's 201", []exchange{{step: "refund/rest", method: http.MethodPost, status: 201}, x(400)}, true},
	} {
		if why := overRefused(c.xs, "refund/over"); (why == "") != c.refused {
			t.Errorf("%s: %q, want refused %v", c.name, why, c.refused)
		}
	}
}

// An API that creates the sale and then answers 400 to a POST
// without a key: missing-key.400 differs and the sale is in Created.
func TestCheck_KeylessPostThatCreatesIsReported(t *testing.T) {
	srv := pagpolartest.NewServer(t, pagpolartest.WithProcessingWindow(testWindow))
	rep := runThrough(t, srv, func(base http.RoundTripper) http.RoundTripper {
		return rtFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method != http.MethodPost || req.Header.Get(wire.HeaderIdempotencyKey) != "" {
				return base.RoundTrip(req)
			}
			req = req.Clone(req.Context())
			req.Header.Set(wire.HeaderIdempotencyKey, "keyless-made-one")
			resp, err := base.RoundTrip(req)
			if err != nil {
				return nil, err
			}
			resp.Body.Close()
			b := `{"code":"missing_idempotency_key","message":"Idempotency-Key required"}`
			return &http.Response{StatusCode: http.StatusBadRequest, Header: http.Header{"Content-Type": {"application/json"}, "Date": {time.Now().UTC().Format(http.TimeFormat)}},
				Body: io.NopCloser(strings.NewReader(b)), Request: req}, nil
		})
	})
	var made string
	for _, s := range srv.Ledger().Sales {
		if s.ExternalReference == "pagpolar-check-"+rep.RunID+"-no-key" {
			made = s.Identifier
		}
	}
	if made == "" {
		t.Fatal("the transport did not make the fake create the keyless sale")
	}
	if it, _ := rep.Item("missing-key.400"); it.Status != Differs || !strings.Contains(it.Observed, made) {
		t.Errorf("missing-key.400: %+v", it)
	}
	found := false
	for _, c := range rep.Created {
		found = found || c.ID == made && c.Step == "missing-key"
	}
	if !found {
		t.Errorf("Created %+v does not list %s", rep.Created, made)
	}
}
