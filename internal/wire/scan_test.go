package wire

import (
	"bytes"
	"encoding/json"
	"testing"
)

// scanObject must read exactly what json.Unmarshal into a map of raw
// messages reads.
func FuzzScanObject(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a":1}`, `{"a":"x","b":{"c":[1,2,{"d":"}"}]},"e":null}`, `{"k\"ey":"v\\"}`, `{"a":1,"a":2}`,
		` { "a" : "b" } `, `null`, `[]`, `{"a":}`, `{"identifier":"s1","amount":99.9,"pix":{"qr_code":"x"}}`,
		`{"\u00e9":"\u00e9"}`, `{"a":"\\"}`, `{"a":true,"b":false}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want map[string]json.RawMessage
		werr := json.Unmarshal(b, &want)
		got, gerr := scanObject(b)
		if werr != nil || want == nil {
			if gerr == nil {
				t.Fatalf("%q: scanObject accepted what json.Unmarshal refuses (%v)", b, werr)
			}
			return
		}
		if gerr != nil {
			t.Fatalf("%q: %v", b, gerr)
		}
		if got.Len() != len(want) {
			t.Fatalf("%q: %d members, want %d", b, got.Len(), len(want))
		}
		for k, v := range want {
			g, _ := got.Get(k)
			if !bytes.Equal(bytes.TrimSpace(g), bytes.TrimSpace(v)) {
				t.Fatalf("%q: member %q = %q, want %q", b, k, g, v)
			}
		}
	})
}
