package pagpolar

import (
	"testing"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// TestEffect_ReportedFieldsReadThroughTheTable: the fields a result reports
// but never compares (a PIX code, a boleto's barcode, a sale's refunded
// amount, a subscription's next charge) are read under the table's names in
// every answer kind, the documented name and its aliases alike.
func TestEffect_ReportedFieldsReadThroughTheTable(t *testing.T) {
	documented := `{"identifier":"s1","status":"paid","refunded_amount":300,` +
		`"pix":{"qr_code":"q","copy_paste":"c","expires_at":"e"},"boleto":{"url":"u","barcode":"b","due_date":"d"}}`
	aliases := `{"id":"s1","status":"paid","amount_refunded":300,` +
		`"pix":{"qrcode":"q","brcode":"c","expiresAt":"e"},"boleto":{"link":"u","digitable_line":"b","dueDate":"d"}}`
	for _, body := range []string{documented, aliases} {
		for _, a := range []wire.Answer{wire.AnswerPost, wire.AnswerList, wire.AnswerGet, wire.AnswerWebhook} {
			e, err := readEffect(effSale, a, []byte(body))
			if err != nil {
				t.Fatal(err)
			}
			s := e.sale(&shapes{})
			if s.RefundedAmount != 300 {
				t.Errorf("%s %s: refunded %d, want 300", a, body, s.RefundedAmount)
			}
			if s.Pix == nil || *s.Pix != (PixInfo{QRCode: "q", CopyPaste: "c", ExpiresAt: "e"}) {
				t.Errorf("%s %s: pix %+v", a, body, s.Pix)
			}
			if s.Boleto == nil || *s.Boleto != (BoletoInfo{URL: "u", Barcode: "b", DueDate: "d"}) {
				t.Errorf("%s %s: boleto %+v", a, body, s.Boleto)
			}
		}
	}
	e, err := readEffect(effSale, wire.AnswerPost, []byte(`{"identifier":"s2","pix":{"expires_at":"e"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if s := e.sale(&shapes{}); s.Pix != nil || s.Boleto != nil {
		t.Errorf("a sale without a PIX code or a boleto reports pix %+v, boleto %+v", s.Pix, s.Boleto)
	}
	e, err = readEffect(effSubscription, wire.AnswerGet, []byte(`{"identifier":"sub1","nextBillingAt":"2027-01-01"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := e.subscription(&shapes{}).NextBillingAt; got != "2027-01-01" {
		t.Errorf("next billing %q", got)
	}
}
