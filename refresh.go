package pagpolar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/keystore"
)

// Decisions that come later: reading an effect's decision again
// (Refresh), waiting for it (AwaitDecision), and moving a succeeded
// record's decision forward. The operation's outcome — its effect exists —
// was settled before; only the decision moves, and only forward
// (decision.go).

// SourceRead: the decision was read from the API by the effect's
// identifier (Client.Refresh).
const SourceRead Source = "read"

// DecisionReport is where a succeeded operation's decision stands.
type DecisionReport struct {
	OperationID string
	Kind        string   // "pix", "boleto", "credit_card", "subscribe", "plan_change", "refund"
	EffectID    string   // the sale, refund, subscription or plan change ("" for a plan change the API answered with the subscription)
	Status      string   // as the API sent it ("" when it sent none)
	Decision    Decision // what the SDK reads in it
	DecisionAt  time.Time
	// Source is where this decision came from in this call: the record
	// (SourceLocalRecord, kept by the first answer, a lookup or a webhook
	// event) or the API (SourceRead).
	Source Source
	// Moved: this call moved the stored decision forward.
	Moved bool
}

// Refresh reads a succeeded operation's effect from the API by its
// identifier and moves the recorded decision forward when the API's is
// later (a decision never moves back: decision.go). It sends no money
// request. Sales and subscriptions are read with GET by ID, refunds from
// their sale's refund list, plan changes from the subscription.
//
// Errors: ErrNotFound (no such operation in the store);
// ErrOutcomeUnknown (the operation is not settled yet: settle it first
// with Resume or by repeating the call); the operation's own error when it
// failed; ErrDeclined / ErrRefused, with the report, when the effect was
// refused after its first answer (a new attempt needs a new operation ID);
// an *APIError or transport error when the read failed (the report then
// holds the recorded decision).
func (c *Client) Refresh(ctx context.Context, operationID string) (*DecisionReport, error) {
	rec, rep, err := c.recordedDecision(ctx, operationID)
	if err != nil {
		return rep, err
	}
	eff, err := c.readDecision(ctx, rec)
	if err != nil {
		return rep, fmt.Errorf("pagpolar: operation %q: reading the %s's decision: %w", operationID, effectNoun(rec.Kind), err)
	}
	return c.applyDecision(ctx, operationID, rec, eff, SourceRead)
}

// AwaitParams tunes AwaitDecision. The zero value is the default.
type AwaitParams struct {
	// Poll is the first pause between two looks at the decision (default
	// 1 s); each pause doubles, up to MaxPoll (default 30 s).
	Poll, MaxPoll time.Duration
	// Webhooks says that webhook events reach this client's store
	// (webhook.Inbox with Settle set to this client): the record then moves
	// by itself and the API is read only when it has not moved for
	// QuietRead (default 2 min), in case an event was lost. Without it,
	// every look reads the API (Refresh).
	Webhooks  bool
	QuietRead time.Duration
}

// AwaitDecision waits until a succeeded operation's effect is decided
// (Decision.Decided: paid, declined, completed, applied, ...), looking at
// the record and reading the API with growing pauses, and returns the
// decision. It sends no money request. It returns when ctx ends (with the
// last report and ctx's error): give it a deadline — a PIX may stay
// pending for its whole expiry, a boleto for days.
//
// A refusal learned while waiting returns the report with an error
// matching ErrDeclined or ErrRefused. Other errors as Refresh; a failed
// read of the API is not an error here (the next look tries again).
func (c *Client) AwaitDecision(ctx context.Context, operationID string, p AwaitParams) (*DecisionReport, error) {
	if p.Poll <= 0 {
		p.Poll = time.Second
	}
	if p.MaxPoll <= 0 {
		p.MaxPoll = 30 * time.Second
	}
	if p.MaxPoll < p.Poll {
		p.MaxPoll = p.Poll
	}
	if p.QuietRead <= 0 {
		p.QuietRead = 2 * time.Minute
	}
	pause := p.Poll
	var (
		last     *DecisionReport
		lastRead = c.clock.Now()
		moved    = c.clock.Now()
	)
	for {
		rec, rep, err := c.recordedDecision(ctx, operationID)
		if err != nil {
			return rep, err
		}
		if last == nil || rep.Decision != last.Decision {
			moved = c.clock.Now()
		}
		last = rep
		if rep.Decision.Decided() {
			return rep, nil
		}
		now := c.clock.Now()
		if !p.Webhooks || (now.Sub(moved) >= p.QuietRead && now.Sub(lastRead) >= p.QuietRead) {
			lastRead = now
			if eff, rerr := c.readDecision(ctx, rec); rerr == nil {
				got, aerr := c.applyDecision(ctx, operationID, rec, eff, SourceRead)
				if aerr != nil || got.Decision.Decided() {
					return got, aerr
				}
				last = got
			} else if ctx.Err() != nil {
				return last, ctx.Err()
			} else {
				c.log.DebugContext(ctx, "pagpolar: reading the decision failed; trying again", "op", operationID, "err", rerr)
			}
		}
		if err := sleep(ctx, c.clock, pause); err != nil {
			return last, err
		}
		pause = min(2*pause, p.MaxPoll)
	}
}

