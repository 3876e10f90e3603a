// Claims: the store record that names the one operation an effect belongs to,
// so that no two refunds or plan changes settle on one effect, and the check
// for another unsettled operation that could own it as well (contested).

package pagpolar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/keystore"
)

// claimOpID names the store record that claims an effect for an operation.
// The space keeps it apart from every operation ID a caller can give
// (validation refuses spaces).
func claimOpID(kind, effectID string) string { return "claim " + kind + " " + effectID }

// claimKey is the Key of the claim record on effectID: derived like an
// operation's key, so that a claim this SDK did not write for this
// credential (another form, another credential's) is recognised and
// refused rather than read.
func (c *Client) claimKey(kind, effectID string) string {
	return c.derivedKey(claimOpID(kind, effectID))
}

// claimedByOthers returns the IDs among effs (not in the snapshot) that the
// store records as another operation's result.
func (c *Client) claimedByOthers(ctx context.Context, kind string, effs []effect, m opMeta, self string) (map[string]bool, error) {
	if !claims(kind) {
		return nil, nil
	}
	out := map[string]bool{}
	for _, e := range effs {
		if e.idSt != wire.Read || containsString(m.Snapshot, e.ID) {
			continue
		}
		rec, err := c.store.Get(ctx, c.storeID(claimOpID(kind, e.ID)))
		switch {
		case errors.Is(err, keystore.ErrNotFound):
		case err != nil:
			return nil, fmt.Errorf("pagpolar: reading the claim on %s: %w: %w", e.ID, ErrStoreUnavailable, err)
		case rec.Kind != kindClaim || rec.Key != c.claimKey(kind, e.ID):
			return nil, fmt.Errorf("pagpolar: the claim on %s: %w", e.ID, foreignRecord(rec))
		case rec.ResultRef != self:
			out[e.ID] = true
		}
	}
	return out, nil
}

// claim records that effectID is operation self's. It returns the
// operation that already claimed it, if another did.
func (c *Client) claim(ctx context.Context, kind, effectID, self string) (string, error) {
	if !claims(kind) || effectID == "" {
		return "", nil
	}
	rec := keystore.Record{OperationID: c.storeID(claimOpID(kind, effectID)), Key: c.claimKey(kind, effectID), Kind: kindClaim,
		State: keystore.StateSucceeded, ResultRef: self}
	// Like the outcome it precedes, the claim outlives the caller's
	// cancellation (bounded: deadline.go).
	ctx, cancel := c.graceCtx(ctx, 10*time.Second)
	defer cancel()
	got, err := c.store.Create(ctx, rec, c.owner, c.policy.LeaseTTL)
	switch {
	case err == nil:
		_ = c.store.Release(ctx, got.OperationID, got.LeaseToken)
		return "", nil
	case errors.Is(err, keystore.ErrExists):
		if got.Kind != kindClaim || got.Key != rec.Key {
			return "", fmt.Errorf("pagpolar: the claim on %s: %w", effectID, foreignRecord(got))
		}
		if got.ResultRef != self {
			return got.ResultRef, nil
		}
		return "", nil
	case errors.Is(err, keystore.ErrAmnesia):
		return c.claimWithoutRecord(ctx, kind, effectID, self)
	}
	return "", err
}

// claimWithoutRecord settles a claim while the store refuses new records
// after a detected loss (SAFETY rule 13), so that what survived can still
// be settled: settling must never need what the amnesia guard refuses. The
// claim record guards against another operation taking the effect; here
// that is checked on what the store holds instead. Operations created
// after the effect snapshot it (it is in their snapshot), unsettled
// survivors that could own it were checked by contested, and a settled one
// that took it shows it as its result: the store's records of this
// credential are scanned for one (bounded: more than the bound proves
// nothing, and the error leaves the operation unsettled).
func (c *Client) claimWithoutRecord(ctx context.Context, kind, effectID, self string) (string, error) {
	const limit = 10000
	prefix := c.storeID("")
	recs, err := c.store.List(ctx, keystore.Filter{States: []keystore.State{keystore.StateSucceeded}, Prefix: prefix, Limit: limit})
	if err != nil {
		return "", fmt.Errorf("pagpolar: the store refuses the claim on %s (amnesia), and its settled operations cannot be listed: %w: %w", effectID, ErrStoreUnavailable, err)
	}
	if len(recs) >= limit {
		return "", fmt.Errorf("pagpolar: the store refuses the claim on %s (amnesia), and holds too many settled operations to check them: %w", effectID, ErrStoreUnavailable)
	}
	for _, r := range recs {
		op := strings.TrimPrefix(r.OperationID, prefix)
		switch {
		case r.Kind == kindClaim && op == claimOpID(kind, effectID) && r.ResultRef != self:
			return r.ResultRef, nil
		case r.Kind == kind && r.ResultRef == effectID && op != self:
			return op, nil
		}
	}
	c.log.WarnContext(ctx, "pagpolar: the store refuses new records (amnesia): the effect is settled without its claim record, after checking the store's settled operations", "op", self, "effect", effectID)
	return "", nil
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// contested returns another unsettled operation (pending or unknown) that
// could own eff as well as this one: a refund of the same sale whose amount
// eff's amount can be read as, a change of the same subscription to the
// same offer. Its
// answer may have been lost too, so an effect found by lookup cannot be
// told apart between the two. A listing that may be incomplete counts as
// contested.
func (c *Client) contested(ctx context.Context, kind string, m opMeta, selfStoreID string, eff effect) (string, error) {
	const limit = 1000
	prefix := c.storeID("")
	recs, err := c.store.List(ctx, keystore.Filter{States: []keystore.State{keystore.StatePending, keystore.StateUnknown}, Prefix: prefix, Limit: limit})
	if err != nil {
		return "", fmt.Errorf("pagpolar: listing unsettled operations: %w: %w", ErrStoreUnavailable, err)
	}
	if len(recs) >= limit {
		return "(more than a thousand unsettled operations)", nil
	}
	for _, r := range recs {
		if r.OperationID == selfStoreID || r.Kind != kind {
			continue
		}
		var o opMeta
		if json.Unmarshal(r.Meta, &o) != nil {
			return strings.TrimPrefix(r.OperationID, prefix), nil // unreadable: it could be anything
		}
		same := false
		switch kind {
		case kindRefund:
			// The effect could be that one's if one of its amount's
			// readings is that refund's amount, as attribution reads it.
			same = o.SaleID == m.SaleID && (o.Amount == m.Amount || eff.Amount.Matches(o.Amount))
		case kindPlanChange:
			same = o.SubscriptionID == m.SubscriptionID && o.OfferID == m.OfferID
		}
		if same {
			return strings.TrimPrefix(r.OperationID, prefix), nil
		}
	}
	return "", nil
}
