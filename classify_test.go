package pagpolar

import (
	"errors"
	"net/http"
	"testing"
	"time"
)

// The classification table (SAFETY rules 3–5): every status class, with
// and without the API's own body, and transport failures before and after
// the request was written.
func TestClassify(t *testing.T) {
	cases := []struct {
		name string
		a    answer
		want verdict
	}{
		{"201", answer{status: 201}, vSuccess},
		{"200 replay", answer{status: 200}, vSuccess},
		{"dial failed", answer{err: errors.New("refused"), sent: false}, vRetry},
		{"connection lost after writing", answer{err: errors.New("EOF"), sent: true}, vAmbiguous},
		{"409 any body", answer{status: 409}, vInProgress},
		{"409 API", answer{status: 409, apiOwn: true}, vInProgress},
		{"429 API", answer{status: 429, apiOwn: true}, vRetry},
		{"429 gateway", answer{status: 429}, vRetry},
		{"503 API (shed before processing)", answer{status: 503, apiOwn: true}, vRetry},
		{"503 gateway", answer{status: 503}, vAmbiguous},
		{"401 API", answer{status: 401, apiOwn: true}, vNotExecuted},
		{"403 gateway", answer{status: 403}, vNotExecuted},
		{"402 any body (a decline)", answer{status: 402}, vFailed},
		{"400 API", answer{status: 400, apiOwn: true}, vFailed},
		{"422 API", answer{status: 422, apiOwn: true}, vFailed},
		{"404 API (resource not found)", answer{status: 404, apiOwn: true}, vFailed},
		{"404 router page (wrong base URL)", answer{status: 404}, vNotExecuted},
		{"405 router page", answer{status: 405}, vNotExecuted},
		{"400 proxy page", answer{status: 400}, vNotExecuted},
		{"500 API (the request ended)", answer{status: 500, apiOwn: true}, vAmbiguousEnd},
		{"500 not the API's", answer{status: 500}, vAmbiguous},
		{"502 gateway", answer{status: 502}, vAmbiguous},
		{"502 with a known code", answer{status: 502, apiOwn: true}, vAmbiguous},
		{"504 gateway", answer{status: 504}, vAmbiguous},
		{"504 with a known code", answer{status: 504, apiOwn: true}, vAmbiguous},
		{"501", answer{status: 501, apiOwn: true}, vAmbiguous},
		{"302 (never followed)", answer{status: 302}, vAmbiguous},
		{"100", answer{status: 100}, vAmbiguous},
		{"422 API naming the key", answer{status: 422, apiOwn: true, keyUsed: true}, vKeyUsed},
		{"400 naming the key, unknown code", answer{status: 400, keyUsed: true}, vKeyUsed},
		{"409 naming the key", answer{status: 409, keyUsed: true}, vInProgress},
		{"429 naming the key", answer{status: 429, keyUsed: true}, vRetry},
		{"401 naming the key", answer{status: 401, keyUsed: true}, vNotExecuted},
		{"500 API naming the key", answer{status: 500, apiOwn: true, keyUsed: true}, vAmbiguousEnd},
	}
	for _, c := range cases {
		if got, _ := classify(c.a); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func TestNamesKey(t *testing.T) {
	cases := []struct {
		code, message string
		want          bool
	}{
		{"unprocessable_entity", "Idempotency-Key já utilizada", true},
		{"idempotency_key_reused", "", true},
		{"", "Chave de idempotência já usada", true},
		{"IDEMPOTENCY_CONFLICT", "", true},
		{"validation_error", "customer.email: invalid", false},
		// Naming the key for another reason: no key was registered.
		{"validation_error", "customer.email é obrigatório; cabeçalhos exigidos: Authorization, Idempotency-Key", false},
		{"validation_error", "Idempotency-Key: header required", false},
		{"", "Idempotency-Key must be at most 255 characters", false},
		{"invalid_idempotency_key", "", false},
		{"", "Idempotency key already used with other parameters", true},
		{"", "A chave de idempotência já existe", true},
		{"", "", false},
		{"declined", "Cartão recusado", false},
	}
	for _, c := range cases {
		if got := namesKey(c.code, c.message); got != c.want {
			t.Errorf("namesKey(%q, %q) = %v, want %v", c.code, c.message, got, c.want)
		}
	}
}

// The other sender's earliest start after a 409: placed on the API's clock
// only for the documented 409 with a clock bound; otherwise the earliest
// time there is (shared, nothing excluded by time).
func TestInProgressFrom(t *testing.T) {
	now := t0
	cases := []struct {
		name           string
		ok, documented bool
		want           time.Time
	}{
		{"documented, bound", true, true, now.Add(-65 * time.Second)},
		{"documented, no bound", false, true, sharedAnyTime},
		{"other body, bound", true, false, sharedAnyTime},
		{"other body, no bound", false, false, sharedAnyTime},
	}
	for _, c := range cases {
		if got := inProgressFrom(now, c.ok, c.documented, 65*time.Second); !got.Equal(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// An answer a cache served (Age) is no proof of the API's current state.
func TestServedByCache(t *testing.T) {
	now := t0.Add(time.Hour)
	trust := now.Add(-5 * time.Second)
	cases := []struct {
		h         http.Header
		notBefore time.Time
		want      bool
	}{
		{http.Header{}, time.Time{}, false},
		{http.Header{"Age": {"0"}}, time.Time{}, false}, // a snapshot: under a second old, as good as concurrent
		{http.Header{"Age": {"1"}}, time.Time{}, true},
		{http.Header{"Age": {"0"}}, trust, false}, // CDNs stamp Age: 0 on what they pass through
		{http.Header{"Age": {"1"}}, trust, false},
		{http.Header{"Age": {"1"}}, now.Add(-time.Second), true}, // made before the trust moment, maybe
		{http.Header{"Age": {"1"}}, now.Add(time.Second), false}, // before the trust moment: a not-found counts for nothing yet
		{http.Header{"Age": {"60"}}, now.Add(time.Second), true},
		{http.Header{"Age": {"4"}}, trust, true}, // within the window, but older than a lookup may take
		{http.Header{"Age": {"3600"}}, trust, true},
		{http.Header{"Age": {"-1"}}, trust, true},
		{http.Header{"Age": {"soon"}}, trust, true},
		{http.Header{"Cache-Control": {"max-age=60"}}, trust, false},
	}
	for _, c := range cases {
		if _, got := servedByCache(c.h, now, c.notBefore); got != c.want {
			t.Errorf("servedByCache(%v, notBefore %v) = %v, want %v", c.h, c.notBefore.Sub(now), got, c.want)
		}
	}
}
