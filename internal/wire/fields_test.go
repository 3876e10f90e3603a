package wire

import (
	"slices"
	"testing"
)

// TestNames_EveryFieldHasNamesInEveryAnswerKind: the table is complete (a
// field without names in some kind would read as absent there, silently),
// each field's first name is the documented one, and AllNames is the union
// over kinds without repeats.
func TestNames_EveryFieldHasNamesInEveryAnswerKind(t *testing.T) {
	documented := map[Field]string{
		FID: "identifier", FRef: "external_reference", FMethod: "payment_method", FOffer: "offer_identifier",
		FSale: "sale_identifier", FStatus: "status", FAmount: "amount", FCreated: "created_at",
		FPlanChanges: "plan_changes", FRefundedAmount: "refunded_amount", FNextBillingAt: "next_billing_at",
		FPixQRCode: "pix.qr_code", FPixCopyPaste: "pix.copy_paste", FPixExpiresAt: "pix.expires_at",
		FBoletoURL: "boleto.url", FBoletoBarcode: "boleto.barcode", FBoletoDueDate: "boleto.due_date",
	}
	for f := range fieldCount {
		if f.String() == "" {
			t.Errorf("field %d has no name", f)
		}
		for a := range answerKinds {
			n := Names(a, f)
			if len(n) == 0 {
				t.Errorf("%s: no names in a %s", f, a)
				continue
			}
			if want, ok := documented[f]; ok && n[0] != want {
				t.Errorf("%s in a %s: first name %q, want the documented %q", f, a, n[0], want)
			}
		}
		all := AllNames(f)
		for i, n := range all {
			if slices.Contains(all[:i], n) {
				t.Errorf("%s: AllNames repeats %q", f, n)
			}
		}
		for a := range answerKinds {
			for _, n := range Names(a, f) {
				if !slices.Contains(all, n) {
					t.Errorf("%s: AllNames lacks %q of a %s", f, n, a)
				}
			}
		}
	}
}

// TestNames_NestedReportedFieldsReadThroughTheTable: the nested members of
// a sale's pix and boleto objects are read under the table's dotted names,
// whichever of them the API uses.
func TestNames_NestedReportedFieldsReadThroughTheTable(t *testing.T) {
	cases := []struct {
		body string
		f    Field
		want string
	}{
		{`{"pix":{"qr_code":"q"}}`, FPixQRCode, "q"},
		{`{"pix":{"qrCode":"q"}}`, FPixQRCode, "q"},
		{`{"pix":{"emv":"c"}}`, FPixCopyPaste, "c"},
		{`{"boleto":{"digitable_line":"l"}}`, FBoletoBarcode, "l"},
		{`{"boleto":{"pdf_url":"u"}}`, FBoletoURL, "u"},
		{`{"boleto":{"dueDate":"2026-12-03"}}`, FBoletoDueDate, "2026-12-03"},
		{`{"next_charge_at":"2027-01-01"}`, FNextBillingAt, "2027-01-01"},
		{`{"pix":"q"}`, FPixQRCode, ""},
	}
	for _, c := range cases {
		o, err := ParseObject([]byte(c.body))
		if err != nil {
			t.Fatal(err)
		}
		for a := range answerKinds {
			if got, _ := o.Str(Names(a, c.f)); got != c.want {
				t.Errorf("%s of %s in a %s: %q, want %q", c.f, c.body, a, got, c.want)
			}
		}
	}
	o, _ := ParseObject([]byte(`{"amountRefunded":1,"refundedAmount":250}`))
	if got := o.Amount(Names(AnswerGet, FRefundedAmount)).Best(); got != 250 {
		t.Errorf("refunded amount %d, want 250", got)
	}
}
