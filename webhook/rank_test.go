package webhook_test

import (
	"context"
	"errors"
	"testing"

	"github.com/pagpolar/pagpolar-go/webhook"
)

func TestSaleRanking(t *testing.T) {
	r := webhook.SaleRanking()
	cases := []struct {
		stored, received string
		want             webhook.Order
	}{
		{"pending", "paid", webhook.Newer},
		{"paid", "pending", webhook.Older}, // a late CREATED never moves a paid order back
		{"paid", "paid", webhook.Same},
		{"paid", "refunded", webhook.Newer},
		{"paid", "partially_refunded", webhook.Newer},
		{"partially_refunded", "refunded", webhook.Newer},
		{"refunded", "partially_refunded", webhook.Older},
		{"refunded", "paid", webhook.Older},
		{"pending", "declined", webhook.Newer},
		{"pending", "expired", webhook.Newer},
		{"paid", "declined", webhook.Unknown}, // alternatives: only the API knows
		{"declined", "paid", webhook.Unknown},
		{"expired", "paid", webhook.Unknown}, // a PIX paid late?
		{"expired", "refunded", webhook.Unknown},
		{"declined", "pending", webhook.Older},
		{"paid", "chargeback", webhook.Unknown}, // unknown status
		{"something", "paid", webhook.Unknown},
	}
	for _, c := range cases {
		if got := r.Compare(c.stored, c.received); got != c.want {
			t.Errorf("Compare(%s, %s) = %s, want %s", c.stored, c.received, got, c.want)
		}
	}
}

func TestSubscriptionRanking(t *testing.T) {
	r := webhook.SubscriptionRanking()
	cases := []struct {
		stored, received string
		want             webhook.Order
	}{
		{"pending", "active", webhook.Newer},
		{"active", "delayed", webhook.Unknown}, // they alternate
		{"delayed", "active", webhook.Unknown},
		{"active", "canceled", webhook.Newer},
		{"canceled", "active", webhook.Older},
		{"active", "pending", webhook.Older},
	}
	for _, c := range cases {
		if got := r.Compare(c.stored, c.received); got != c.want {
			t.Errorf("Compare(%s, %s) = %s, want %s", c.stored, c.received, got, c.want)
		}
	}
}

// fakeAPI answers the reads the helpers make, from fixed data.
type fakeAPI struct {
	sales   map[string]webhook.Sale
	subs    map[string]webhook.Subscription
	refunds map[string][]webhook.Refund
	calls   int
}

var errNotFound = errors.New("not found")

func (f *fakeAPI) GetSale(_ context.Context, id string) (webhook.Sale, error) {
	f.calls++
	s, ok := f.sales[id]
	if !ok {
		return webhook.Sale{}, errNotFound
	}
	return s, nil
}

func (f *fakeAPI) GetSubscription(_ context.Context, id string) (webhook.Subscription, error) {
	f.calls++
	s, ok := f.subs[id]
	if !ok {
		return webhook.Subscription{}, errNotFound
	}
	return s, nil
}

func (f *fakeAPI) ListRefunds(_ context.Context, saleID string) ([]webhook.Refund, error) {
	f.calls++
	return f.refunds[saleID], nil
}

var _ webhook.API = (*fakeAPI)(nil)

func tx(id, status string) *webhook.Transaction {
	return &webhook.Transaction{ID: id, Sale: webhook.Sale{Identifier: id, Status: status}}
}

func TestResolveSale(t *testing.T) {
	api := &fakeAPI{sales: map[string]webhook.Sale{
		"s_paid":     {Identifier: "s_paid", Status: "paid"},
		"s_refunded": {Identifier: "s_refunded", Status: "refunded"},
		"s_lagging":  {Identifier: "s_lagging", Status: "pending"},
	}}
	cases := []struct {
		name, stored string
		tx           *webhook.Transaction
		wantStatus   string
		wantApply    bool
		wantAsked    bool
	}{
		{"nothing stored", "", tx("s_paid", "pending"), "pending", true, false},
		{"newer", "pending", tx("s_paid", "paid"), "paid", true, false},
		{"same", "paid", tx("s_paid", "paid"), "paid", false, false},
		// CREATED (pending) arriving after PAID: ask, the API says paid: nothing moves.
		{"older", "paid", tx("s_paid", "pending"), "paid", false, true},
		// Older event, but the sale moved on meanwhile: the API's state wins.
		{"older, API newer", "paid", tx("s_refunded", "pending"), "refunded", true, true},
		{"unknown status", "paid", tx("s_refunded", "chargeback_opened"), "refunded", true, true},
		// A lagging read never moves the order back either.
		{"API behind", "paid", tx("s_lagging", "declined"), "paid", false, true},
	}
	for _, c := range cases {
		res, sale, err := webhook.ResolveSale(context.Background(), api, nil, c.stored, c.tx)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if res.Status != c.wantStatus || res.Apply != c.wantApply || res.Asked != c.wantAsked || (sale != nil) != c.wantAsked {
			t.Errorf("%s: %+v (sale %v); want status %s apply %v asked %v", c.name, res, sale, c.wantStatus, c.wantApply, c.wantAsked)
		}
	}
	if _, _, err := webhook.ResolveSale(context.Background(), api, nil, "paid", tx("missing", "pending")); !errors.Is(err, errNotFound) {
		t.Errorf("API error: %v", err)
	}
	if _, _, err := webhook.ResolveSale(context.Background(), nil, nil, "paid", tx("s_paid", "pending")); err == nil {
		t.Errorf("no API for a doubtful case: want an error")
	}
}

func TestResolveSubscription(t *testing.T) {
	api := &fakeAPI{subs: map[string]webhook.Subscription{"sub1": {ID: "sub1", Status: "active"}}}
	res, sub, err := webhook.ResolveSubscription(context.Background(), api, nil, "delayed",
		&webhook.Subscription{ID: "sub1", Status: "delayed"})
	if err != nil || res.Apply || res.Asked || sub != nil {
		t.Errorf("same status: %+v %v %v", res, sub, err)
	}
	// active vs delayed cannot be ordered by status: the API decides.
	res, sub, err = webhook.ResolveSubscription(context.Background(), api, nil, "delayed",
		&webhook.Subscription{ID: "sub1", Status: "active"})
	if err != nil || !res.Apply || !res.Asked || res.Status != "active" || sub == nil {
		t.Errorf("active after delayed: %+v %v %v", res, sub, err)
	}
}

func TestCheckRefundRequest(t *testing.T) {
	api := &fakeAPI{refunds: map[string][]webhook.Refund{
		"s1": {{Identifier: "r1", Status: "completed"}, {Identifier: "r2", Status: "pending"}},
	}}
	handled := map[string]bool{"r1": true}
	seen := func(id string) (bool, error) { return handled[id], nil }
	c, err := webhook.CheckRefundRequest(context.Background(), api, "s1", seen)
	if err != nil || len(c.Refunds) != 2 || len(c.New) != 1 || c.New[0].Identifier != "r2" {
		t.Fatalf("first request: %+v, %v; want r2 new", c, err)
	}
	handled["r2"] = true // the application acted on it
	c, err = webhook.CheckRefundRequest(context.Background(), api, "s1", seen)
	if err != nil || len(c.New) != 0 {
		t.Errorf("repeat: %+v, %v; want no new refund", c, err)
	}
	boom := errors.New("db")
	if _, err := webhook.CheckRefundRequest(context.Background(), api, "s1", func(string) (bool, error) { return false, boom }); !errors.Is(err, boom) {
		t.Errorf("handled error: %v", err)
	}
}
