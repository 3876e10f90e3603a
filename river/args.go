package pagpolarriver

import (
	"context"
	"strings"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	pagpolar "github.com/pagpolar/pagpolar-go"
)

// The job kinds, one per money operation.
const (
	KindPix        = "pagpolar_pix"
	KindBoleto     = "pagpolar_boleto"
	KindCreditCard = "pagpolar_credit_card"
	KindSubscribe  = "pagpolar_subscribe"
	KindPlanChange = "pagpolar_plan_change"
	KindRefund     = "pagpolar_refund"
)

// An Intent is the job args of one money operation: PixIntent,
// BoletoIntent, CreditCardIntent, SubscribeIntent, PlanChangeIntent or
// RefundIntent. Each carries its operation ID, which the caller derives
// from its own records (the order, the refund row); River's job ID plays
// no part in it, so a job inserted twice, retried, or rescued after a
// crash runs the same operation, and the SDK charges it at most once.
//
// An intent holds only what the SDK's own record may hold (offer,
// external reference, installments, sale and subscription IDs, amounts):
// the payer's name, e-mail, document, phone and card token are never in
// the job row. The worker loads them when it runs, through the Resolver,
// by OrderID.
type Intent interface {
	river.JobArgs
	river.JobArgsWithInsertOpts
	// OperationIDOf is the intent's operation ID.
	OperationIDOf() string
	validate() error
	run(ctx context.Context, c *pagpolar.Client, r Resolver) (Result, error)
}

// PixIntent charges an order by PIX (Payments.Pix).
type PixIntent struct {
	OperationID       string `json:"operation_id" river:"unique"` // required, e.g. "pix:" + order code
	OrderID           string `json:"order_id"`                    // required: what the Resolver loads the payer by
	OfferID           string `json:"offer_id"`                    // required
	ExternalReference string `json:"external_reference"`          // required: the order code the API keeps
}

// BoletoIntent charges an order by boleto (Payments.Boleto).
type BoletoIntent struct {
	OperationID       string `json:"operation_id" river:"unique"`
	OrderID           string `json:"order_id"`
	OfferID           string `json:"offer_id"`
	ExternalReference string `json:"external_reference"`
	DueDate           string `json:"due_date,omitempty"` // optional, "2006-01-02"
}

// CreditCardIntent charges an order's card by its tokenizer token
// (Payments.CreditCard). The token is not in the job row: the Resolver
// gives it (Payer.CardToken).
type CreditCardIntent struct {
	OperationID       string `json:"operation_id" river:"unique"`
	OrderID           string `json:"order_id"`
	OfferID           string `json:"offer_id"`
	ExternalReference string `json:"external_reference"`
	Installments      int    `json:"installments,omitempty"` // 0 or 1 = one payment; at most 12
}

// SubscribeIntent subscribes an order's payer to a plan
// (Subscriptions.Subscribe). For PaymentMethod "credit_card" the Resolver
// gives the card token.
type SubscribeIntent struct {
	OperationID       string `json:"operation_id" river:"unique"`
	OrderID           string `json:"order_id"`
	OfferID           string `json:"offer_id"`
	ExternalReference string `json:"external_reference"`
	PaymentMethod     string `json:"payment_method"` // "credit_card", "pix" or "boleto"
}

// PlanChangeIntent moves a subscription to another plan
// (Subscriptions.ChangePlan). It needs no Resolver.
type PlanChangeIntent struct {
	OperationID    string `json:"operation_id" river:"unique"` // required: one per change, from your records
	SubscriptionID string `json:"subscription_id"`
	NewOfferID     string `json:"new_offer_id"`
	OrderID        string `json:"order_id,omitempty"` // optional: your reference, handed back in Result
}

// RefundIntent refunds part or all of a sale (Refunds.Create). It needs no
// Resolver.
type RefundIntent struct {
	OperationID string `json:"operation_id" river:"unique"` // required: one per refund, e.g. "refund-<refund row id>"
	SaleID      string `json:"sale_id"`
	Amount      int64  `json:"amount"`           // centavos, > 0
	Reason      string `json:"reason,omitempty"` // optional, sent to the API
	OrderID     string `json:"order_id,omitempty"`
}

// Kind is the River job kind.
func (PixIntent) Kind() string { return KindPix }

// Kind is the River job kind.
func (BoletoIntent) Kind() string { return KindBoleto }

// Kind is the River job kind.
func (CreditCardIntent) Kind() string { return KindCreditCard }

// Kind is the River job kind.
func (SubscribeIntent) Kind() string { return KindSubscribe }

// Kind is the River job kind.
func (PlanChangeIntent) Kind() string { return KindPlanChange }

// Kind is the River job kind.
func (RefundIntent) Kind() string { return KindRefund }

// OperationIDOf is the intent's operation ID.
func (a PixIntent) OperationIDOf() string { return a.OperationID }

// OperationIDOf is the intent's operation ID.
func (a BoletoIntent) OperationIDOf() string { return a.OperationID }

// OperationIDOf is the intent's operation ID.
func (a CreditCardIntent) OperationIDOf() string { return a.OperationID }

// OperationIDOf is the intent's operation ID.
func (a SubscribeIntent) OperationIDOf() string { return a.OperationID }

// OperationIDOf is the intent's operation ID.
func (a PlanChangeIntent) OperationIDOf() string { return a.OperationID }

