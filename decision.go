package pagpolar

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/keystore"
)

// Decision is what the API says about an effect now: the second of the
// two answers an operation has (SAFETY.md, vocabulary). The first — does
// the effect exist? — is the operation's outcome: succeeded (it exists),
// failed, not executed, or unknown. A succeeded operation carries its
// effect's decision, which may still move: a card sale answered pending
// until antifraud decides, a refund requested until it is processed, a
// plan change scheduled for the next cycle. A pending card is an answer,
// never "outcome unknown".
//
// Decisions move forward, never backward (see advances): an answer, a
// webhook event or a read (Client.Refresh) replaces the stored decision
// only when it comes later.
type Decision string

// Decisions. A status the SDK does not know is DecisionUnrecognized, and
// the raw status is always kept beside it (Sale.Status, Refund.Status, ...).
const (
	// DecisionUnrecognized: the API sent a status the SDK does not know (or
	// none). The effect exists; what the API decided is not known. Never
	// ship on it; Client.Refresh or a webhook may tell more.
	DecisionUnrecognized Decision = "unrecognized"

	// Sales.
	DecisionPending           Decision = "pending"     // created; awaiting payment (PIX, boleto) or the card's decision
	DecisionInAnalysis        Decision = "in_analysis" // a card under antifraud or 3-D Secure
	DecisionPaid              Decision = "paid"        // paid or approved: ship
	DecisionDeclined          Decision = "declined"    // refused: nothing was charged (a sale or subscription)
	DecisionPartiallyRefunded Decision = "partially_refunded"
	DecisionRefunded          Decision = "refunded"
	DecisionCanceled          Decision = "canceled"
	DecisionExpired           Decision = "expired" // a PIX or boleto not paid in time

	// Refunds.
	DecisionRequested Decision = "requested" // accepted, not yet processed
	DecisionCompleted Decision = "completed" // processed: the money went back
	DecisionFailed    Decision = "failed"    // refused (a refund or a plan change)

	// Plan changes.
	DecisionScheduled Decision = "scheduled" // accepted; applied at the next billing cycle
	DecisionApplied   Decision = "applied"

	// Subscriptions.
	DecisionActive  Decision = "active"
	DecisionOverdue Decision = "overdue" // a renewal is unpaid
)

// Decided reports whether the API has decided: every decision but
// pending, in analysis, requested, scheduled and unrecognized. A decided
// effect may still move on (a paid sale refunded, an active subscription
// canceled).
func (d Decision) Decided() bool {
	switch d {
	case DecisionPending, DecisionInAnalysis, DecisionRequested, DecisionScheduled, DecisionUnrecognized, "":
		return false
	}
	return true
}

// Paid reports whether a sale is paid (approved): the moment to ship.
// A sale refunded later was paid, but Paid is false then: the money went
// back.
func (d Decision) Paid() bool { return d == DecisionPaid }

// Refused reports a refusal: a declined sale or subscription, a failed
// refund or plan change. The operation then ended failed (ErrDeclined,
// ErrRefused) and nothing was charged, refunded or changed by it: a new
// attempt may go under a new operation ID.
func (d Decision) Refused() bool { return d == DecisionDeclined || d == DecisionFailed }

