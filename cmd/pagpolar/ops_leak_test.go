package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/internal/leaktest"
	"github.com/pagpolar/pagpolar-go/keystore/sqlstore"
)

// TestOps_OutputHoldsNoEchoedSecret: operations that failed, ended
// not executed or unknown against a gateway echoing the token, the
// customer's data and a foreign e-mail and CPF are listed and shown by
// `ops list -json` and `ops show -json` with none of them.
func TestOps_OutputHoldsNoEchoedSecret(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "keys.db")
	s, err := sqlstore.OpenSQLite(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	customer := pagpolar.Customer{Name: "Maria Aparecida Silva", Email: "maria.silva@example.com", Document: "123.456.789-09"}
	const tok = "sk_live+0001/Zx9QpL7mWv3Rt8Ky2Hn5="
	pol := pagpolar.DefaultRetryPolicy
	pol.MaxAttempts, pol.ProcessingWindow, pol.WindowMargin, pol.SettleDelay = 2, 200*time.Millisecond, 20*time.Millisecond, 20*time.Millisecond
	pol.LookupInterval, pol.MaxSettleWait, pol.MaxRetryAfter = 10*time.Millisecond, 300*time.Millisecond, 10*time.Millisecond
	pol.NewBackOff = pagpolar.Exponential(time.Millisecond, 5*time.Millisecond)
	var ids []string
	secrets := []string{tok, customer.Name, customer.Email, customer.Document, leaktest.ForeignEmail, leaktest.ForeignCPF}
	for _, status := range leaktest.Statuses {
		gw := &leaktest.Gateway{Status: status, PassLookups: true}
		srv := httptest.NewServer(gw)
		c, err := pagpolar.NewClient("cred_leak", pagpolar.StaticToken(tok), pagpolar.WithBaseURL(srv.URL+"/v1"), pagpolar.WithStore(s),
			pagpolar.WithRetryPolicy(pol), pagpolar.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		op := fmt.Sprintf("leak-%d", status)
		if _, err := c.Payments.Pix(ctx, pagpolar.PixParams{OperationID: op, OfferID: "offer-basic", ExternalReference: op, Customer: customer}); err == nil {
			t.Fatalf("%d: a charge succeeded against an error gateway", status)
		}
		srv.Close()
		ids = append(ids, pagpolar.RecordID("cred_leak", op))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	url := "sqlite:" + path
	out, errb, code := ops(t, "list", "-store", url, "-json")
	if code != exitOK || len(out) < 100 {
		t.Fatalf("ops list: exit %d\n%s%s", code, out, errb)
	}
	if found := leaktest.Find([]byte(out+errb), secrets...); len(found) > 0 {
		t.Errorf("ops list -json holds %q:\n%s", found, out)
	}
	for _, id := range ids {
		out, errb, code := ops(t, "show", "-store", url, "-json", id)
		if code != exitOK || len(out) < 50 {
			t.Fatalf("ops show %s: exit %d\n%s%s", id, code, out, errb)
		}
		if found := leaktest.Find([]byte(out+errb), secrets...); len(found) > 0 {
			t.Errorf("ops show -json %s holds %q:\n%s", id, found, out)
		}
	}
}
