package pagpolar

import (
	"net/http"
	"strconv"
	"strings"
)

// Classification of one attempt's answer (SAFETY rules 3–5): a pure
// function of what came back. The send loop in idempotency.go acts on it.

// verdict is what one answer says about the attempt.
type verdict int

const (
	vSuccess      verdict = iota // 2xx: checked against the request next (attributeAnswer)
	vFailed                      // a definite refusal by the API (its own 4xx, or a 402): settled failed
	vNotExecuted                 // definitely not processed, and resending now would not help (401/403, an intermediary's 4xx)
	vRetry                       // definitely not processed: resend with the same key after backoff (429, the API's own 503, no connection)
	vAmbiguousEnd                // may have taken effect, and the API's own answer says the request has ended (its 500)
	vAmbiguous                   // may have taken effect and may still be running (timeout, lost connection, a gateway's 5xx)
	vInProgress                  // 409: a request with this key is running now
	vKeyUsed                     // a 4xx that names the idempotency key: a request with this key ended before, perhaps in a 2xx the API did not replay
)

func (v verdict) String() string {
	return [...]string{"success", "failed", "not-executed", "retry", "ambiguous-ended", "ambiguous", "in-progress", "key-used"}[v]
}

// answer is what an attempt got back: a response, or a transport error
// (sent tells whether any byte of the request may have reached the server).
type answer struct {
	status int
	apiOwn bool // the body is the API's own error (wire.APIError)
	code   string
	err    error
	sent   bool
	// keyUsed: the error's code or message names the idempotency key
	// (namesKey).
	keyUsed bool
}

// namesKey reports whether an error's code or message says the idempotency
// key was already used ("Idempotency-Key já utilizada",
// "idempotency_key_reused", "chave de idempotência já existe"). The SDK
// always sends a valid key, so such a 4xx is no ordinary refusal of the
// request: it most likely says that a request with this key ended earlier
// — perhaps in a 2xx the API answers a repeat with an error instead of
// replaying (another host that derived the same key, a resend after a lost
// answer). A 4xx that names the key for another reason — a header missing
// or malformed (a proxy stripped it), a message listing the required
// headers — registered no key (CONTRACT.md) and keeps the ordinary rules.
func namesKey(code, message string) bool {
	code, message = strings.ToLower(code), strings.ToLower(message)
	if !strings.Contains(code, "idempot") && !strings.Contains(message, "idempot") {
		return false
	}
	for _, w := range keyReuseWords {
		if strings.Contains(code, w) || strings.Contains(message, w) {
			return true
		}
	}
	return false
}

// keyReuseWords say that a key was used before (English and Portuguese,
// lower case; codes use the same stems).
var keyReuseWords = []string{"reus", "re-us", "already", "used", "in use", "utilizad", "usad", "em uso",
	"duplic", "conflict", "exist", "mismatch", "processad", "processed"}

// classify returns the verdict on an answer and a short cause for events
// and records.
//
// Only the API's own body may shorten the in-processing window (its 500
// ends the request) or prove a 503 was shed before processing. A gateway's
// page — HTML, text, or JSON without a code the SDK knows — never does: a
// 502, 503 or 504 from an intermediary says nothing about the request
// behind it. A 4xx that is not the API's own (a router's 404 behind a
// wrong base URL, a proxy's 400) leaves the operation not executed, so a
// misconfiguration never fails an order for good.
func classify(a answer) (verdict, string) {
	if a.err != nil {
		if !a.sent {
			return vRetry, "not-sent"
		}
		return vAmbiguous, "transport"
	}
	s := a.status
	cause := strconv.Itoa(s)
	switch {
	case s >= 200 && s < 300:
		return vSuccess, ""
	case s == http.StatusConflict:
		return vInProgress, cause
	case s == http.StatusTooManyRequests:
		return vRetry, cause // a rate limit answers before processing, whoever answers it
	case s == http.StatusServiceUnavailable && a.apiOwn:
		return vRetry, cause
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		return vNotExecuted, cause // authentication comes before the key is registered
	case s >= 400 && s < 500 && a.keyUsed:
		// Not "failed" nor "not executed": the effect of an earlier
		// request with this key may exist. Settled by lookup, never by a
		// not-found (the API's answer under this key may have been a 2xx).
		return vKeyUsed, cause + "-key-used"
	case s == http.StatusPaymentRequired:
		return vFailed, cause // a decline: only a payment API answers 402
	case s >= 400 && s < 500 && a.apiOwn:
		return vFailed, cause
	case s >= 400 && s < 500:
		return vNotExecuted, cause + "-not-api"
	case s == http.StatusInternalServerError && a.apiOwn:
		return vAmbiguousEnd, cause
	default:
		// 502/503/504 from an intermediary, any other 5xx, a 1xx or 3xx
		// (redirects are never followed): the request may still be
		// running behind it.
		return vAmbiguous, cause
	}
}

// misconfigured says what a not-executed 4xx that is not the API's own
// probably means, for the error the caller sees.
func misconfigured(status int) string {
	switch status {
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		return "the answer is not the API's own: probably a wrong base URL (it must end in /v1) or a proxy in the way; nothing was processed — fix the configuration and call again with the same operation ID"
	case http.StatusUnauthorized, http.StatusForbidden:
		return "the token was refused; nothing was processed — fix the credential and call again with the same operation ID"
	}
	return "an intermediary refused the request before the API processed it; nothing was processed — call again with the same operation ID"
}