// recordedDecision reads the operation's record: a succeeded one gives its
// report; anything else is the error Refresh documents.
func (c *Client) recordedDecision(ctx context.Context, opID string) (keystore.Record, *DecisionReport, error) {
	if err := identifier("operationID", opID, maxOperationID); err != nil {
		return keystore.Record{}, nil, err
	}
	rec, err := c.store.Get(ctx, c.storeID(opID))
	switch {
	case errors.Is(err, keystore.ErrNotFound):
		return rec, nil, fmt.Errorf("pagpolar: operation %q: %w", opID, ErrNotFound)
	case err != nil:
		return rec, nil, fmt.Errorf("pagpolar: operation %q: %w: %w", opID, ErrStoreUnavailable, err)
	case !c.ownsRecord(rec, opID):
		return rec, nil, fmt.Errorf("pagpolar: operation %q: %w (the record is another credential's)", opID, ErrNotFound)
	}
	switch rec.State {
	case keystore.StateSucceeded:
	case keystore.StateFailed, keystore.StateNotExecuted:
		_, ferr := c.fromRecord(opID, rec)
		if ferr == nil {
			ferr = fmt.Errorf("pagpolar: operation %q is %s", opID, rec.State)
		}
		return rec, nil, ferr
	default:
		return rec, nil, &OutcomeUnknownError{OperationID: opID, Key: rec.Key,
			Reason: "the operation is " + string(rec.State) + ", so its effect is not known yet: settle it first (Client.Resume, or the same call with the same operation ID)"}
	}
	d := decisionOfRecord(rec.Result)
	rep := &DecisionReport{OperationID: opID, Kind: rec.Kind, EffectID: d.ID, Status: d.Status, Decision: d.Decision,
		DecisionAt: d.DecisionAt, Source: SourceLocalRecord}
	if rep.Decision == "" {
		rep.Decision = DecisionUnrecognized
	}
	if rep.Decision.Refused() {
		return rec, rep, laterRefusal(opID, rec, d)
	}
	return rec, rep, nil
}

// readDecision reads the effect of a succeeded record from the API.
func (c *Client) readDecision(ctx context.Context, rec keystore.Record) (effect, error) {
	var m opMeta
	if err := json.Unmarshal(rec.Meta, &m); err != nil {
		return effect{}, fmt.Errorf("corrupt record meta: %w", err)
	}
	d := decisionOfRecord(rec.Result)
	switch rec.Kind {
	case kindPix, kindBoleto, kindCreditCard:
		if d.ID == "" {
			return effect{}, errors.New("the record names no sale")
		}
		return c.getObject(ctx, effSale, strings.Replace(wire.RouteSale, "{identifier}", url.PathEscape(d.ID), 1))
	case kindSubscribe:
		if d.ID == "" {
			return effect{}, errors.New("the record names no subscription")
		}
		return c.getObject(ctx, effSubscription, subscriptionPath(d.ID))
	case kindRefund:
		if d.ID == "" || m.SaleID == "" {
			return effect{}, errors.New("the record names no refund or no sale")
		}
		effs, err := c.listAll(ctx, effRefund, wire.RouteRefunds, url.Values{"sale_identifier": {m.SaleID}})
		for _, e := range effs {
			if e.idSt == wire.Read && e.ID == d.ID {
				return e, nil
			}
		}
		if err != nil {
			return effect{}, err
		}
		return effect{}, fmt.Errorf("refund %s is not in its sale's refund list", d.ID)
	case kindPlanChange:
		sub, err := c.getObject(ctx, effSubscription, subscriptionPath(m.SubscriptionID))
		if err != nil {
			return effect{}, err
		}
		return planChangeIn(sub, d.ID, m.OfferID)
	}
	return effect{}, fmt.Errorf("no decision to read for operation kind %q", rec.Kind)
}

