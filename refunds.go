package pagpolar

import (
	"context"
	"net/url"
	"strconv"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// RefundsService creates and lists refunds.
type RefundsService struct{ c *Client }

// RefundParams are the params of Refunds.Create.
type RefundParams struct {
	// OperationID is required: a sale can have several partial refunds, so
	// only your records know which refund this is (e.g. "refund-<row id>").
	OperationID string
	SaleID      string // required
	Amount      int64  // centavos, > 0; the sum of a sale's refunds never exceeds it
	Reason      string // optional, sent to the API
}

// RefundResult is the result of Refunds.Create.
type RefundResult struct {
	Refund    *Refund
	Operation Operation
}

// Create refunds Amount of a sale, at most once per operation. Before the
// first send it lists the sale's existing refunds, so that a lost answer can
// be settled by telling this refund from earlier ones (SAFETY rule 11).
// Errors as PaymentsService.Pix; a refund larger than what is left answers
// an *APIError (422). Limit: two concurrent ambiguous refunds of the same
// amount of one sale cannot be told apart by a lookup.
func (s *RefundsService) Create(ctx context.Context, p RefundParams) (*RefundResult, error) {
	if err := validateOperationID(p.OperationID, true); err != nil {
		return nil, err
	}
	if err := identifier("SaleID", p.SaleID, maxReference); err != nil {
		return nil, err
	}
	if p.Amount <= 0 {
		return nil, &ValidationError{Field: "Amount", Reason: "must be a positive number of centavos"}
	}
	if len(p.Reason) > 500 {
		return nil, &ValidationError{Field: "Reason", Reason: "longer than 500 bytes"}
	}
	body := wire.RefundRequest{SaleIdentifier: p.SaleID, Amount: p.Amount, Reason: p.Reason}
	spec := &opSpec{
		kind: kindRefund, id: p.OperationID, path: wire.RouteRefunds, body: mustJSON(body),
		fpIn: fields{public: []string{kindRefund, p.SaleID, strconv.FormatInt(p.Amount, 10), p.Reason}},
		meta: opMeta{SaleID: p.SaleID, Amount: p.Amount},
	}
	res, err := s.c.run(ctx, spec)
	if err != nil {
		return nil, err
	}
	r, err := resultOf[Refund](spec.id, res)
	if err != nil {
		return nil, err
	}
	return &RefundResult{Refund: r, Operation: res.op}, nil
}

// ListBySale lists a sale's refunds (every page; an error wrapping
// ErrIncompleteList, with what was read, if the SDK cannot read them all).
func (s *RefundsService) ListBySale(ctx context.Context, saleID string) ([]Refund, error) {
	if err := identifier("saleID", saleID, maxReference); err != nil {
		return nil, err
	}
	effs, err := s.c.listAll(ctx, effRefund, wire.RouteRefunds, url.Values{"sale_identifier": {saleID}})
	out := make([]Refund, 0, len(effs))
	for _, e := range effs {
		out = append(out, e.refund())
	}
	return out, err
}
