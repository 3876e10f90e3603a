package pagpolar

import (
	"encoding/json"
	"strconv"
	"time"
)

// Hand-written JSON for the two values every charge stores: the record's
// meta and a sale result (reflection was the largest SDK-owned cost per
// charge). Each produces exactly the bytes encoding/json would
// (encode_test.go compares them over generated and fuzzed values); any
// string or time the fast path does not cover goes through encoding/json
// itself, so the output never differs. Reading stays encoding/json.

// resultJSON is the stored result of a success.
func resultJSON(v any) []byte {
	if s, ok := v.(Sale); ok {
		return appendSale(make([]byte, 0, 256), &s)
	}
	return mustJSON(v)
}

// metaJSON is a record's meta.
func metaJSON(m *opMeta) []byte {
	b := make([]byte, 0, 160)
	b = append(b, `{"path":`...)
	b = appendString(b, m.Path)
	b = appendOptString(b, `,"external_reference":`, m.ExternalReference)
	b = appendOptString(b, `,"offer_id":`, m.OfferID)
	b = appendOptString(b, `,"method":`, m.Method)
	if m.Amount != 0 {
		b = append(b, `,"amount":`...)
		b = strconv.AppendInt(b, m.Amount, 10)
	}
	b = appendOptString(b, `,"sale_id":`, m.SaleID)
	b = appendOptString(b, `,"subscription_id":`, m.SubscriptionID)
	b = appendOptStrings(b, `,"snapshot":`, m.Snapshot)
	b = appendOptBool(b, `,"snapshotted":true`, m.Snapshotted)
	b = appendOptString(b, `,"snapshot_offer":`, m.SnapshotOffer)
	b = appendOptString(b, `,"snapshot_next_offer":`, m.SnapshotNextOffer)
	b = appendOptTime(b, `,"floor":`, m.Floor)
	b = appendOptTime(b, `,"shared_floor":`, m.SharedFloor)
	b = appendOptBool(b, `,"floor_ok":true`, m.FloorOK)
	b = appendOptTime(b, `,"trust_after":`, m.TrustAfter)
	b = appendOptTime(b, `,"trust_after_store":`, m.TrustAfterStore)
	b = appendOptTime(b, `,"prove_by":`, m.ProveBy)
	b = appendOptBool(b, `,"saw_2xx":true`, m.Saw2xx)
	b = appendOptStrings(b, `,"unclear":`, m.Unclear)
	return append(b, '}')
}

func appendSale(b []byte, s *Sale) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, s.ID)
	b = append(b, `,"status":`...)
	b = appendString(b, s.Status)
	b = append(b, `,"decision":`...)
	b = appendString(b, string(s.Decision))
	b = append(b, `,"decision_at":`...)
	b = appendTime(b, s.DecisionAt)
	b = append(b, `,"external_reference":`...)
	b = appendString(b, s.ExternalReference)
	b = append(b, `,"payment_method":`...)
	b = appendString(b, s.PaymentMethod)
	b = appendOptString(b, `,"offer_id":`, s.OfferID)
	b = appendOptString(b, `,"subscription_id":`, s.SubscriptionID)
	b = append(b, `,"amount":`...)
	b = strconv.AppendInt(b, s.Amount, 10)
	if s.RefundedAmount != 0 {
		b = append(b, `,"refunded_amount":`...)
		b = strconv.AppendInt(b, s.RefundedAmount, 10)
	}
	b = append(b, `,"created_at":`...)
	b = appendTime(b, s.CreatedAt)
	if p := s.Pix; p != nil {
		b = append(b, `,"pix":{"qr_code":`...)
		b = appendString(b, p.QRCode)
		b = append(b, `,"copy_paste":`...)
		b = appendString(b, p.CopyPaste)
		b = appendOptString(b, `,"expires_at":`, p.ExpiresAt)
		b = append(b, '}')
	}
	if o := s.Boleto; o != nil {
		b = append(b, `,"boleto":{"url":`...)
		b = appendString(b, o.URL)
		b = append(b, `,"barcode":`...)
		b = appendString(b, o.Barcode)
		b = append(b, `,"due_date":`...)
		b = appendString(b, o.DueDate)
		b = append(b, '}')
	}
	return append(b, '}')
}

func appendOptString(b []byte, key, v string) []byte {
	if v == "" {
		return b
	}
	return appendString(append(b, key...), v)
}

func appendOptBool(b []byte, keyTrue string, v bool) []byte {
	if !v {
		return b
	}
	return append(b, keyTrue...)
}

func appendOptStrings(b []byte, key string, vs []string) []byte {
	if len(vs) == 0 {
		return b
	}
	b = append(b, key...)
	b = append(b, '[')
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, v)
	}
	return append(b, ']')
}

func appendOptTime(b []byte, key string, t time.Time) []byte {
	if t.IsZero() {
		return b
	}
	return appendTime(append(b, key...), t)
}

// appendString appends s as encoding/json does. The fast path takes plain
// printable ASCII with nothing to escape (IDs, references, statuses);
// anything else is encoded by encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			j, err := json.Marshal(s)
			if err != nil {
				panic("pagpolar: marshal string: " + err.Error()) // cannot happen for a string
			}
			return append(b, j...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendTime appends t as time.Time.MarshalJSON does (RFC 3339 with
// nanoseconds); a time it would refuse or format otherwise (a year outside
// 0–9999, an offset with seconds) goes through encoding/json.
func appendTime(b []byte, t time.Time) []byte {
	_, off := t.Zone()
	if y := t.Year(); y < 0 || y > 9999 || off%60 != 0 {
		return append(b, mustJSON(t)...)
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}
