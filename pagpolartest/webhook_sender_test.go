package pagpolartest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

const hookToken = "whk_sender_test"

// receiver records what it is sent; answer decides each status (it may
// block, e.g. on a channel).
type receiver struct {
	mu     sync.Mutex
	got    []received
	answer func(n int, env wire.WebhookEnvelope) int
	srv    *httptest.Server
}

type received struct {
	env        wire.WebhookEnvelope
	auth, test string
}

func newReceiver(t *testing.T, answer func(n int, env wire.WebhookEnvelope) int) *receiver {
	rc := &receiver{answer: answer}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var env wire.WebhookEnvelope
		if err := json.Unmarshal(body, &env); err != nil {
			t.Errorf("receiver: %v", err)
		}
		rc.mu.Lock()
		rc.got = append(rc.got, received{env: env, auth: r.Header.Get("Authorization"), test: r.Header.Get(wire.HeaderTestEvent)})
		n := len(rc.got)
		rc.mu.Unlock()
		status := http.StatusOK
		if rc.answer != nil {
			status = rc.answer(n, env)
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) all() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func flush(t *testing.T, s *pagpolartest.WebhookSender) {
	t.Helper()
	if err := s.Flush(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

func paid(id string) wire.WebhookEnvelope {
	return wire.WebhookEnvelope{Event: wire.EventTransactionPaid, Data: wire.WebhookData{
		Transaction: &wire.WebhookTransaction{ID: id, Sale: wire.Sale{Identifier: id, Status: wire.SaleStatusPaid}},
	}}
}

func TestSenderResendsAfterAFailureWithAFreshID(t *testing.T) {
	rc := newReceiver(t, func(n int, _ wire.WebhookEnvelope) int {
		if n == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	clock := pagpolartest.NewClock()
	s := pagpolartest.NewWebhookSender(rc.srv.URL, hookToken, pagpolartest.WithSenderClock(clock))
	defer s.Close()
	s.Send(paid("sale_1"))
	flush(t, s)
	if d := s.Deliveries(); len(d) != 1 || d[0].Status != http.StatusServiceUnavailable || d[0].OK() || s.Waiting() != 1 {
		t.Fatalf("after the first attempt: %+v, waiting %d", d, s.Waiting())
	}
	clock.Advance(29 * time.Second)
	flush(t, s)
	if n := len(s.Deliveries()); n != 1 {
		t.Fatalf("resent after 29 s (%d attempts)", n)
	}
	clock.Advance(time.Second)
	flush(t, s)
	d := s.Deliveries()
	if len(d) != 2 || !d[1].OK() || d[1].Attempt != 2 || d[1].Ref != d[0].Ref || s.Waiting() != 0 {
		t.Fatalf("after 30 s: %+v", d)
	}
	got := rc.all()
	if got[0].env.ID == got[1].env.ID || got[0].env.ID == "" {
		t.Errorf("attempts share envelope id %q", got[0].env.ID)
	}
	t0, err0 := time.Parse(time.RFC3339, got[0].env.CreationDate)
	t1, err1 := time.Parse(time.RFC3339, got[1].env.CreationDate)
	if err0 != nil || err1 != nil || t1.Sub(t0) < 30*time.Second {
		t.Errorf("creation dates %q then %q: want a new one, 30 s later", got[0].env.CreationDate, got[1].env.CreationDate)
	}
	if got[1].auth != "Bearer "+hookToken || got[1].test != "" || got[1].env.Test {
		t.Errorf("headers: auth %q test %q", got[1].auth, got[1].test)
	}
	if got[1].env.Data.Transaction == nil || got[1].env.Data.Transaction.ID != "sale_1" {
		t.Errorf("data changed between attempts: %+v", got[1].env.Data)
	}
}

func TestSenderCountsASlowAnswerAsAFailure(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{})
	rc := newReceiver(t, func(n int, _ wire.WebhookEnvelope) int {
		if n == 1 {
			close(arrived)
			<-release // processes before answering: too slow
		}
		return http.StatusOK
	})
	defer close(release)
	clock := pagpolartest.NewClock()
	s := pagpolartest.NewWebhookSender(rc.srv.URL, hookToken, pagpolartest.WithSenderClock(clock))
	defer s.Close()
	s.Send(paid("sale_1"))
	if err := s.WaitInFlight(ctxT(t), 1); err != nil {
		t.Fatal(err)
	}
	<-arrived // the receiver has it and holds the answer
	clock.Advance(10 * time.Second)
	flush(t, s)
	d := s.Deliveries()
	if len(d) != 1 || !d[0].Slow || d[0].OK() || s.Waiting() != 1 {
		t.Fatalf("after 10 s without an answer: %+v", d)
	}
	clock.Advance(30 * time.Second)
	flush(t, s)
	if d := s.Deliveries(); len(d) != 2 || !d[1].OK() {
		t.Fatalf("resend: %+v", d)
	}
}

func TestSenderGivesUpAfterItsAttempts(t *testing.T) {
	rc := newReceiver(t, func(int, wire.WebhookEnvelope) int { return http.StatusInternalServerError })
	clock := pagpolartest.NewClock()
	s := pagpolartest.NewWebhookSender(rc.srv.URL, hookToken, pagpolartest.WithSenderClock(clock), pagpolartest.WithAttempts(3))
	defer s.Close()
	s.Send(paid("sale_1"))
	for range 4 {
		flush(t, s)
		clock.Advance(30 * time.Second)
	}
	flush(t, s)
	if d := s.Deliveries(); len(d) != 3 || s.Waiting() != 0 {
		t.Fatalf("%d attempts, %d waiting; want 3, 0", len(d), s.Waiting())
	}
}

func TestSenderDuplicatesPaidAndSendsTestEvents(t *testing.T) {
	rc := newReceiver(t, nil)
	s := pagpolartest.NewWebhookSender(rc.srv.URL, hookToken, pagpolartest.WithDuplicatePaid())
	defer s.Close()
	s.Send(paid("sale_1"))
	s.Send(wire.WebhookEnvelope{Event: wire.EventTransactionCreated, Data: paid("sale_2").Data})
	s.SendTest(paid("sale_test"))
	flush(t, s)
	got := rc.all()
	counts := map[string]int{}
	ids := map[string]bool{}
	for _, r := range got {
		counts[r.env.Event+"/"+r.env.Data.Transaction.ID]++
		ids[r.env.ID] = true
		isTest := r.env.Data.Transaction.ID == "sale_test"
		if isTest != r.env.Test || isTest != (r.test == "true") {
			t.Errorf("test markers of %s: body %v header %q", r.env.Data.Transaction.ID, r.env.Test, r.test)
		}
	}
	if counts["TRANSACTION_PAID/sale_1"] != 2 || counts["TRANSACTION_CREATED/sale_2"] != 1 || counts["TRANSACTION_PAID/sale_test"] != 1 || len(ids) != 4 {
		t.Errorf("received %v with %d distinct ids; want PAID twice (2 ids), CREATED once, the test event once", counts, len(ids))
	}
}

func TestSenderSendAllOutOfOrderAndResendAll(t *testing.T) {
	rc := newReceiver(t, nil)
	s := pagpolartest.NewWebhookSender(rc.srv.URL, hookToken, pagpolartest.WithConcurrency(1), pagpolartest.WithSenderSeed(7))
	defer s.Close()
	var envs []wire.WebhookEnvelope
	for i := range 10 {
		envs = append(envs, paid(string(rune('a'+i))))
	}
	s.SendAll(envs)
	s.SendTest(paid("t"))
	flush(t, s)
	got := rc.all()
	inOrder := true
	seen := map[string]int{}
	for i, r := range got[:10] {
		seen[r.env.Data.Transaction.ID]++
		if r.env.Data.Transaction.ID != envs[i].Data.Transaction.ID {
			inOrder = false
		}
	}
	if len(seen) != 10 || inOrder {
		t.Errorf("SendAll delivered %d distinct events, in order %v; want all 10, shuffled", len(seen), inOrder)
	}
	s.ResendAll()
	flush(t, s)
	again := rc.all()[len(got):]
	if len(again) != 10 {
		t.Fatalf("ResendAll sent %d, want 10 (test events are not resent)", len(again))
	}
	first := map[string]bool{}
	for _, r := range got {
		first[r.env.ID] = true
	}
	for _, r := range again {
		if first[r.env.ID] || r.env.Test {
			t.Errorf("resend reused envelope id %q or is a test event", r.env.ID)
		}
	}
}

func TestSenderLossIsResent(t *testing.T) {
	rc := newReceiver(t, nil)
	clock := pagpolartest.NewClock()
	s := pagpolartest.NewWebhookSender(rc.srv.URL, hookToken, pagpolartest.WithSenderClock(clock),
		pagpolartest.WithLoss(func(env wire.WebhookEnvelope, attempt int) bool {
			return env.Event == wire.EventTransactionCreated && attempt == 1
		}))
	defer s.Close()
	created := paid("sale_1")
	created.Event = wire.EventTransactionCreated
	s.Send(created)
	s.Send(paid("sale_1"))
	flush(t, s)
	if got := rc.all(); len(got) != 1 || got[0].env.Event != wire.EventTransactionPaid {
		t.Fatalf("before the resend the receiver got %d events", len(got))
	}
	clock.Advance(30 * time.Second)
	flush(t, s)
	got := rc.all()
	if len(got) != 2 || got[1].env.Event != wire.EventTransactionCreated {
		t.Fatalf("CREATED must arrive after PAID: %+v", got)
	}
}

func TestSenderCloseEndsEverything(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	rc := newReceiver(t, func(n int, _ wire.WebhookEnvelope) int {
		if n == 1 {
			<-block
		}
		return http.StatusServiceUnavailable
	})
	s := pagpolartest.NewWebhookSender(rc.srv.URL, hookToken)
	s.Send(paid("in_flight"))
	if err := s.WaitInFlight(ctxT(t), 1); err != nil {
		t.Fatal(err)
	}
	s.Send(paid("will_wait")) // answered 503: waits 30 s for its resend
	if err := s.WaitUntil(ctxT(t), func(st pagpolartest.SenderStats) bool { return st.Waiting == 1 }); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return with a request in flight")
	}
	s.Send(paid("after_close")) // ignored
	if n := len(rc.all()); n > 2 {
		t.Errorf("%d requests after Close", n)
	}
}

func TestSenderFollowsTheFakeServer(t *testing.T) {
	srv := pagpolartest.NewServer(t)
	rc := newReceiver(t, nil)
	s := pagpolartest.NewWebhookSenderFor(srv, rc.srv.URL, hookToken)
	defer s.Close()
	body, _ := json.Marshal(wire.PixRequest{OfferIdentifier: "offer-basic", ExternalReference: "order-1",
		Customer: wire.Customer{Name: "Ana", Email: "ana@example.com", Document: "00000000000", Phone: "11999999999"}})
	req, _ := http.NewRequest(http.MethodPost, srv.URL+wire.RoutePix, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+srv.Token)
	req.Header.Set(wire.HeaderIdempotencyKey, "key-order-1")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var sale wire.Sale
	if err := json.NewDecoder(resp.Body).Decode(&sale); err != nil || resp.StatusCode/100 != 2 {
		t.Fatalf("create PIX sale: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	if err := srv.Pay(sale.Identifier); err != nil {
		t.Fatal(err)
	}
	flush(t, s)
	events := map[string]wire.WebhookEnvelope{}
	for _, r := range rc.all() {
		events[r.env.Event] = r.env
	}
	for _, name := range []string{wire.EventTransactionCreated, wire.EventTransactionPaid} {
		env, ok := events[name]
		if !ok || env.Data.Transaction == nil || env.Data.Transaction.ID != sale.Identifier || env.ID == "" {
			t.Errorf("%s: %+v", name, env)
		}
	}
	if events[wire.EventTransactionPaid].Data.Transaction.Status != wire.SaleStatusPaid {
		t.Errorf("PAID carries status %q", events[wire.EventTransactionPaid].Data.Transaction.Status)
	}
}
