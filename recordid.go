package pagpolar

import (
	"fmt"
	"strings"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// RecordID is the key store's ID of an operation: the credential ID,
// escaped so that no credential's records can be taken for another's
// ("acme/eu" is written "acme%2Feu", "%" as "%25"), a slash, and the
// operation ID as given. Stores keep operations of many credentials; a
// client lists and settles only the IDs under RecordID(its credential, "").
// It is the only form the SDK reads or writes: a record under one of a
// client's IDs whose key does not prove it this credential's operation
// (ownsKey) is refused with ErrForeignRecord, never read as another form.
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

// ownsRecord reports whether a record under this client's ID of opID is
// this credential's operation opID: its key is the operation's derived key
// or one of the random keys this SDK makes for it (randomKey). Both forms
// are checked in either mode, so a client never settles a record its key
// does not tie to this credential and operation.
func (c *Client) ownsRecord(rec keystore.Record, opID string) bool {
	return rec.Key == c.derivedKey(opID) || c.isRandomKey(rec.Key, opID)
}

// foreignRecord is the error for a record ownsRecord refuses.
func foreignRecord(rec keystore.Record) error {
	return fmt.Errorf("%w: record %q (kind %q) carries key %q, which is not this credential's key for the operation: "+
		"another credential's record, or a form this SDK does not write; it is left as it is",
		ErrForeignRecord, rec.OperationID, rec.Kind, rec.Key)
}
