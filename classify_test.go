package pagpolar

import (
	"errors"
	"testing"
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
	}
	for _, c := range cases {
		if got, _ := classify(c.a); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}
