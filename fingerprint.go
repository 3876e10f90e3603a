package pagpolar

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// Rule 10: the same operation ID with other params is an error, nothing
// sent. The record keeps a fingerprint of the params, never the params.

// fingerprint returns "v1:<sha256 of public fields>[:<hmac of private fields>]".
// Only the public part is compared when the stored or the new fingerprint has
// no private part, so enabling the secret later does not break old records.
func (c *Client) fingerprint(public, private []string) string {
	h := sha256.New()
	for _, f := range public {
		fmt.Fprintf(h, "%d:%s|", len(f), f)
	}
	fp := "v1:" + hex.EncodeToString(h.Sum(nil))
	if len(c.fpSecret) > 0 {
		m := hmac.New(sha256.New, c.fpSecret)
		for _, f := range private {
			fmt.Fprintf(m, "%d:%s|", len(f), f)
		}
		fp += ":" + hex.EncodeToString(m.Sum(nil))
	}
	return fp
}

func sameFingerprint(a, b string) bool {
	if a == b {
		return true
	}
	pa, pb := a, b
	if len(pa) > 67 {
		pa = pa[:67]
	}
	if len(pb) > 67 {
		pb = pb[:67]
	}
	// One side lacks the private part: compare the public parts only.
	return (len(a) == 67 || len(b) == 67) && pa == pb
}

// paramsMismatch is the error for a call whose params differ from the
// recorded operation's. On a settled operation it is ErrParamsMismatch: the
// operation is over, and another charge needs another operation ID. On an
// unsettled one (pending, unknown) the first request may have taken effect:
// the answer is "outcome unknown", and the advice is to settle it first —
// a new operation ID now could charge twice.
func paramsMismatch(opID string, cur keystore.Record) error {
	if cur.State.Settled() {
		return &OperationError{OperationID: opID, Key: cur.Key, State: string(cur.State),
			Err: fmt.Errorf("%w: operation %q is recorded (%s) with other params; use a new operation ID for a different charge", ErrParamsMismatch, opID, cur.State)}
	}
	return &OutcomeUnknownError{OperationID: opID, Key: cur.Key,
		Reason: fmt.Sprintf("operation %q is recorded with other params and is still %s: its first request may have taken effect. "+
			"Settle it first — call again with the params it was recorded with, Client.Resume, or `pagpolar ops settle` — and never use a new operation ID while it is unsettled", opID, cur.State)}
}
