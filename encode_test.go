package pagpolar

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// The hand-written encoders must produce exactly encoding/json's bytes:
// the records they write are read with encoding/json, by this version and
// by earlier ones.

var oddStrings = []string{"", "sale_123", "order-42/ç", "a\"b\\c", "<tag>&amp;", "line\nbreak\ttab\x01", "\u2028\u2029", "\xff\xfe invalid utf-8",
	"emoji 🙂", "ünïcödé", " spaced ", "{\"json\":1}", "\x7f del"}

var oddTimes = []time.Time{{}, time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 9, 0, 0, 123456789, time.FixedZone("BRT", -3*3600)),
	time.Date(2026, 1, 2, 3, 4, 5, 100, time.FixedZone("odd", 3600+30*60)), time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
	time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
	time.Date(2026, 6, 1, 0, 0, 0, 0, time.FixedZone("secs", 3600+7)), time.Now(), time.Now().Round(0)}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

func randMeta(r *rand.Rand) opMeta {
	strs := func() []string {
		switch r.IntN(3) {
		case 0:
			return nil
		case 1:
			return []string{}
		}
		out := make([]string, 1+r.IntN(3))
		for i := range out {
			out[i] = pick(r, oddStrings)
		}
		return out
	}
	return opMeta{Path: pick(r, oddStrings), ExternalReference: pick(r, oddStrings), OfferID: pick(r, oddStrings), Method: pick(r, oddStrings),
		Amount: pick(r, []int64{0, 1, -1, 9990, 1 << 62}), SaleID: pick(r, oddStrings), SubscriptionID: pick(r, oddStrings),
		Snapshot: strs(), Snapshotted: r.IntN(2) == 0, SnapshotOffer: pick(r, oddStrings), SnapshotNextOffer: pick(r, oddStrings),
		Floor: pick(r, oddTimes), SharedFloor: pick(r, oddTimes), FloorOK: r.IntN(2) == 0,
		TrustAfter: pick(r, oddTimes), TrustAfterStore: pick(r, oddTimes), ProveBy: pick(r, oddTimes), Saw2xx: r.IntN(2) == 0, Unclear: strs()}
}

func randSale(r *rand.Rand) Sale {
	s := Sale{ID: pick(r, oddStrings), Status: pick(r, oddStrings), ExternalReference: pick(r, oddStrings), PaymentMethod: pick(r, oddStrings),
		OfferID: pick(r, oddStrings), SubscriptionID: pick(r, oddStrings), Amount: pick(r, []int64{0, 1, 9990, -5}),
		RefundedAmount: pick(r, []int64{0, 1, 9990}), CreatedAt: pick(r, oddTimes)}
	if r.IntN(2) == 0 {
		s.Pix = &PixInfo{QRCode: pick(r, oddStrings), CopyPaste: pick(r, oddStrings), ExpiresAt: pick(r, oddStrings)}
	}
	if r.IntN(3) == 0 {
		s.Boleto = &BoletoInfo{URL: pick(r, oddStrings), Barcode: pick(r, oddStrings), DueDate: pick(r, oddStrings)}
	}
	return s
}

// jsonOrNil is encoding/json's answer, nil where it refuses the value (a
// year past 9999): the hand encoder must then match what mustJSON does.
func jsonOrNil(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

func TestMetaJSONMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		m := randMeta(r)
		want := jsonOrNil(m)
		if want == nil {
			func() {
				defer func() { _ = recover() }()
				metaJSON(&m)
				t.Fatalf("metaJSON accepted a value encoding/json refuses: %+v", m)
			}()
			continue
		}
		if got := metaJSON(&m); !bytes.Equal(got, want) {
			t.Fatalf("metaJSON(%+v)\n got %s\nwant %s", m, got, want)
		}
	}
}

// TestMetaJSONComparesEveryField: the values TestMetaJSONMatchesEncodingJSON
// compares set every field of opMeta (a field added to the record and to
// metaJSON but not to randMeta would go unchecked).
func TestMetaJSONComparesEveryField(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	typ := reflect.TypeFor[opMeta]()
	set := make([]bool, typ.NumField())
	for range 2000 {
		v := reflect.ValueOf(randMeta(r))
		for i := range set {
			set[i] = set[i] || !v.Field(i).IsZero()
		}
	}
	for i, ok := range set {
		if !ok {
			t.Errorf("randMeta never sets opMeta.%s", typ.Field(i).Name)
		}
	}
}

func TestSaleResultJSONMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 20000; i++ {
		s := randSale(r)
		want := jsonOrNil(s)
		if want == nil {
			continue // mustJSON panics on both paths
		}
		if got := resultJSON(s); !bytes.Equal(got, want) {
			t.Fatalf("resultJSON(%+v)\n got %s\nwant %s", s, got, want)
		}
	}
	// Other results still go through encoding/json.
	ref := Refund{ID: "rf_1", SaleID: "sale_1", Amount: 5, Status: "completed"}
	if got, want := resultJSON(ref), jsonOrNil(ref); !bytes.Equal(got, want) {
		t.Fatalf("refund: got %s want %s", got, want)
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range oddStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("appendString(%q) = %s, want %s", s, got, want)
		}
	})
}

func BenchmarkMetaJSON(b *testing.B) {
	m := opMeta{Path: "/payments/pix", ExternalReference: "order-123", OfferID: "offer-basic", Method: "pix", Snapshotted: true,
		Floor: time.Now(), FloorOK: true, TrustAfter: time.Now(), TrustAfterStore: time.Now()}
	b.Run("hand", func(b *testing.B) {
		for b.Loop() {
			_ = metaJSON(&m)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			_ = mustJSON(m)
		}
	})
}
