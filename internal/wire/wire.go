package wire

// Headers.
const (
	HeaderAuthorization  = "Authorization"                                                    // documented: "Bearer <token>"
	HeaderIdempotencyKey = "Idempotency-Key"                                                  // documented, <= 255 chars
	HeaderReplayed       = "Idempotency-Replayed"                                             // documented: "true" on a replay
	HeaderRetryAfter     = "Retry-After"                                                      // ASSUMED on 429/503, in seconds
	HeaderRequestID      = "X-Request-Id"                                                     // ASSUMED
	HeaderTestEvent      = "X-PagPolar-Test"                                                  // documented, webhooks
	MaxIdempotencyKeyLen = 255                                                                // documented
	MsgInProgress        = "Uma requisição com este Idempotency-Key já está em processamento" // documented 409 message
)

// Routes, relative to the base URL (production https://api.pagpolar.com/v1).
const (
	RoutePix           = "/payments/pix"                   // documented
	RouteBoleto        = "/payments/boleto"                // documented
	RouteCreditCard    = "/payments/credit-card"           // documented
	RouteSubscribe     = "/plans/offer/{id}/subscribe"     // documented
	RoutePlanChange    = "/subscriptions/{id}/plan-change" // documented
	RouteRefunds       = "/refunds"                        // documented (POST create, GET ?sale_identifier=)
	RouteSales         = "/sales"                          // documented: GET ?external_reference=
	RouteSale          = "/sales/{identifier}"             // documented
	RouteSubscription  = "/subscriptions/{id}"             // documented
	RouteSubscriptions = "/subscriptions"                  // ASSUMED: GET ?external_reference=

	// ClockProbePrefix starts the identifier of the sale the SDK reads to
	// learn the API's clock (no sale has it; the API's 404 carries a Date
	// no cache can have stored).
	ClockProbePrefix = "pagpolar-clock-probe-"
)

// Payment methods as they appear in sales. ASSUMED values.
const (
	MethodPix        = "pix"
	MethodBoleto     = "boleto"
	MethodCreditCard = "credit_card"
)

// Statuses. Nowhere documented: ASSUMED. Clients must tolerate unknown values.
const (
	SaleStatusPending           = "pending"  // PIX/boleto created, awaiting payment
	SaleStatusPaid              = "paid"     // card approved, or PIX/boleto paid
	SaleStatusDeclined          = "declined" // card declined (sale recorded, answer 402)
	SaleStatusRefunded          = "refunded" // fully refunded
	SaleStatusPartiallyRefunded = "partially_refunded"
	SaleStatusCanceled          = "canceled"
	SaleStatusExpired           = "expired"

	RefundStatusPending   = "pending"
	RefundStatusCompleted = "completed"
	RefundStatusFailed    = "failed"

	SubscriptionStatusActive   = "active"
	SubscriptionStatusPending  = "pending"
	SubscriptionStatusDelayed  = "delayed"
	SubscriptionStatusCanceled = "canceled"

	PlanChangeStatusApplied = "applied"

	// Undecided statuses: the effect exists, its decision comes later (a
	// TRANSACTION_* or SUBSCRIPTION_* event, or a read). ASSUMED, like the
	// statuses above; the fake answers them under pagpolartest.WithAsync.
	SaleStatusInAnalysis      = "in_analysis" // a card sale awaiting antifraud or 3-D Secure (besides "pending")
	RefundStatusRequested     = "requested"   // a refund accepted, not processed yet
	RefundStatusProcessing    = "processing"  // a refund being processed
	PlanChangeStatusScheduled = "scheduled"   // a plan change accepted, applied at the next billing cycle
)

// Customer is documented in the PIX example.
type Customer struct {
	Name     string `json:"name"`
	Email    string `json:"email"`
	Document string `json:"document"`
	Phone    string `json:"phone"`
}

// PixRequest is documented (POST /payments/pix). No amount: the offer carries the price.
type PixRequest struct {
	OfferIdentifier   string   `json:"offer_identifier"`
	ExternalReference string   `json:"external_reference"`
	Customer          Customer `json:"customer"`
}

// BoletoRequest is ASSUMED: the PIX body plus an optional due date (YYYY-MM-DD).
type BoletoRequest struct {
	OfferIdentifier   string   `json:"offer_identifier"`
	ExternalReference string   `json:"external_reference"`
	Customer          Customer `json:"customer"`
	DueDate           string   `json:"due_date,omitempty"`
}

// Card is ASSUMED: only a token produced by PagPolar's tokenizer, never a PAN.
type Card struct {
	Token string `json:"token"`
}

