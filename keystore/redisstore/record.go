package redisstore

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// recordLayout names how a record is stored: one string value per record,
// the MessagePack array (Lua's cmsgpack) of recordLayout and then the
// fields of recordFields, every one a string. One compact value costs
// about half of a hash whose longer values (result, meta, fingerprint)
// exceed hash-max-listpack-value and so turn it into a hashtable. Every
// shard marker names it (field rl); New refuses a prefix whose markers
// name another or none.
const recordLayout = "r1"

// recordFields are a record's fields in their order in the stored array
// (after recordLayout):
//
//	op key kind fp st   OperationID, Key, Kind, Fingerprint, State
//	ver att             Version, Attempts
//	fs ls               FirstSentAt, LastSentAt: Unix ns, "" for the zero time
//	rr res err meta     ResultRef, Result, Error, Meta (bytes as is)
//	lo lt le            LeaseOwner, LeaseToken, LeaseExpiresAt (Unix µs, Redis clock)
//	ca ua               CreatedAt, UpdatedAt (Unix µs, Redis clock)
//	cw uw aw            nonces of the last Create, Update and Acquire ("": none)
var recordFields = [...]string{
	"op", "key", "kind", "fp", "st", "ver", "att", "fs", "ls", "rr", "res", "err", "meta",
	"lo", "lt", "le", "ca", "ua", "cw", "uw", "aw",
}

// luaRecordFields is recordFields as the scripts' table F of positions.
func luaRecordFields() string {
	var b strings.Builder
	b.WriteString("local RL = '" + recordLayout + "'\nlocal NF = " + strconv.Itoa(len(recordFields)+1) + "\nlocal F = {")
	for i, f := range recordFields {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(f + " = " + strconv.Itoa(i+2))
	}
	b.WriteString("}\n")
	return b.String()
}

// layoutErrPrefix starts the error a script raises on such a record.
const layoutErrPrefix = "LAYOUT "

func encodeTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.UnixNano(), 10)
}

// encodeMicros formats t as the Unix µs the scripts store (ca, ua, le).
func encodeMicros(t time.Time) string { return strconv.FormatInt(t.UnixMicro(), 10) }

// unpackRecord reads a stored record value into a map of its fields. It
// fails, wrapping ErrLayout, on a value this layout did not write.
func unpackRecord(v string) (map[string]string, error) {
	bad := func(why string) error {
		return fmt.Errorf("%w: a string value that is not a record of layout %s (%s)", ErrLayout, recordLayout, why)
	}
	if len(v) < 3 || v[0] != 0xdc {
		return nil, bad("no array header")
	}
	if n := int(v[1])<<8 | int(v[2]); n != len(recordFields)+1 {
		return nil, bad(fmt.Sprintf("%d items, want %d", n, len(recordFields)+1))
	}
	v = v[3:]
	next := func() (string, bool) {
		if len(v) == 0 {
			return "", false
		}
		var n, hdr int
		switch c := v[0]; {
		case c >= 0xa0 && c <= 0xbf:
			n, hdr = int(c&0x1f), 1
		case c == 0xd9 && len(v) >= 2:
			n, hdr = int(v[1]), 2
		case c == 0xda && len(v) >= 3:
			n, hdr = int(v[1])<<8|int(v[2]), 3
		case c == 0xdb && len(v) >= 5:
			n, hdr = int(v[1])<<24|int(v[2])<<16|int(v[3])<<8|int(v[4]), 5
		default:
			return "", false
		}
		if len(v) < hdr+n {
			return "", false
		}
		s := v[hdr : hdr+n]
		v = v[hdr+n:]
		return s, true
	}
	if tag, ok := next(); !ok || tag != recordLayout {
		return nil, bad(fmt.Sprintf("layout tag %q", tag))
	}
	h := make(map[string]string, len(recordFields))
	for _, f := range recordFields {
		s, ok := next()
		if !ok {
			return nil, bad("field " + f + " is not a string")
		}
		h[f] = s
	}
	if len(v) != 0 {
		return nil, bad("trailing bytes")
	}
	return h, nil
}

// packRecord is unpackRecord's inverse, for tests that write records as
// the scripts do.
func packRecord(h map[string]string) string {
	var b []byte
	str := func(s string) {
		switch n := len(s); {
		case n < 32:
			b = append(b, 0xa0|byte(n))
		case n < 1<<8:
			b = append(b, 0xd9, byte(n))
		case n < 1<<16:
			b = append(b, 0xda, byte(n>>8), byte(n))
		default:
			b = append(b, 0xdb, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
		}
		b = append(b, s...)
	}
	n := len(recordFields) + 1
	b = append(b, 0xdc, byte(n>>8), byte(n))
	str(recordLayout)
	for _, f := range recordFields {
		str(h[f])
	}
	return string(b)
}

// decodeRecord builds a Record from its fields. It fails on fields this
// package did not write, rather than returning a record with silently
// zeroed fields.
func decodeRecord(h map[string]string) (keystore.Record, error) {
	var r keystore.Record
	r.OperationID = h["op"]
	if r.OperationID == "" {
		return r, fmt.Errorf("redisstore: record without op field")
	}
	r.Key, r.Kind, r.Fingerprint = h["key"], h["kind"], h["fp"]
	r.State = keystore.State(h["st"])
	r.ResultRef, r.Error, r.LeaseOwner = h["rr"], h["err"], h["lo"]
	if v := h["res"]; v != "" {
		r.Result = []byte(v)
	}
	if v := h["meta"]; v != "" {
		r.Meta = []byte(v)
	}
	ints := []struct {
		field string
		dst   *int64
	}{{"ver", &r.Version}, {"lt", &r.LeaseToken}}
	for _, f := range ints {
		n, err := strconv.ParseInt(h[f.field], 10, 64)
		if err != nil {
			return r, fmt.Errorf("redisstore: record %q field %s: %w", r.OperationID, f.field, err)
		}
		*f.dst = n
	}
	att, err := strconv.Atoi(h["att"])
	if err != nil {
		return r, fmt.Errorf("redisstore: record %q field att: %w", r.OperationID, err)
	}
	r.Attempts = att
	micros := []struct {
		field string
		dst   *time.Time
	}{{"le", &r.LeaseExpiresAt}, {"ca", &r.CreatedAt}, {"ua", &r.UpdatedAt}}
	for _, f := range micros {
		n, err := strconv.ParseInt(h[f.field], 10, 64)
		if err != nil {
			return r, fmt.Errorf("redisstore: record %q field %s: %w", r.OperationID, f.field, err)
		}
		*f.dst = time.UnixMicro(n)
	}
	nanos := []struct {
		field string
		dst   *time.Time
	}{{"fs", &r.FirstSentAt}, {"ls", &r.LastSentAt}}
	for _, f := range nanos {
		v := h[f.field]
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return r, fmt.Errorf("redisstore: record %q field %s: %w", r.OperationID, f.field, err)
		}
		*f.dst = time.Unix(0, n)
	}
	return r, nil
}

// flatToMap turns a script's {field, value, ...} reply into a map.
func flatToMap(flat []any) (map[string]string, error) {
	if len(flat)%2 != 0 {
		return nil, fmt.Errorf("redisstore: odd-length record reply (%d items)", len(flat))
	}
	h := make(map[string]string, len(flat)/2)
	for i := 0; i < len(flat); i += 2 {
		k, ok1 := flat[i].(string)
		v, ok2 := flat[i+1].(string)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("redisstore: record reply item %d is %T/%T, want strings", i, flat[i], flat[i+1])
		}
		h[k] = v
	}
	return h, nil
}
