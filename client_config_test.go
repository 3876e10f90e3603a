// Client configuration mistakes (base URL, empty token, no store) are caught
// before they cost an operation.

package pagpolar

import (
	"errors"
	"strings"
	"testing"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// A base URL without /v1 got the router's 404, stored as failed for
// good; StaticToken("") was accepted.
func TestMisconfiguration_RouterNotFoundIsNotExecuted(t *testing.T) {
	f := newFixture(t, nil)
	wrong := f.client(t, WithStore(f.store), WithBaseURL(strings.TrimSuffix(f.srv.URL, "/v1")))
	warmClock(f, wrong) // a validated view of the API's clock: no snapshot first
	p := PixParams{OfferID: "offer-basic", ExternalReference: "order-conf", Customer: goodCustomer}
	_, err := wrong.Payments.Pix(f.ctx, p)
	if err == nil || !strings.Contains(err.Error(), "base URL") {
		t.Fatalf("wrong base URL: %v, want an error naming the probable misconfiguration", err)
	}
	mustState(t, f, wrong, "pix:order-conf", keystore.StateNotExecuted)
	ch, err := f.c.Payments.Pix(f.ctx, p) // the URL fixed
	if err != nil || ch.Operation.Source != SourceResponse {
		t.Fatalf("after fixing the URL: %v", err)
	}
	if _, err := NewClient("c", StaticToken(""), WithStore(keystore.NewMemory())); !errors.Is(err, ErrValidation) {
		t.Fatalf("StaticToken(\"\"): %v, want a ValidationError", err)
	}
}

// NewClient without WithStore quietly kept keys in memory.
func TestNoSilentInMemoryStore(t *testing.T) {
	_, err := NewClient("c", StaticToken("t"))
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != "WithStore" || !strings.Contains(err.Error(), "keystore.NewMemory()") {
		t.Fatalf("NewClient without a store: %v", err)
	}
	if _, err := NewClient("c", StaticToken("t"), WithStore(keystore.NewMemory())); err != nil {
		t.Fatal(err)
	}
}

// guardOnly wraps a store and passes AmnesiaGuard on but not
// HistoryProver: the wrapper WithStore refuses.
type guardOnly struct{ *keystore.Memory }

func (g guardOnly) History() {} // shadows Memory's: not keystore.HistoryProver

// TestWithStore_WrapperThatDropsTheHistoryCheckIsRefused: a store wrapper
// (metrics, tracing) that passes AmnesiaGuard on and drops HistoryProver
// would have the engine take a store that lost its records for proven and
// send first sends without looking them up (SAFETY rule 13; a chaos run's
// own wrapper did this and charged twice). NewClient refuses it, naming
// both interfaces; the store itself and a wrapper passing both are taken.
func TestWithStore_WrapperThatDropsTheHistoryCheckIsRefused(t *testing.T) {
	m := keystore.NewMemory()
	var _ keystore.AmnesiaGuard = guardOnly{m}
	if _, ok := any(guardOnly{m}).(keystore.HistoryProver); ok {
		t.Fatal("guardOnly must not be a HistoryProver")
	}
	_, err := NewClient("c", StaticToken("t"), WithStore(guardOnly{m}))
	if err == nil || !strings.Contains(err.Error(), "keystore.HistoryProver") || !strings.Contains(err.Error(), "keystore.AmnesiaGuard") {
		t.Fatalf("NewClient with a wrapper that drops HistoryProver: %v", err)
	}
	if _, err := NewClient("c", StaticToken("t"), WithStore(m)); err != nil {
		t.Fatalf("NewClient with the store itself: %v", err)
	}
}
