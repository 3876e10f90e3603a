package redisstore

import (
	"fmt"
	"strconv"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// Hash fields of a record. Short names: a record is stored once per
// operation for 30 days, so field names are a real share of its size.
//
//	op key kind fp st   OperationID, Key, Kind, Fingerprint, State
//	ver att             Version, Attempts
//	fs ls               FirstSentAt, LastSentAt: Unix ns, "" for the zero time
//	rr res err meta     ResultRef, Result, Error, Meta (bytes as is)
//	lo lt le            LeaseOwner, LeaseToken, LeaseExpiresAt (Unix µs, Redis clock)
//	ca ua               CreatedAt, UpdatedAt (Unix µs, Redis clock)
//	cw uw aw            nonces of the last Create, Update and Acquire

func encodeTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.UnixNano(), 10)
}

// encodeMicros formats t as the Unix µs the scripts store (ca, ua, le).
func encodeMicros(t time.Time) string { return strconv.FormatInt(t.UnixMicro(), 10) }

// decodeRecord builds a Record from a hash. It fails on a hash this package
// did not write, rather than returning a record with silently zeroed fields.
func decodeRecord(h map[string]string) (keystore.Record, error) {
	var r keystore.Record
	r.OperationID = h["op"]
	if r.OperationID == "" {
		return r, fmt.Errorf("redisstore: record hash without op field")
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

// flatToMap turns a script's {field, value, ...} reply into a hash.
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