// CreditCardRequest is ASSUMED.
type CreditCardRequest struct {
	OfferIdentifier   string   `json:"offer_identifier"`
	ExternalReference string   `json:"external_reference"`
	Customer          Customer `json:"customer"`
	Card              Card     `json:"card"`
	Installments      int      `json:"installments,omitempty"`
}

// SubscribeRequest is ASSUMED (POST /plans/offer/{id}/subscribe; the offer is in the path).
type SubscribeRequest struct {
	ExternalReference string   `json:"external_reference"`
	Customer          Customer `json:"customer"`
	PaymentMethod     string   `json:"payment_method"`
	Card              *Card    `json:"card,omitempty"`
}

// PlanChangeRequest is ASSUMED (POST /subscriptions/{id}/plan-change).
type PlanChangeRequest struct {
	OfferIdentifier string `json:"offer_identifier"` // the new plan's offer
}

// RefundRequest is ASSUMED (POST /refunds). Amount in centavos; partial refunds allowed.
type RefundRequest struct {
	SaleIdentifier string `json:"sale_identifier"`
	Amount         int64  `json:"amount"`
	Reason         string `json:"reason,omitempty"`
}

// Sale is ASSUMED (identifier, status, external_reference, payment_method and
// amount are named in CONTRACT.md; the rest is a guess). Amount in centavos.
type Sale struct {
	Identifier        string  `json:"identifier"`
	Status            string  `json:"status"`
	ExternalReference string  `json:"external_reference"`
	PaymentMethod     string  `json:"payment_method"`
	Amount            int64   `json:"amount"`
	RefundedAmount    int64   `json:"refunded_amount"`
	OfferIdentifier   string  `json:"offer_identifier"`
	SubscriptionID    string  `json:"subscription_id,omitempty"`
	CreatedAt         string  `json:"created_at"` // RFC 3339
	Pix               *Pix    `json:"pix,omitempty"`
	Boleto            *Boleto `json:"boleto,omitempty"`
}

// Pix is ASSUMED.
type Pix struct {
	QRCode    string `json:"qr_code"`
	CopyPaste string `json:"copy_paste"`
	ExpiresAt string `json:"expires_at,omitempty"`
}

// Boleto is ASSUMED.
type Boleto struct {
	URL     string `json:"url"`
	Barcode string `json:"barcode"`
	DueDate string `json:"due_date"`
}

// Refund is ASSUMED.
type Refund struct {
	Identifier     string `json:"identifier"`
	SaleIdentifier string `json:"sale_identifier"`
	Amount         int64  `json:"amount"`
	Status         string `json:"status"`
	CreatedAt      string `json:"created_at"`
}

// PlanChange is ASSUMED: both the answer to plan-change and an entry of
// Subscription.PlanChanges (the lookup that settles a lost plan-change answer).
type PlanChange struct {
	ID                  string `json:"id"`
	SubscriptionID      string `json:"subscription_id"`
	FromOfferIdentifier string `json:"from_offer_identifier"`
	OfferIdentifier     string `json:"offer_identifier"`
	Status              string `json:"status"`
	CreatedAt           string `json:"created_at"`
}

// Subscription is ASSUMED.
type Subscription struct {
	ID                string       `json:"id"`
	Status            string       `json:"status"`
	ExternalReference string       `json:"external_reference"`
	OfferIdentifier   string       `json:"offer_identifier"`
	PaymentMethod     string       `json:"payment_method"`
	Amount            int64        `json:"amount"`
	NextBillingAt     string       `json:"next_billing_at"`
	CreatedAt         string       `json:"created_at"`
	PlanChanges       []PlanChange `json:"plan_changes"`
	// NextOfferIdentifier is ASSUMED: the offer a scheduled plan change
	// moves the subscription to at its next billing cycle ("" when none is
	// scheduled). OfferIdentifier stays the current (old) offer until then;
	// PlanChanges lists the scheduled change with PlanChangeStatusScheduled.
	NextOfferIdentifier string `json:"next_offer_identifier,omitempty"`
}

// List is ASSUMED: every list route answers {"data": [...]}.
type List[T any] struct {
	Data []T `json:"data"`
}

// Error is ASSUMED: {"code": "...", "message": "..."}; clients parse leniently
// and keep the raw body.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error codes the fake uses. ASSUMED.
const (
	CodeUnauthorized   = "unauthorized"
	CodeValidation     = "validation_error"
	CodeNotFound       = "not_found"
	CodeInProgress     = "idempotency_in_progress"
	CodeRateLimited    = "rate_limited"
	CodeUnavailable    = "service_unavailable" // the API's own 503 (load shedding)
	CodeDeclined       = "declined"
	CodeInternal       = "internal_error"
	CodeRefundTooLarge = "refund_exceeds_sale"
)