// planChangeIn finds a plan change's current state in its subscription:
// by its identifier in the subscription's plan changes, or — for a change
// the API answered without one — by the subscription being on the new
// offer (applied). Anything else proves nothing about the decision.
func planChangeIn(sub effect, id, offer string) (effect, error) {
	if sub.planChangesSt == wire.Read && id != "" {
		for _, raw := range sub.planChanges {
			if pc, err := readEffect(effPlanChange, wire.AnswerGet, raw); err == nil && pc.idSt == wire.Read && pc.ID == id {
				return pc, nil
			}
		}
		return effect{}, fmt.Errorf("plan change %s is not listed by subscription %s", id, sub.ID)
	}
	if id == "" && sub.offerSt == wire.Read && sub.Offer == offer {
		return effect{kind: effPlanChange, SubID: sub.ID, Offer: offer, decided: DecisionApplied, Status: sub.Status, statusSt: sub.statusSt}, nil
	}
	return effect{}, fmt.Errorf("subscription %s does not show the plan change's decision", sub.ID)
}

// applyDecision moves rec's decision to eff's when it comes later, under
// the operation's lease, and reports where the decision stands.
func (c *Client) applyDecision(ctx context.Context, opID string, rec keystore.Record, eff effect, src Source) (*DecisionReport, error) {
	stored := decisionOfRecord(rec.Result)
	if eff.kind != effPlanChange || stored.ID != "" {
		if eff.idSt != wire.Read || eff.ID != stored.ID {
			return nil, fmt.Errorf("pagpolar: operation %q: the %s read is %s, not the recorded %s", opID, effectNoun(rec.Kind), eff.label(), stored.ID)
		}
	}
	got := eff.decision()
	rep := &DecisionReport{OperationID: opID, Kind: rec.Kind, EffectID: stored.ID, Status: stored.Status, Decision: stored.Decision,
		DecisionAt: stored.DecisionAt, Source: SourceLocalRecord}
	if !advances(stored.Decision, got) {
		if rep.Decision.Refused() {
			return rep, laterRefusal(opID, rec, stored)
		}
		return rep, nil
	}
	now := c.clock.Now().UTC()
	rep.Status, rep.Decision, rep.DecisionAt, rep.Source, rep.Moved = eff.Status, got, now, src, true
	if err := c.storeDecision(ctx, rec, eff.Status, got, now); err != nil {
		// The decision is what the API said; the record keeps the older one
		// and a later Refresh, event or call moves it.
		rep.Moved = false
		c.log.WarnContext(ctx, "pagpolar: a later decision could not be recorded", "op", opID, "decision", got, "err", err)
	} else {
		c.emit(ctx, Event{Kind: EventDecision, OperationID: opID, Key: rec.Key, State: string(rec.State), Decision: got, Source: src})
	}
	if got.Refused() {
		return rep, laterRefusal(opID, rec, storedDecision{ID: stored.ID, Status: eff.Status, Decision: got, DecisionAt: now})
	}
	return rep, nil
}

// storeDecision rewrites a succeeded record's result with a later
// decision, under a lease of its own, and only if the stored decision is
// still older (another process may have moved it meanwhile). The state
// stays succeeded: the effect exists whatever was decided.
func (c *Client) storeDecision(ctx context.Context, rec keystore.Record, status string, d Decision, at time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	owner := c.callOwner()
	cur, err := c.store.Acquire(ctx, rec.OperationID, owner, c.policy.LeaseTTL)
	if err != nil {
		return err
	}
	defer func() {
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer rcancel()
		_ = c.store.Release(rctx, cur.OperationID, cur.LeaseToken)
	}()
	if cur.State != keystore.StateSucceeded || !advances(decisionOfRecord(cur.Result).Decision, d) {
		return nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(cur.Result, &fields); err != nil {
		return fmt.Errorf("stored result unreadable: %w", err)
	}
	fields["status"], fields["decision"], fields["decision_at"] = mustJSON(status), mustJSON(d), mustJSON(at)
	cur.Result = mustJSON(fields)
	_, err = c.store.Update(ctx, cur)
	return err
}
