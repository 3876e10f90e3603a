package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// TestSimAsyncDecidesAfterAnswering: with -async the sim answers a card
// sale in -async-card-status and decides it -async-after later, with its
// TRANSACTION_PAID webhook and the new status on GET /sales/{id}.
func TestSimAsyncDecidesAfterAnswering(t *testing.T) {
	paid := make(chan string, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var env wire.WebhookEnvelope
		if json.NewDecoder(r.Body).Decode(&env) == nil && env.Event == wire.EventTransactionPaid && env.Data.Transaction != nil {
			paid <- env.Data.Transaction.ID
		}
	}))
	defer hook.Close()
	vars, stderr, stop := startSim(t, "-addr", "127.0.0.1:0", "-async", "-async-after", "100ms",
		"-async-card-status", wire.SaleStatusInAnalysis, "-webhook-url", hook.URL)
	url, tok := vars["PAGPOLAR_BASE_URL"], vars["PAGPOLAR_TOKEN"]
	card := `{"offer_identifier":"offer-basic","external_reference":"order-1","customer":{"name":"Ana","email":"ana@example.com","document":"","phone":""},"card":{"token":"tok_ok"}}`
	st, body, err := post(t, url+wire.RouteCreditCard, tok, "k1", card)
	if err != nil || st != 201 {
		t.Fatalf("card: %d %s %v", st, body, err)
	}
	var sale wire.Sale
	if err := json.Unmarshal(body, &sale); err != nil || sale.Status != wire.SaleStatusInAnalysis {
		t.Fatalf("first answer %s (%v), want status in_analysis", body, err)
	}
	select {
	case id := <-paid:
		if id != sale.Identifier {
			t.Fatalf("TRANSACTION_PAID for %s, want %s", id, sale.Identifier)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no TRANSACTION_PAID within 30 s")
	}
	req, _ := http.NewRequest("GET", url+"/sales/"+sale.Identifier, nil)
	req.Header.Set(wire.HeaderAuthorization, "Bearer "+tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var now wire.Sale
	if err := json.Unmarshal(b, &now); err != nil || now.Status != wire.SaleStatusPaid {
		t.Fatalf("GET /sales/{id} after the decision: %s", b)
	}
	if code := stop(); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
}

func TestSimAsyncRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-async", "-async-after", "0s"},
		{"-async-card-status", ""},
		{"-async-decline-every", "-1"},
	} {
		if code := run(context.Background(), append([]string{"sim"}, args...), &syncBuffer{}, &syncBuffer{}); code != 2 {
			t.Errorf("sim %v: exit %d, want 2", args, code)
		}
	}
}
