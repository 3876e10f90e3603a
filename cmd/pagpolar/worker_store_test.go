package main

import (
	"context"
	"net/url"
	"testing"

	"github.com/pagpolar/pagpolar-go/internal/privateredis"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/storetest"
	"github.com/pagpolar/pagpolar-go/keystore/storeurl"
)

// A chaos worker started after its Redis restarted without persistence
// charges nothing twice: the store it opens finds no marker and starts an
// unproven history, and the worker's store wrapper (storeWatch) must let
// the engine see it, so that every first send is looked up first. A
// wrapper that hides keystore.HistoryProver makes the engine take the
// emptied store as proven and resend the operations whose records were
// lost: those whose key the API had released are charged twice.
func TestWorkerStoreAfterRedisRestartWithoutPersistenceChargesNothingTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a private Redis")
	}
	srv := privateredis.Start(t)
	raw := "redis://" + srv.Addr + "/0?volatile=1"
	open := func(t *testing.T, declare bool) keystore.Store {
		u := raw
		if declare {
			u += "&declared_new=" + url.QueryEscape("test: a new private Redis")
		}
		s, closeFn, err := storeurl.Open(context.Background(), u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = closeFn() })
		return &storeWatch{Store: s}
	}
	r := storetest.HistoryLossRun(t, 20,
		func(t *testing.T) keystore.Store { return open(t, true) },
		func(t *testing.T) {
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
		},
		func(t *testing.T) keystore.Store { return open(t, false) })
	storetest.CheckHistoryLoss(t, r, true)
}

// The chaos parent declares new only a store its own open initialises, and
// the workers' URL carries no declaration: a worker that opens a store that
// lost everything must find its history unproven.
func TestChaosDeclaresNewOnlyInTheParentsOpen(t *testing.T) {
	note := "declared_new=" + url.QueryEscape("pagpolar chaos: a store this run initialised")
	for raw, want := range map[string]string{
		"sqlite:/tmp/k.db":                         "sqlite:/tmp/k.db?" + note,
		"redis://127.0.0.1:6379/0?volatile=1":      "redis://127.0.0.1:6379/0?volatile=1&" + note,
		"sqlite:/tmp/k.db?declared_new=the-caller": "sqlite:/tmp/k.db?declared_new=the-caller",
	} {
		if got := declaredNewURL(raw); got != want {
			t.Errorf("declaredNewURL(%q) = %q, want %q", raw, got, want)
		}
	}
}