// decisionTables map a normalised status (wire.Normalize) to its decision,
// per effect kind. ASSUMED spellings, English and Portuguese; a status
// absent from its table is DecisionUnrecognized. Which statuses are
// refusals is wire's status table (wire.StatusRefused): a refusal is the
// only status that fails an operation.
var decisionTables = [...]map[string]Decision{
	effSale: {
		"pending": DecisionPending, "waiting_payment": DecisionPending, "awaiting_payment": DecisionPending,
		"created": DecisionPending, "processing": DecisionPending, "pendente": DecisionPending, "aguardando_pagamento": DecisionPending,
		"in_analysis": DecisionInAnalysis, "in_review": DecisionInAnalysis, "under_review": DecisionInAnalysis,
		"analyzing": DecisionInAnalysis, "em_analise": DecisionInAnalysis, "review": DecisionInAnalysis,
		"paid": DecisionPaid, "approved": DecisionPaid, "authorized": DecisionPaid, "captured": DecisionPaid,
		"completed": DecisionPaid, "succeeded": DecisionPaid, "confirmed": DecisionPaid, "pago": DecisionPaid,
		"aprovado": DecisionPaid, "aprovada": DecisionPaid, "paga": DecisionPaid,
		"declined": DecisionDeclined, "refused": DecisionDeclined, "failed": DecisionDeclined, "denied": DecisionDeclined,
		"rejected": DecisionDeclined, "not_authorized": DecisionDeclined, "recusado": DecisionDeclined,
		"recusada": DecisionDeclined, "negado": DecisionDeclined, "negada": DecisionDeclined,
		"reprovado": DecisionDeclined, "reprovada": DecisionDeclined,
		"partially_refunded": DecisionPartiallyRefunded, "refunded": DecisionRefunded, "estornado": DecisionRefunded,
		"canceled": DecisionCanceled, "cancelled": DecisionCanceled, "cancelado": DecisionCanceled, "cancelada": DecisionCanceled,
		"expired": DecisionExpired, "expirado": DecisionExpired, "expirada": DecisionExpired,
	},
	effRefund: {
		"pending": DecisionRequested, "requested": DecisionRequested, "processing": DecisionRequested,
		"in_progress": DecisionRequested, "created": DecisionRequested, "solicitado": DecisionRequested,
		"completed": DecisionCompleted, "succeeded": DecisionCompleted, "refunded": DecisionCompleted,
		"done": DecisionCompleted, "processed": DecisionCompleted, "concluido": DecisionCompleted, "estornado": DecisionCompleted,
		"failed": DecisionFailed, "rejected": DecisionFailed, "refused": DecisionFailed, "denied": DecisionFailed,
		"recusado": DecisionFailed, "negado": DecisionFailed,
	},
	effSubscription: {
		"pending": DecisionPending, "waiting_payment": DecisionPending, "trialing": DecisionActive,
		"active": DecisionActive, "ativa": DecisionActive, "paused": DecisionActive,
		"delayed": DecisionOverdue, "past_due": DecisionOverdue, "overdue": DecisionOverdue, "atrasada": DecisionOverdue,
		"canceled": DecisionCanceled, "cancelled": DecisionCanceled, "cancelada": DecisionCanceled,
	},
	effPlanChange: {
		"pending": DecisionScheduled, "scheduled": DecisionScheduled, "accepted": DecisionScheduled,
		"requested": DecisionScheduled, "agendado": DecisionScheduled, "agendada": DecisionScheduled,
		"applied": DecisionApplied, "completed": DecisionApplied, "succeeded": DecisionApplied, "done": DecisionApplied,
		"aplicado": DecisionApplied, "aplicada": DecisionApplied,
		"rejected": DecisionFailed, "failed": DecisionFailed, "refused": DecisionFailed, "declined": DecisionFailed,
	},
}

// decisionOf is the decision a status stands for, for an effect of kind.
// A refusal status (wire's tables) is always DecisionDeclined or
// DecisionFailed, whatever this table says.
func decisionOf(kind effectKind, status string) Decision {
	n := wire.Normalize(status)
	if n == "" {
		return DecisionUnrecognized
	}
	if refusal(kind, status) {
		if kind == effSale || kind == effSubscription {
			return DecisionDeclined
		}
		return DecisionFailed
	}
	if d, ok := decisionTables[kind][n]; ok && !d.Refused() {
		return d
	}
	return DecisionUnrecognized
}

// refusal reports whether status says the API recorded the attempt and
// refused it: the one kind of status that fails an operation (SAFETY rule
// 3). Every other status, decided or not, known or not, is the decision
// of an effect that exists.
func refusal(kind effectKind, status string) bool {
	var table map[string]wire.StatusClass
	switch kind {
	case effSale:
		table = wire.SaleStatuses
	case effRefund:
		table = wire.RefundStatuses
	case effSubscription:
		table = wire.SubscriptionStatuses
	default:
		table = wire.PlanChangeStatuses
	}
	return wire.ClassifyStatus(table, status) == wire.StatusRefused
}

