package pagpolar

import (
	"strings"
)

// RecordID is the key store's ID of an operation: the credential ID,
// escaped so that no credential's records can be taken for another's
// ("acme/eu" is written "acme%2Feu", "%" as "%25"), a slash, and the
// operation ID as given. Stores keep operations of many credentials; a
// client lists and settles only the IDs under RecordID(its credential, "").
//
// Records written before this escaping existed are named credentialID +
// "/" + operationID; they differ from RecordID only for credentials that
// contain "/" or "%", and the client still finds them (see legacyStoreID).
func RecordID(credentialID, operationID string) string {
	return escapeCredential(credentialID) + "/" + operationID
}

// SplitRecordID returns the credential and operation IDs of a RecordID.
func SplitRecordID(id string) (credentialID, operationID string, ok bool) {
	cred, op, found := strings.Cut(id, "/")
	if !found || op == "" {
		return "", "", false
	}
	c, err := unescapeCredential(cred)
	if err != nil {
		return "", "", false
	}
	return c, op, true
}

func escapeCredential(c string) string {
	if !strings.ContainsAny(c, "%/") {
		return c
	}
	return strings.NewReplacer("%", "%25", "/", "%2F").Replace(c)
}

func unescapeCredential(c string) (string, error) {
	if !strings.Contains(c, "%") {
		return c, nil
	}
	var b strings.Builder
	for i := 0; i < len(c); i++ {
		if c[i] != '%' {
			b.WriteByte(c[i])
			continue
		}
		switch {
		case strings.HasPrefix(c[i:], "%25"):
			b.WriteByte('%')
		case strings.HasPrefix(c[i:], "%2F"):
			b.WriteByte('/')
		default:
			return "", errBadRecordID
		}
		i += 2
	}
	return b.String(), nil
}

var errBadRecordID = strErr("pagpolar: not a record ID")

type strErr string

func (e strErr) Error() string { return string(e) }

// storeID is this client's record ID of an operation.
func (c *Client) storeID(opID string) string { return RecordID(c.credentialID, opID) }

// legacyStoreID is the ID an earlier version wrote for opID, when it
// differs from storeID ("" otherwise).
func (c *Client) legacyStoreID(opID string) string {
	if escapeCredential(c.credentialID) == c.credentialID {
		return ""
	}
	return c.credentialID + "/" + opID
}

// ownsRecord reports whether a record listed under one of this client's
// prefixes is this credential's operation opID: a record of another
// credential whose (unescaped, older) ID happens to share the prefix
// carries another derived key. With random keys that cannot be checked.
func (c *Client) ownsRecord(rec keystoreRecordKey, opID string) bool {
	return c.randomKeys || rec.Key == c.idempotencyKey(opID)
}

// keystoreRecordKey is the part of a record ownsRecord reads.
type keystoreRecordKey struct{ Key string }
