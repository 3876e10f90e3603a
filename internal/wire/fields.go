package wire

import "slices"

// Which names the SDK reads for each field, per kind of answer. A field
// proves only what it was seen to carry (SAFETY rule 5): the client learns,
// per answer kind and per name, whether answers of that kind echo what it
// sent under that name, and compares a value with what it sent only then.
// So the names are listed per answer kind: a list item is not a POST
// answer, and a name read in one kind proves nothing in another. Every
// reader of an effect goes through Names.

// Answer is the kind of answer an object came in.
type Answer int

// Answer kinds.
const (
	AnswerPost    Answer = iota // the answer to a money POST (or its replay)
	AnswerList                  // an item of a list route (GET /sales, /refunds, /subscriptions)
	AnswerGet                   // an object read by its ID (GET /subscriptions/{id}, its plan changes)
	AnswerWebhook               // a webhook event's data
	answerKinds
)

func (a Answer) String() string {
	return [...]string{"POST answer", "list item", "GET by ID", "webhook data"}[a]
}

// Field is one field of an effect.
type Field int

// Fields of an effect.
const (
	FID Field = iota
	FRef
	FMethod
	FOffer
	FFromOffer
	FSubscription
	FSale
	FStatus
	FAmount
	FCreated
	FPlanChanges
	FNextOffer

	// Fields the SDK reports but never compares with what it sent: they
	// prove nothing, so they are read in every kind alike.
	FRefundedAmount // a sale's refunded amount
	FNextBillingAt  // a subscription's next charge date
	FPixQRCode      // a PIX sale's QR code (nested under "pix")
	FPixCopyPaste   // a PIX sale's copy-and-paste code
	FPixExpiresAt   // when a PIX sale's code expires
	FBoletoURL      // a boleto sale's PDF (nested under "boleto")
	FBoletoBarcode  // a boleto sale's barcode or digitable line
	FBoletoDueDate  // a boleto sale's due date
	fieldCount
)

func (f Field) String() string {
	return [...]string{"identifier", "external reference", "payment method", "offer", "from-offer", "subscription",
		"sale", "status", "amount", "creation time", "plan changes", "next offer",
		"refunded amount", "next billing date", "PIX QR code", "PIX copy-and-paste code", "PIX expiry",
		"boleto URL", "boleto barcode", "boleto due date"}[f]
}

// The names of each field, first the one the fake uses. A dotted name
// reads a member of a nested object ("offer.identifier" is
// {"offer":{"identifier":...}}). They are ASSUMED beyond the documented
// first names (CONTRACT.md), and they only ever widen what is recognised:
// a value under none of them is absent or unclear, never "different".
var (
	namesID                = []string{"identifier", "id"}
	namesExternalReference = []string{"external_reference", "externalReference"} // not "reference": it may be the API's own code
	namesPaymentMethod     = []string{"payment_method", "paymentMethod", "method", "payment_type", "payment.method"}
	namesOffer             = []string{"offer_identifier", "offer_id", "offerIdentifier", "offerId", "offer.identifier", "offer.id", "offer"}
	namesFromOffer         = []string{"from_offer_identifier", "from_offer_id", "fromOfferIdentifier", "previous_offer_identifier", "from_offer.identifier", "from_offer.id"}
	namesSubscriptionID    = []string{"subscription_id", "subscriptionId", "subscription_identifier", "subscription.id", "subscription.identifier"}
	namesSaleID            = []string{"sale_identifier", "sale_id", "saleIdentifier", "saleId", "sale.identifier", "sale.id", "transaction_id"}
	namesStatus            = []string{"status", "state"}
	namesAmount            = []string{"amount", "amount_cents", "value", "valor"} // not "total": a sale's total is not a refund's amount
	namesCreatedAt         = []string{"created_at", "createdAt", "creation_date", "created", "date_created"}
	namesPlanChanges       = []string{"plan_changes", "planChanges"}
	// A subscription's offer after a scheduled plan change (ASSUMED, as the
	// fake's next_offer_identifier).
	namesNextOffer = []string{"next_offer_identifier"}

	namesRefundedAmount = []string{"refunded_amount", "refundedAmount", "amount_refunded"}
	namesNextBillingAt  = []string{"next_billing_at", "nextBillingAt", "next_charge_at"}
	namesPixQRCode      = []string{"pix.qr_code", "pix.qrCode", "pix.qrcode"}
	namesPixCopyPaste   = []string{"pix.copy_paste", "pix.copyPaste", "pix.emv", "pix.brcode"}
	namesPixExpiresAt   = []string{"pix.expires_at", "pix.expiresAt"}
	namesBoletoURL      = []string{"boleto.url", "boleto.pdf_url", "boleto.link"}
	namesBoletoBarcode  = []string{"boleto.barcode", "boleto.digitable_line", "boleto.line"}
	namesBoletoDueDate  = []string{"boleto.due_date", "boleto.dueDate"}
)

// fieldNames is the table: for each answer kind, the names of each field,
// first the one the fake uses. The kinds read the same names today; a
// kind whose shape is learned to differ gets its own row here.
var fieldNames = func() (t [answerKinds][fieldCount][]string) {
	base := [fieldCount][]string{
		FID: namesID, FRef: namesExternalReference, FMethod: namesPaymentMethod, FOffer: namesOffer,
		FFromOffer: namesFromOffer, FSubscription: namesSubscriptionID, FSale: namesSaleID, FStatus: namesStatus,
		FAmount: namesAmount, FCreated: namesCreatedAt, FPlanChanges: namesPlanChanges, FNextOffer: namesNextOffer,
		FRefundedAmount: namesRefundedAmount, FNextBillingAt: namesNextBillingAt,
		FPixQRCode: namesPixQRCode, FPixCopyPaste: namesPixCopyPaste, FPixExpiresAt: namesPixExpiresAt,
		FBoletoURL: namesBoletoURL, FBoletoBarcode: namesBoletoBarcode, FBoletoDueDate: namesBoletoDueDate,
	}
	for a := range t {
		t[a] = base
	}
	return t
}()

// Names returns the names the SDK reads for field f in an answer of kind a.
func Names(a Answer, f Field) []string { return fieldNames[a][f] }

// AllNames returns every name any answer kind reads for field f, in the
// table's order: for tools that check what an API sends against what the
// SDK would read (apicheck), never for a decision, which reads one kind's
// names (Names).
func AllNames(f Field) []string {
	var out []string
	for a := range answerKinds {
		for _, n := range fieldNames[a][f] {
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out
}
