package webhook

import "github.com/pagpolar/pagpolar-go/internal/wire"

// Event names. TRANSACTION_CREATED, TRANSACTION_PAID,
// TRANSACTION_ASK_REFUNDING, SUBSCRIPTION_RENEWED and SUBSCRIPTION_DELAYED
// are documented; the others are ASSUMED (see internal/wire). Handlers must
// tolerate names they do not know: Config.Default receives them.
const (
	EventTransactionCreated      = wire.EventTransactionCreated
	EventTransactionPaid         = wire.EventTransactionPaid
	EventTransactionAskRefunding = wire.EventTransactionAskRefunding
	EventTransactionRefunded     = wire.EventTransactionRefunded
	EventTransactionDeclined     = wire.EventTransactionDeclined
	EventSubscriptionCreated     = wire.EventSubscriptionCreated
	EventSubscriptionRenewed     = wire.EventSubscriptionRenewed
	EventSubscriptionDelayed     = wire.EventSubscriptionDelayed
	EventSubscriptionPlanChanged = wire.EventSubscriptionPlanChanged
)
