package pagpolar

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// Rule 10: the same operation ID with other params is an error, nothing
// sent. The record keeps a fingerprint of the params, never the params.
//
// A fingerprint is "v1:<sha256 of the public fields>" without a secret, or
// "v2:<sha256 of the public fields>:<key ID>:<HMAC-SHA256 of the private
// fields>" with one; the key ID (the first 8 bytes of the secret's SHA-256,
// in hex) names the secret that made the HMAC, so that a record made under
// an earlier secret is verified with that secret after a rotation. No other
// form is read: a record holding one is refused as foreign (fingerprintForm).

// fpSecret is one fingerprint secret and its key ID.
type fpSecret struct {
	id  string
	key []byte
}

func newFPSecret(key []byte) fpSecret {
	sum := sha256.Sum256(key)
	return fpSecret{id: hex.EncodeToString(sum[:8]), key: append([]byte(nil), key...)}
}

// fields is the input of a fingerprint. private is computed only when
// needed (a secret is configured, or a failure's message is scrubbed): it
// is the customer's data and the card token.
type fields struct {
	public  []string
	private func() []string
}

func (f fields) privateFields() []string {
	if f.private == nil {
		return nil
	}
	return f.private()
}

// encodeFields writes fs as "len:value|" each, into one buffer.
func encodeFields(fs []string) []byte {
	n := 0
	for _, f := range fs {
		n += len(f) + 22
	}
	buf := make([]byte, 0, n)
	for _, f := range fs {
		buf = strconv.AppendInt(buf, int64(len(f)), 10)
		buf = append(buf, ':')
		buf = append(buf, f...)
		buf = append(buf, '|')
	}
	return buf
}

func publicPart(fs []string) string {
	sum := sha256.Sum256(encodeFields(fs))
	return hex.EncodeToString(sum[:])
}

func privatePart(key []byte, fs []string) string {
	m := hmac.New(sha256.New, key)
	m.Write(encodeFields(fs))
	return hex.EncodeToString(m.Sum(nil))
}

// fingerprint returns the fingerprint of f under the current secret.
func (c *Client) fingerprint(f fields) string {
	pub := publicPart(f.public)
	if len(c.fpSecrets) == 0 {
		return "v1:" + pub
	}
	cur := c.fpSecrets[0]
	return "v2:" + pub + ":" + cur.id + ":" + privatePart(cur.key, f.privateFields())
}

// fingerprintForm reports whether a stored fingerprint has one of the two
// forms this SDK writes.
func fingerprintForm(stored string) bool {
	parts := strings.Split(stored, ":")
	return len(parts) == 2 && parts[0] == "v1" || len(parts) == 4 && parts[0] == "v2"
}

// foreignFingerprint is the error for a record whose fingerprint has
// another form: it was not written by this SDK, and is left as it is.
func foreignFingerprint(rec keystore.Record) error {
	form, _, _ := strings.Cut(rec.Fingerprint, ":")
	return fmt.Errorf("%w: record %q holds a fingerprint of a form this SDK does not write (%q, %d parts); it is left as it is",
		ErrForeignRecord, rec.OperationID, form, strings.Count(rec.Fingerprint, ":")+1)
}

// fingerprintMatch compares a stored fingerprint with the params of a call.
// rekey says the record was verified under an earlier secret (or before key
// IDs) and should be re-fingerprinted under the current one.
//
// What cannot be verified is not held against the call: a stored
// fingerprint without a private part, a client without secrets, or a key ID
// no configured secret has (a secret retired too early: a warning is
// logged) compare the public parts only — rule 10's documented limit
// without a secret.
func (c *Client) fingerprintMatch(stored string, f fields) (match, rekey bool) {
	parts := strings.Split(stored, ":")
	pub := publicPart(f.public)
	switch {
	case len(parts) == 2 && parts[0] == "v1":
		if parts[1] != pub {
			return false, false
		}
		return true, len(c.fpSecrets) > 0
	case len(parts) == 4 && parts[0] == "v2":
		if parts[1] != pub {
			return false, false
		}
		for i, s := range c.fpSecrets {
			if s.id == parts[2] {
				return hmac.Equal([]byte(parts[3]), []byte(privatePart(s.key, f.privateFields()))), i > 0
			}
		}
		c.log.Warn("pagpolar: a record's fingerprint was made with a secret this client no longer has; only its public fields are compared (keep earlier secrets in WithFingerprintSecret until their records are reaped)", "key_id", parts[2])
		return true, len(c.fpSecrets) > 0
	}
	return stored == c.fingerprint(f), false
}

// paramsMismatch is the error for a call whose params differ from the
// recorded operation's (SAFETY rule 10: nothing is sent). Its outcome is
// about the operation, not about this call's request:
//   - failed: the operation is over, definitely without effect
//     (OutcomeFailed); another attempt needs another operation ID;
//   - succeeded: the effect exists, so "not executed" would be false and
//     a checkout that read it would tell the buyer the order is unpaid.
//     It is ErrParamsMismatch and OutcomeUnknown (the one branch whose
//     handling — the order may be charged, never start it over — is safe),
//     and its text says the order is charged;
//   - pending, unknown or not_executed: a call with the recorded params
//     may send it (or its first request may have taken effect); even a
//     not_executed record held by nobody is not over, since a worker
//     that stalled past its lease may take it back and send, and a call
//     with the recorded params sends it. It is "outcome unknown", with the
//     advice to settle it first — a new operation ID now could charge
//     twice.
func paramsMismatch(opID string, cur keystore.Record) error {
	switch cur.State {
	case keystore.StateSucceeded:
		return &OperationError{OperationID: opID, Key: cur.Key, State: cur.State,
			Err: fmt.Errorf("%w: operation %q already SUCCEEDED with other params (its effect is %s): the order is charged; a new operation ID is a second charge, only for when you mean one", ErrParamsMismatch, opID, cur.ResultRef)}
	case keystore.StateFailed:
		return &OperationError{OperationID: opID, Key: cur.Key, State: cur.State,
			Err: fmt.Errorf("%w: operation %q is recorded (%s) with other params; a new attempt needs a new operation ID", ErrParamsMismatch, opID, cur.State)}
	}
	return &OutcomeUnknownError{OperationID: opID, Key: cur.Key,
		Reason: fmt.Sprintf("operation %q is recorded with other params and is %s, not settled for good: a call with those params may send it, or an earlier request may have taken effect. "+
			"Settle it first — call again with the params it was recorded with, Client.Resume, or `pagpolar ops settle` — and never use a new operation ID while it is unsettled", opID, cur.State)}
}
