package webhook

import "github.com/pagpolar/pagpolar-go/internal/wire"

// Order is how a received status compares with the stored one.
type Order int

const (
	// Unknown: the ranking cannot tell (a status it does not know, or two
	// statuses it does not order): ask the API for the current state.
	Unknown Order = iota
	// Older: the received status comes before the stored one: the event is
	// late and must not move the order backwards.
	Older
	// Same: the statuses are equal.
	Same
	// Newer: the received status comes after the stored one: apply it.
	Newer
)

func (o Order) String() string {
	switch o {
	case Older:
		return "older"
	case Same:
		return "same"
	case Newer:
		return "newer"
	}
	return "unknown"
}

// Ranking compares a stored status with a received one.
type Ranking interface {
	Compare(stored, received string) Order
}

// RankTable is a Ranking by rank: a higher rank comes later. Statuses missing
// from Rank compare Unknown, and so do two different statuses of equal rank
// (alternative outcomes, like paid and declined). A Final status is never
// left for a later one: a status ranked above it compares Unknown (only the
// API can say whether, say, an expired PIX was paid late); one ranked below
// it compares Older.
type RankTable struct {
	Rank  map[string]int
	Final map[string]bool
}

// Compare implements Ranking.
func (t RankTable) Compare(stored, received string) Order {
	rs, okS := t.Rank[stored]
	rr, okR := t.Rank[received]
	switch {
	case !okS || !okR:
		return Unknown
	case stored == received:
		return Same
	case rr < rs:
		return Older
	case rr == rs || t.Final[stored]:
		return Unknown
	}
	return Newer
}

// SaleRanking is the default ranking of sale statuses (ASSUMED values, see
// internal/wire): pending < paid < partially_refunded < refunded, with
// declined, canceled and expired as final alternatives to paid. Statuses it
// does not know compare Unknown.
func SaleRanking() RankTable {
	return RankTable{
		Rank: map[string]int{
			wire.SaleStatusPending:           1,
			wire.SaleStatusPaid:              2,
			wire.SaleStatusDeclined:          2,
			wire.SaleStatusCanceled:          2,
			wire.SaleStatusExpired:           2,
			wire.SaleStatusPartiallyRefunded: 3,
			wire.SaleStatusRefunded:          4,
		},
		Final: map[string]bool{
			wire.SaleStatusDeclined: true,
			wire.SaleStatusCanceled: true,
			wire.SaleStatusExpired:  true,
			wire.SaleStatusRefunded: true,
		},
	}
}

// SubscriptionRanking is the default ranking of subscription statuses
// (ASSUMED values): pending < active, delayed < canceled (final). active and
// delayed alternate while a subscription lives, so they compare Unknown: the
// status alone cannot tell which is newer.
func SubscriptionRanking() RankTable {
	return RankTable{
		Rank: map[string]int{
			wire.SubscriptionStatusPending:  1,
			wire.SubscriptionStatusActive:   2,
			wire.SubscriptionStatusDelayed:  2,
			wire.SubscriptionStatusCanceled: 3,
		},
		Final: map[string]bool{wire.SubscriptionStatusCanceled: true},
	}
}
