package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/report"
	"github.com/pagpolar/pagpolar-go/keystore"
)

// TestReconcileStopsAtAmnesiaAndSaysWhy: when the key store has lost
// records and refuses every new operation, settling does not call again
// until the run's time runs out: it stops after the round that met the
// refusal, says why, and the report ends INCOMPLETE (exit 3), naming what
// stayed open, instead of no report at all.
func TestReconcileStopsAtAmnesiaAndSaysWhy(t *testing.T) {
	const window, orders = 200 * time.Millisecond, 30
	srv, stop, err := startScenarioFake(window, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	defer srv.Close()
	m := keystore.NewMemory()
	m.Forget() // a loss: Create now refuses with ErrAmnesia
	c, err := newScenarioClient(srv.URL, srv.CredentialID, srv.Token, m, window, 4, nil, "test")
	if err != nil {
		t.Fatal(err)
	}
	res := newResults()
	for i := range orders {
		// The orders no checkout pass finished (as chaos marks those no
		// worker reported).
		res.add(outcome{Order: i, OpID: chargeOpID(orderAt(1, i)), State: "unsettled"})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	s := reconcile(ctx, c, m, srv.CredentialID, &orderRunner{c: c, pause: window / 10}, 1, orders, res, 4)
	took := time.Since(start)
	if ctx.Err() != nil {
		t.Fatalf("settling ran until the run's deadline (%v)", took)
	}
	if !strings.Contains(s.Stopped, "lost records it had acknowledged") || s.ReconcileRounds != 1 || s.StillUnsettledEnd != orders {
		t.Fatalf("settling: %+v after %v; want it stopped after one round, naming the loss, with %d open", s, took, orders)
	}
	ops, err := expectedOps(ctx, m, srv.CredentialID, 1, orders)
	if err != nil {
		t.Fatal(err)
	}
	rep := &report.Report{Mode: "chaos", Check: report.Verify(srv.CredentialID, srv.Ledger(), ops), Settling: s}
	if code := runExitCode(rep); code != demoExitIncomplete || len(rep.Check.Unfinished) != orders {
		t.Fatalf("exit %d, want %d; unfinished %d", code, demoExitIncomplete, len(rep.Check.Unfinished))
	}
	var txt strings.Builder
	if err := rep.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(txt.String(), "settling stopped before the end: the key store lost records") ||
		!strings.HasSuffix(strings.TrimSpace(txt.String()), "(pagpolar ops recover)") {
		t.Errorf("the report does not say why:\n%s", txt.String())
	}
}