// rank orders decisions of one kind: a later one has a higher rank.
// Alternatives share a rank (paid, declined, canceled, expired). Unknown
// decisions rank 0: any recognised decision replaces them, and they never
// replace a recognised one.
func (d Decision) rank() int {
	switch d {
	case DecisionPending, DecisionRequested, DecisionScheduled:
		return 1
	case DecisionInAnalysis:
		return 2
	case DecisionPaid, DecisionDeclined, DecisionCanceled, DecisionExpired,
		DecisionCompleted, DecisionFailed, DecisionApplied, DecisionActive, DecisionOverdue:
		return 3
	case DecisionPartiallyRefunded:
		return 4
	case DecisionRefunded:
		return 5
	}
	return 0
}

// advances reports whether a received decision may replace the stored one:
// only one that comes later. A decision never moves backward (a late
// "pending" event after "paid"), and never from one alternative to another
// (a "paid" after "declined": only an operator can sort that out; the API
// does not undo a refusal).
func advances(stored, received Decision) bool {
	if stored == "" {
		return received != ""
	}
	return received.rank() > stored.rank()
}

// storedDecision is the decision a succeeded record's result holds (the
// typed result JSON: every kind has "id", "status", "decision" and
// "decision_at").
type storedDecision struct {
	ID         string    `json:"id"`
	Status     string    `json:"status"`
	Decision   Decision  `json:"decision"`
	DecisionAt time.Time `json:"decision_at"`
}

func decisionOfRecord(result []byte) storedDecision {
	var d storedDecision
	_ = json.Unmarshal(result, &d)
	return d
}

// DecisionOfResult is the decision a succeeded record's Result holds
// (keystore.Record.Result, as the SDK writes it), for tools that read the
// store: DecisionUnrecognized when it holds none.
func DecisionOfResult(result []byte) Decision {
	if d := decisionOfRecord(result).Decision; d != "" {
		return d
	}
	return DecisionUnrecognized
}

// recordDecision is a succeeded record's decision ("" for other states).
func recordDecision(rec keystore.Record) Decision {
	if rec.State != keystore.StateSucceeded {
		return ""
	}
	if d := decisionOfRecord(rec.Result).Decision; d != "" {
		return d
	}
	return DecisionUnrecognized
}

// laterRefusal is the error of an operation whose effect the API refused
// after its first answer (a card pending, then declined): the request took
// effect, and nothing was charged by it. Like a decline in the first
// answer, it matches ErrDeclined (sales, subscriptions) or ErrRefused
// (refunds, plan changes), and a new attempt needs a new operation ID.
func laterRefusal(opID string, rec keystore.Record, d storedDecision) error {
	sentinel := ErrRefused
	if rec.Kind == kindPix || rec.Kind == kindBoleto || rec.Kind == kindCreditCard || rec.Kind == kindSubscribe {
		sentinel = ErrDeclined
	}
	return &OperationError{OperationID: opID, Key: rec.Key, State: rec.State,
		Err: fmt.Errorf("%w: %s %s was %s after it was created (status %q, learned %s)", sentinel, effectNoun(rec.Kind), d.ID, d.Decision,
			d.Status, d.DecisionAt.UTC().Format(time.RFC3339))}
}

func effectNoun(kind string) string {
	switch kind {
	case kindRefund:
		return "refund"
	case kindSubscribe:
		return "subscription"
	case kindPlanChange:
		return "plan change"
	}
	return "sale"
}

// Decision is the sale's decision (Sale.Decision).
func (c *Charge) Decision() Decision { return c.Sale.Decision }

// Decision is the refund's decision (Refund.Decision).
func (r *RefundResult) Decision() Decision { return r.Refund.Decision }

// Decision is the subscription's decision (Subscription.Decision).
func (r *SubscriptionResult) Decision() Decision { return r.Subscription.Decision }

// Decision is the plan change's decision (PlanChange.Decision).
func (r *PlanChangeResult) Decision() Decision { return r.PlanChange.Decision }