// Webhook envelope: documented fields id, creation_date, event, data, test.
type WebhookEnvelope struct {
	ID           string      `json:"id"`
	CreationDate string      `json:"creation_date"`
	Event        string      `json:"event"`
	Data         WebhookData `json:"data"`
	Test         bool        `json:"test,omitempty"`
}

// WebhookData is documented to carry data.transaction or data.subscription.
// The inner shapes are ASSUMED to be the REST shapes, plus "id" on the transaction
// (the dedupe key uses data.transaction.id).
type WebhookData struct {
	Transaction  *WebhookTransaction `json:"transaction,omitempty"`
	Subscription *Subscription       `json:"subscription,omitempty"`
}

// WebhookTransaction is ASSUMED: a Sale whose id is also given as "id".
type WebhookTransaction struct {
	ID string `json:"id"`
	Sale
}

// Success and decline statuses of the money routes. ASSUMED (the pages name
// no status codes); the fake answers with these and the client may rely on
// "2xx = success" only.
const (
	StatusChargeCreated = 201 // POST /payments/{pix,boleto,credit-card}: a Sale
	StatusSubscribed    = 201 // POST /plans/offer/{id}/subscribe: a Subscription
	StatusPlanChanged   = 200 // POST /subscriptions/{id}/plan-change: a PlanChange
	StatusRefundCreated = 201 // POST /refunds: a Refund
	StatusDeclined      = 402 // card declined: an Error with CodeDeclined; the declined sale is recorded
)

// More error codes the fake uses. ASSUMED.
const (
	CodeUnprocessable    = "unprocessable_entity" // 422: a business rule (not a plan, sale not refundable, ...)
	CodeMethodNotAllowed = "method_not_allowed"   // 405
	CodePayloadTooLarge  = "payload_too_large"    // 413: body over 1 MiB
)

// Webhook event names. TRANSACTION_CREATED, TRANSACTION_PAID,
// TRANSACTION_ASK_REFUNDING, SUBSCRIPTION_RENEWED and SUBSCRIPTION_DELAYED
// are documented; the others are ASSUMED. Handlers must tolerate unknown ones.
const (
	EventTransactionCreated      = "TRANSACTION_CREATED"       // documented
	EventTransactionPaid         = "TRANSACTION_PAID"          // documented
	EventTransactionAskRefunding = "TRANSACTION_ASK_REFUNDING" // documented
	EventTransactionRefunded     = "TRANSACTION_REFUNDED"      // ASSUMED: after each refund, full or partial
	EventTransactionDeclined     = "TRANSACTION_DECLINED"      // ASSUMED
	EventSubscriptionCreated     = "SUBSCRIPTION_CREATED"      // ASSUMED
	EventSubscriptionRenewed     = "SUBSCRIPTION_RENEWED"      // documented
	EventSubscriptionDelayed     = "SUBSCRIPTION_DELAYED"      // documented
	EventSubscriptionPlanChanged = "SUBSCRIPTION_PLAN_CHANGED" // ASSUMED
)

// ---- Reading answers leniently ----
//
// The shapes above are how the fake answers. A real server may spell a field,
// a method or a status otherwise; the tables below list the spellings the SDK
// reads as the same thing. They are ASSUMED, and they only ever widen what is
// *recognised*: a value in none of them is "not recognised", which the SDK
// reads as "unclear" (outcome unknown), never as "different" or "absent".

// Payment-method spellings → the SDK's method. Lookup is case-insensitive,
// with "-" and " " read as "_". Methods the SDK never sends are listed so
// that they are recognised; whether one proves a sale is not an
// operation's is decided by family (MethodFamily).
var MethodSpellings = map[string]string{
	"pix":               MethodPix,
	"boleto":            MethodBoleto,
	"boleto_bancario":   MethodBoleto,
	"boleto_bancário":   MethodBoleto,
	"bank_slip":         MethodBoleto,
	"bankslip":          MethodBoleto,
	"credit_card":       MethodCreditCard,
	"creditcard":        MethodCreditCard,
	"card":              MethodCreditCard,
	"cartao":            MethodCreditCard,
	"cartão":            MethodCreditCard,
	"cartao_de_credito": MethodCreditCard,
	"cartão_de_crédito": MethodCreditCard,
	"debit_card":        "debit_card",
	"cartao_de_debito":  "debit_card",
	"cartão_de_débito":  "debit_card",
	"pix_automatico":    "pix_automatic",
	"pix_automático":    "pix_automatic",
}

