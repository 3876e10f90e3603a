package pagpolar

import (
	"context"
	"errors"

	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/keystore"
)

// Webhook events move the decision of operations already settled: a card
// sale answered pending and then paid or declined (TRANSACTION_PAID,
// TRANSACTION_DECLINED), a PIX paid, a subscription activated. The
// operations an event can concern are found without listing the store:
// the default operation IDs of the event's external reference
// ("pix:"+ref, ...), and, for an operation under an ID of the caller's
// own whose effect was undecided when it succeeded, the claim written
// then (effectIndex). An event never moves a decision backward, and never
// from one alternative to another (decision.go).

// decisionKinds are the operation kinds whose effect an event's object
// is, and the claim name their undecided effects are indexed under.
func decisionKinds(kind effectKind) ([]string, string) {
	if kind == effSubscription {
		return []string{kindSubscribe}, kindSubscribe
	}
	return []string{kindPix, kindBoleto, kindCreditCard}, "sale"
}

// effectIndex records which operation an undecided effect is, when the
// operation's ID is not the default one for its reference, so that a
// webhook event about the effect finds it. A failure only costs that the
// decision moves by Refresh rather than by the event.
func (c *Client) effectIndex(ctx context.Context, e *exec, eff effect) {
	if eff.ID == "" || eff.decision().Decided() {
		return
	}
	switch e.s.kind {
	case kindPix, kindBoleto, kindCreditCard, kindSubscribe:
	default:
		return
	}
	if e.s.id == e.s.kind+":"+e.meta.ExternalReference {
		return
	}
	_, name := decisionKinds(eff.kind)
	rec := keystore.Record{OperationID: c.storeID(claimOpID(name, eff.ID)), Key: c.claimKey(name, eff.ID), Kind: kindClaim,
		State: keystore.StateSucceeded, ResultRef: e.s.id}
	got, err := c.store.Create(ctx, rec, c.owner, c.policy.LeaseTTL)
	switch {
	case err == nil:
		_ = c.store.Release(ctx, got.OperationID, got.LeaseToken)
	case !errors.Is(err, keystore.ErrExists):
		c.log.WarnContext(ctx, "pagpolar: could not index an undecided effect for webhook events; its decision moves by Client.Refresh", "op", e.s.id, "err", err)
	}
}

// decisionsFromEvent moves the decision of the settled operations whose
// effect is eff. held reports operations another worker holds (the event
// is then offered again).
func (c *Client) decisionsFromEvent(ctx context.Context, eff effect) (out []ResumeResult, held []string, err error) {
	if eff.idSt != wire.Read {
		return nil, nil, nil
	}
	kinds, name := decisionKinds(eff.kind)
	var opIDs []string
	if eff.refSt == wire.Read {
		for _, k := range kinds {
			opIDs = append(opIDs, k+":"+eff.Ref)
		}
	}
	idx, ierr := c.store.Get(ctx, c.storeID(claimOpID(name, eff.ID)))
	switch {
	case ierr == nil && idx.Kind == kindClaim && idx.ResultRef != "" && idx.Key == c.claimKey(name, eff.ID):
		opIDs = append(opIDs, idx.ResultRef)
	case ierr != nil && !errors.Is(ierr, keystore.ErrNotFound):
		return nil, nil, ierr
	}
	for _, opID := range opIDs {
		rec, gerr := c.store.Get(ctx, c.storeID(opID))
		switch {
		case errors.Is(gerr, keystore.ErrNotFound):
			continue
		case gerr != nil:
			return out, held, gerr
		}
		if rec.State != keystore.StateSucceeded || !containsString(kinds, rec.Kind) ||
			!c.ownsRecord(rec, opID) || decisionOfRecord(rec.Result).ID != eff.ID {
			continue
		}
		rep, aerr := c.applyDecision(ctx, opID, rec, eff, SourceWebhook)
		res := ResumeResult{OperationID: opID, Key: rec.Key, State: rec.State, Ref: rec.ResultRef, Attempts: rec.Attempts}
		if rep != nil {
			res.Decision = rep.Decision
		}
		if rep != nil && !rep.Moved && advances(rep.Decision, eff.decision()) {
			// The later decision could not be written (the lease is held,
			// or the store failed): offer the event again.
			held = append(held, opID)
		}
		if aerr != nil && !errors.Is(aerr, ErrDeclined) && !errors.Is(aerr, ErrRefused) {
			res.Err = aerr
		}
		if (rep != nil && rep.Moved) || res.Err != nil {
			out = append(out, res)
		}
	}
	return out, held, nil
}