// OperationIDOf is the intent's operation ID.
func (a RefundIntent) OperationIDOf() string { return a.OperationID }

// uniqueStates are every state a job can be in: an operation ID names one
// job for as long as River keeps its row, whether it is waiting, running,
// completed, cancelled or discarded. A discarded intent is run again with
// River's JobRetry, never by inserting it anew.
var uniqueStates = []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStateCancelled, rivertype.JobStateCompleted,
	rivertype.JobStateDiscarded, rivertype.JobStatePending, rivertype.JobStateRetryable,
	rivertype.JobStateRunning, rivertype.JobStateScheduled,
}

// uniqueOpts makes the operation ID (the only field tagged river:"unique")
// the job's identity, whatever its kind: the SDK's operation IDs are one
// namespace too.
func uniqueOpts() river.UniqueOpts {
	return river.UniqueOpts{ByArgs: true, ExcludeKind: true, ByState: uniqueStates}
}

// InsertOpts makes the operation ID unique among the jobs.
func (PixIntent) InsertOpts() river.InsertOpts { return river.InsertOpts{UniqueOpts: uniqueOpts()} }

// InsertOpts makes the operation ID unique among the jobs.
func (BoletoIntent) InsertOpts() river.InsertOpts { return river.InsertOpts{UniqueOpts: uniqueOpts()} }

// InsertOpts makes the operation ID unique among the jobs.
func (CreditCardIntent) InsertOpts() river.InsertOpts {
	return river.InsertOpts{UniqueOpts: uniqueOpts()}
}

// InsertOpts makes the operation ID unique among the jobs.
func (SubscribeIntent) InsertOpts() river.InsertOpts {
	return river.InsertOpts{UniqueOpts: uniqueOpts()}
}

// InsertOpts makes the operation ID unique among the jobs.
func (PlanChangeIntent) InsertOpts() river.InsertOpts {
	return river.InsertOpts{UniqueOpts: uniqueOpts()}
}

// InsertOpts makes the operation ID unique among the jobs.
func (RefundIntent) InsertOpts() river.InsertOpts { return river.InsertOpts{UniqueOpts: uniqueOpts()} }

func invalid(field, reason string) error {
	return &pagpolar.ValidationError{Field: field, Reason: reason}
}

// need checks that v is set and is one line of at most max bytes.
func need(field, v string, max int) error {
	switch {
	case strings.TrimSpace(v) == "":
		return invalid(field, "required")
	case len(v) > max:
		return invalid(field, "too long")
	case strings.ContainsAny(v, "\r\n\x00"):
		return invalid(field, "must be one line")
	}
	return nil
}

// The SDK's bounds (validate.go of the core module).
const (
	maxOperationID = 300
	maxReference   = 255
)

func checkAll(checks ...error) error {
	for _, err := range checks {
		if err != nil {
			return err
		}
	}
	return nil
}

func (a PixIntent) validate() error {
	return checkAll(need("OperationID", a.OperationID, maxOperationID), need("OrderID", a.OrderID, maxReference),
		need("OfferID", a.OfferID, maxReference), need("ExternalReference", a.ExternalReference, maxReference))
}

func (a BoletoIntent) validate() error {
	if err := checkAll(need("OperationID", a.OperationID, maxOperationID), need("OrderID", a.OrderID, maxReference),
		need("OfferID", a.OfferID, maxReference), need("ExternalReference", a.ExternalReference, maxReference)); err != nil {
		return err
	}
	if a.DueDate != "" {
		if _, err := time.Parse(time.DateOnly, a.DueDate); err != nil {
			return invalid("DueDate", "want YYYY-MM-DD")
		}
	}
	return nil
}

func (a CreditCardIntent) validate() error {
	if err := checkAll(need("OperationID", a.OperationID, maxOperationID), need("OrderID", a.OrderID, maxReference),
		need("OfferID", a.OfferID, maxReference), need("ExternalReference", a.ExternalReference, maxReference)); err != nil {
		return err
	}
	if a.Installments < 0 || a.Installments > 12 {
		return invalid("Installments", "want 0 to 12")
	}
	return nil
}

func (a SubscribeIntent) validate() error {
	if err := checkAll(need("OperationID", a.OperationID, maxOperationID), need("OrderID", a.OrderID, maxReference),
		need("OfferID", a.OfferID, maxReference), need("ExternalReference", a.ExternalReference, maxReference)); err != nil {
		return err
	}
	switch a.PaymentMethod {
	case "credit_card", "pix", "boleto":
		return nil
	}
	return invalid("PaymentMethod", `want "credit_card", "pix" or "boleto"`)
}

func (a PlanChangeIntent) validate() error {
	return checkAll(need("OperationID", a.OperationID, maxOperationID), need("SubscriptionID", a.SubscriptionID, maxReference),
		need("NewOfferID", a.NewOfferID, maxReference))
}

func (a RefundIntent) validate() error {
	if err := checkAll(need("OperationID", a.OperationID, maxOperationID), need("SaleID", a.SaleID, maxReference)); err != nil {
		return err
	}
	if a.Amount <= 0 {
		return invalid("Amount", "must be a positive number of centavos")
	}
	if len(a.Reason) > 500 {
		return invalid("Reason", "longer than 500 bytes")
	}
	return nil
}
