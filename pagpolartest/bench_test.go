package pagpolartest

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// benchPix sends PIX charges over one keep-alive connection; key(i) names
// the key of the i-th request.
func benchPix(b *testing.B, key func(i int) string) {
	s := NewServer(b)
	body := pixBody("offer-basic", "order-bench")
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req, err := http.NewRequest("POST", s.URL+wire.RoutePix, strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set(wire.HeaderAuthorization, "Bearer "+s.Token)
		req.Header.Set(wire.HeaderIdempotencyKey, key(i))
		res, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 201 {
			b.Fatalf("status %d", res.StatusCode)
		}
	}
}

// BenchmarkChargeNewKey: every request creates a sale.
func BenchmarkChargeNewKey(b *testing.B) { benchPix(b, strconv.Itoa) }

// BenchmarkChargeReplay: every request after the first is a replay.
func BenchmarkChargeReplay(b *testing.B) { benchPix(b, func(int) string { return "same" }) }