// MethodFamily groups methods that a payment could be reported under
// interchangeably (a combo card settled as debit is still the card charge
// that was asked for). Only methods of different families prove that a
// sale is not an operation's.
func MethodFamily(m string) string {
	switch m {
	case MethodCreditCard, "debit_card":
		return "card"
	case MethodPix, "pix_automatic":
		return "pix"
	}
	return m
}

// StatusClass is what a status says about an effect.
type StatusClass int

// Status classes.
const (
	StatusUnknown StatusClass = iota // not in the tables: never success, never failure
	StatusCreated                    // the effect exists and took effect (a sale created: pending, paid, ...)
	StatusRefused                    // the attempt was recorded and refused (declined, failed)
)

// Status tables per effect kind (keys normalised like methods). ASSUMED.
// What matters for safety is StatusRefused: the only class that fails an
// operation. Every other status — listed here, undecided ("in_analysis",
// "requested", "processing", "scheduled") or unknown — is the decision of
// an effect that exists; the SDK's decision tables (the root package's
// decision.go) name them.
var (
	SaleStatuses = map[string]StatusClass{
		SaleStatusPending: StatusCreated, "waiting_payment": StatusCreated, "awaiting_payment": StatusCreated,
		SaleStatusPaid: StatusCreated, "approved": StatusCreated, "authorized": StatusCreated, "captured": StatusCreated,
		"completed": StatusCreated, "succeeded": StatusCreated, "confirmed": StatusCreated,
		SaleStatusRefunded: StatusCreated, SaleStatusPartiallyRefunded: StatusCreated,
		SaleStatusCanceled: StatusCreated, "cancelled": StatusCreated, SaleStatusExpired: StatusCreated,
		SaleStatusDeclined: StatusRefused, "refused": StatusRefused, "failed": StatusRefused,
		"denied": StatusRefused, "rejected": StatusRefused, "not_authorized": StatusRefused,
		"recusado": StatusRefused, "recusada": StatusRefused, "negado": StatusRefused, "negada": StatusRefused,
		"reprovado": StatusRefused, "reprovada": StatusRefused,
	}
	RefundStatuses = map[string]StatusClass{
		RefundStatusPending: StatusCreated, RefundStatusCompleted: StatusCreated, "succeeded": StatusCreated,
		"refunded": StatusCreated, "done": StatusCreated,
		RefundStatusFailed: StatusRefused, "rejected": StatusRefused, "refused": StatusRefused, "denied": StatusRefused,
		"recusado": StatusRefused, "negado": StatusRefused,
	}
	// No refusals: a subscription marked failed may still be retrying its
	// payment (a declined card subscribe is a declined sale, not a
	// subscription).
	SubscriptionStatuses = map[string]StatusClass{
		SubscriptionStatusActive: StatusCreated, SubscriptionStatusPending: StatusCreated, SubscriptionStatusDelayed: StatusCreated,
		SubscriptionStatusCanceled: StatusCreated, "cancelled": StatusCreated, "trialing": StatusCreated, "past_due": StatusCreated,
		"overdue": StatusCreated, "waiting_payment": StatusCreated, "paused": StatusCreated,
	}
	PlanChangeStatuses = map[string]StatusClass{
		PlanChangeStatusApplied: StatusCreated, "completed": StatusCreated, "succeeded": StatusCreated, "done": StatusCreated,
		"rejected": StatusRefused, "failed": StatusRefused, "refused": StatusRefused, "declined": StatusRefused,
	}
)

// KnownErrorCodes are the error codes the SDK takes as proof that an error
// body is the API's own (and not a gateway's page that happens to be JSON).
// ASSUMED: the codes the fake answers with. A body with another code, or
// with only a message, is read as "maybe not the API's": the safe reading
// (a 500 does not end the in-processing window, a 503 is not "not
// processed", a 4xx leaves the operation not executed).
var KnownErrorCodes = map[string]bool{
	CodeUnauthorized: true, CodeValidation: true, CodeNotFound: true, CodeInProgress: true,
	CodeRateLimited: true, CodeUnavailable: true, CodeDeclined: true, CodeInternal: true,
	CodeRefundTooLarge: true, CodeUnprocessable: true, CodeMethodNotAllowed: true, CodePayloadTooLarge: true,
}

// List members that hold a list answer's items, first the one the fake uses.
var ListItems = []string{"data", "items", "results", "records", "sales", "refunds", "subscriptions"}
