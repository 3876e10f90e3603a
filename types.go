package pagpolar

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// Customer is the payer. Personal data is sent to the API but never kept in
// the key store.
type Customer struct {
	Name     string
	Email    string
	Document string // CPF (11 digits) or CNPJ (14 digits), punctuation allowed; or empty (the PIX example sends "")
	Phone    string // optional
}

// Sale is a PagPolar sale. Amounts are integer centavos. Status is kept as
// the API sends it; Decision is what the SDK reads in it (a status it does
// not know is DecisionUnrecognized, never paid), and DecisionAt when the
// SDK learned it (its own clock): a later answer, webhook event or
// Client.Refresh moves it forward.
type Sale struct {
	ID                string      `json:"id"`
	Status            string      `json:"status"`
	Decision          Decision    `json:"decision"`
	DecisionAt        time.Time   `json:"decision_at"`
	ExternalReference string      `json:"external_reference"`
	PaymentMethod     string      `json:"payment_method"`
	OfferID           string      `json:"offer_id,omitempty"`
	SubscriptionID    string      `json:"subscription_id,omitempty"` // set on subscription and renewal sales
	Amount            int64       `json:"amount"`
	RefundedAmount    int64       `json:"refunded_amount,omitempty"`
	CreatedAt         time.Time   `json:"created_at"`
	Pix               *PixInfo    `json:"pix,omitempty"`
	Boleto            *BoletoInfo `json:"boleto,omitempty"`
}

// PixInfo is what the payer needs to pay a PIX sale.
type PixInfo struct {
	QRCode    string `json:"qr_code"`
	CopyPaste string `json:"copy_paste"`
	ExpiresAt string `json:"expires_at,omitempty"`
}

// BoletoInfo is what the payer needs to pay a boleto.
type BoletoInfo struct {
	URL     string `json:"url"`
	Barcode string `json:"barcode"`
	DueDate string `json:"due_date"`
}

// Refund is a (possibly partial) refund of a sale. Status, Decision and
// DecisionAt as in Sale: a refund may be requested now and completed later.
type Refund struct {
	ID         string    `json:"id"`
	SaleID     string    `json:"sale_id"`
	Amount     int64     `json:"amount"`
	Status     string    `json:"status"`
	Decision   Decision  `json:"decision"`
	DecisionAt time.Time `json:"decision_at"`
	CreatedAt  time.Time `json:"created_at"`
}

// Subscription is a recurring charge. Each renewal is a new Sale under the
// subscription's external reference. Status, Decision and DecisionAt as
// in Sale.
type Subscription struct {
	ID                string       `json:"id"`
	Status            string       `json:"status"`
	Decision          Decision     `json:"decision"`
	DecisionAt        time.Time    `json:"decision_at"`
	ExternalReference string       `json:"external_reference"`
	OfferID           string       `json:"offer_id"`
	PaymentMethod     string       `json:"payment_method"`
	Amount            int64        `json:"amount"`
	NextBillingAt     string       `json:"next_billing_at,omitempty"`
	CreatedAt         time.Time    `json:"created_at"`
	PlanChanges       []PlanChange `json:"plan_changes,omitempty"`
}

// PlanChange moves a subscription to another plan's offer. Status,
// Decision and DecisionAt as in Sale: a change accepted now and applied at
// the next billing cycle is DecisionScheduled. ID is empty when the API
// answered the change with the subscription rather than a plan change.
type PlanChange struct {
	ID             string    `json:"id"`
	SubscriptionID string    `json:"subscription_id"`
	FromOfferID    string    `json:"from_offer_id,omitempty"`
	OfferID        string    `json:"offer_id"`
	Status         string    `json:"status"`
	Decision       Decision  `json:"decision"`
	DecisionAt     time.Time `json:"decision_at"`
	CreatedAt      time.Time `json:"created_at"`
}

func wireCustomer(c Customer) wire.Customer {
	return wire.Customer{Name: c.Name, Email: c.Email, Document: c.Document, Phone: c.Phone}
}

// resultOf returns the typed result of a settled operation: the value the
// call obtained, or the one decoded from the stored record.
// resultOf is the typed result of a settled operation. A stored result
// that does not decode is an *OperationError whose outcome is unknown: the
// record says the operation succeeded, but a record this SDK cannot read
// whole is not one it can answer from (the store was written by something
// else, or damaged); nothing proves what it holds, so never not_executed.
func resultOf[T any](opID string, res *settled) (*T, error) {
	if v, ok := res.value.(T); ok {
		return &v, nil
	}
	v, err := decodeResult[T](res.rec.Result)
	if err != nil {
		return nil, &OperationError{OperationID: opID, Key: res.rec.Key, State: res.rec.State,
			Err: fmt.Errorf("the record says %s (effect %s) but its stored result is unreadable: %w", res.rec.State, res.rec.ResultRef, err)}
	}
	return v, nil
}

func decodeResult[T any](b []byte) (*T, error) {
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	return &v, nil
}
