package report

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// Expected is one business operation a run meant to carry out, and the key
// store's record of it at the end of the run (Found false: no record).
type Expected struct {
	OperationID string // as the caller named it, e.g. "pix:order-17"
	Record      keystore.Record
	Found       bool
	// Kind is "charge" (the default), "subscribe", "refund" or
	// "plan_change". Method and ExternalReference name a charge's or a
	// subscription's effect group; a refund's or plan change's group is its
	// Idempotency-Key (Record.Key).
	Kind              string
	Method            string
	ExternalReference string
	// IfEffect: the operation is expected only if its effect exists. A
	// refund or plan change follows its order's charge; when the store has
	// no record of the charge, whether it ran at all is known only from
	// the ledger (Record.Key then holds its derived Idempotency-Key).
	IfEffect bool
}

// Check is the verdict of comparing a run's operations with the fake
// server's ledger. The run is correct only when the must-be-zero lists are
// empty; Unknown counts operations left "outcome unknown", which the SDK
// may do when it cannot prove what happened (never a wrong answer).
type Check struct {
	Operations int `json:"operations"`
	// Effects counts the successful effects in the ledger (sales that were
	// not declined, refunds, subscriptions, plan changes), and Declined the
	// declined sales.
	Effects  int            `json:"successful_effects"`
	ByKind   map[string]int `json:"successful_effects_by_kind"`
	Declined int            `json:"declined_sales"`
	// States counts the operations by their final record state.
	States map[string]int `json:"final_states"`

	// Must be zero:
	// Duplicates: operations with more than one successful effect.
	Duplicates []string `json:"duplicates"`
	// FalseFailures: operations recorded failed or not executed while
	// their successful effect exists.
	FalseFailures []string `json:"false_failures"`
	// WithoutEffect: operations recorded succeeded whose effect is not in
	// the ledger (or is not theirs).
	WithoutEffect []string `json:"succeeded_without_effect"`
	// Orphans: successful effects of the credential that no expected
	// operation accounts for (a charge nobody asked for).
	Orphans []string `json:"orphans"`
	// Unfinished: operations with no record, or pending or not executed at
	// the end (the run did not finish its work).
	Unfinished []string `json:"unfinished"`
	// LostRecords: operations whose effect exists but whose record the key
	// store does not have (a store that lost records it had acknowledged).
	// Not a double effect: with the loss detected (the store refused every
	// new operation, Settling.Amnesia) it is the loss's size; undetected,
	// a failure.
	LostRecords []string `json:"lost_records"`

	// Allowed, and counted: operations left unknown at the end, with
	// whether their effect exists.
	Unknown []string `json:"unknown"`
	// UnknownWithEffect: of Unknown, those whose effect exists — the SDK
	// was silent where the API had answered. A liveness figure (never a
	// wrong answer), which an API that decides later must keep near 0;
	// UnknownShare is len(Unknown) / Operations.
	UnknownWithEffect []string `json:"unknown_with_effect"`
	UnknownShare      float64  `json:"unknown_share"`
	// Decisions counts the succeeded operations by the decision their
	// record holds at the end (pending, paid, requested, scheduled, ...);
	// DeclinedLater those whose effect the API refused after the first
	// answer (a card pending, then declined: the operation ends declined).
	Decisions     map[string]int `json:"decisions"`
	DeclinedLater int            `json:"declined_later"`
}

// MarshalJSON writes empty lists and counters as [] and {}, never null.
func (c Check) MarshalJSON() ([]byte, error) {
	type plain Check
	for _, l := range []*[]string{&c.Duplicates, &c.FalseFailures, &c.WithoutEffect, &c.Orphans, &c.Unfinished, &c.LostRecords, &c.Unknown, &c.UnknownWithEffect} {
		if *l == nil {
			*l = []string{}
		}
	}
	if c.ByKind == nil {
		c.ByKind = map[string]int{}
	}
	if c.States == nil {
		c.States = map[string]int{}
	}
	if c.Decisions == nil {
		c.Decisions = map[string]int{}
	}
	return json.Marshal(plain(c))
}

// OK reports whether no operation got two effects or a wrong outcome, no
// effect is unaccounted for, and every operation has a record that is
// settled or honestly unknown.
func (c Check) OK() bool {
	return len(c.Duplicates) == 0 && len(c.FalseFailures) == 0 && len(c.WithoutEffect) == 0 && len(c.Orphans) == 0 && len(c.Unfinished) == 0 && len(c.LostRecords) == 0
}

// Verify compares the expected operations of credential with the ledger.
func Verify(credential string, ledger pagpolartest.Ledger, ops []Expected) Check {
	c := Check{Operations: len(ops), ByKind: map[string]int{}, States: map[string]int{}, Decisions: map[string]int{}}
	groups := map[string][]pagpolartest.Effect{}
	byID := map[string]pagpolartest.Effect{}
	for _, e := range ledger.Effects() {
		if e.CredentialID != credential {
			continue
		}
		byID[e.ID] = e
		if e.Kind == "sale" && e.Status == "declined" {
			c.Declined++
		}
		if !e.Successful {
			continue
		}
		c.Effects++
		c.ByKind[e.Kind]++
		if g := pagpolartest.DefaultGroup(e); g != "" {
			groups[g] = append(groups[g], e)
		}
	}
	claimed := map[string]bool{}
	for _, op := range ops {
		g := groupOf(credential, op)
		claimed[g] = true
		effs := groups[g]
		if len(effs) > 1 {
			c.Duplicates = append(c.Duplicates, fmt.Sprintf("%s: %d effects (%s)", op.OperationID, len(effs), ids(effs)))
		}
		if !op.Found {
			switch {
			case len(effs) > 0:
				c.States["lost"]++
				c.LostRecords = append(c.LostRecords, fmt.Sprintf("%s: its effect %s exists, its record does not", op.OperationID, ids(effs)))
			case op.IfEffect:
				c.Operations-- // it may never have run
			default:
				c.States["missing"]++
				c.Unfinished = append(c.Unfinished, op.OperationID+": no record")
			}
			continue
		}
		st := op.Record.State
		c.States[string(st)]++
		switch st {
		case keystore.StateSucceeded:
			d := recordDecision(op.Record.Result)
			c.Decisions[d]++
			if e, ok := byID[op.Record.ResultRef]; ok && !e.Successful {
				// The effect exists and the API refused it after answering
				// (a card pending, then declined): right if the record says
				// so or has not learned it yet (still undecided); a record
				// that says paid would be a wrong decision.
				c.DeclinedLater++
				if d == "paid" {
					c.WithoutEffect = append(c.WithoutEffect, fmt.Sprintf("%s: decision paid, but the API declined %s", op.OperationID, e.ID))
				}
				continue
			}
			switch {
			case len(effs) == 0:
				c.WithoutEffect = append(c.WithoutEffect, fmt.Sprintf("%s: succeeded with %s, but the ledger has no effect", op.OperationID, op.Record.ResultRef))
			case !hasID(effs, op.Record.ResultRef) && !(op.Kind == "plan_change" && strings.HasPrefix(op.Record.ResultRef, "subscription ")):
				// A plan change settled from a subscription that lists no
				// plan changes has no ID of its own; its group is its key.
				c.WithoutEffect = append(c.WithoutEffect, fmt.Sprintf("%s: succeeded with %s, the ledger has %s", op.OperationID, op.Record.ResultRef, ids(effs)))
			}
		case keystore.StateFailed, keystore.StateNotExecuted:
			if len(effs) > 0 {
				c.FalseFailures = append(c.FalseFailures, fmt.Sprintf("%s: %s (%s), but the ledger has %s", op.OperationID, st, op.Record.Error, ids(effs)))
			} else if st == keystore.StateNotExecuted {
				c.Unfinished = append(c.Unfinished, fmt.Sprintf("%s: not executed at the end (%s)", op.OperationID, op.Record.Error))
			}
		case keystore.StateUnknown:
			has := "no effect"
			if len(effs) > 0 {
				has = "its effect " + ids(effs) + " exists"
			}
			c.Unknown = append(c.Unknown, fmt.Sprintf("%s: unknown, %s (%s)", op.OperationID, has, op.Record.Error))
			if len(effs) > 0 {
				c.UnknownWithEffect = append(c.UnknownWithEffect, fmt.Sprintf("%s: its effect %s exists; the SDK said unknown because %s", op.OperationID, ids(effs), op.Record.Error))
			}
		default:
			c.Unfinished = append(c.Unfinished, fmt.Sprintf("%s: %s (%s)", op.OperationID, st, op.Record.Error))
		}
	}
	for g, effs := range groups {
		if !claimed[g] {
			c.Orphans = append(c.Orphans, fmt.Sprintf("%s: %s", g, ids(effs)))
		}
	}
	for _, l := range [][]string{c.Duplicates, c.FalseFailures, c.WithoutEffect, c.Orphans, c.Unfinished, c.LostRecords, c.Unknown, c.UnknownWithEffect} {
		sort.Strings(l)
	}
	if c.Operations > 0 {
		c.UnknownShare = float64(len(c.Unknown)) / float64(c.Operations)
	}
	return c
}

// recordDecision is the decision a succeeded record's result holds
// ("unrecognized" when it holds none).
func recordDecision(result []byte) string {
	var r struct {
		Decision string `json:"decision"`
	}
	if json.Unmarshal(result, &r) != nil || r.Decision == "" {
		return "unrecognized"
	}
	return r.Decision
}

// groupOf names op's effect group as pagpolartest.DefaultGroup does.
func groupOf(credential string, op Expected) string {
	switch op.Kind {
	case "", "charge":
		return pagpolartest.DefaultGroup(pagpolartest.Effect{Kind: "sale", CredentialID: credential, Method: op.Method, ExternalReference: op.ExternalReference})
	case "subscribe":
		return pagpolartest.DefaultGroup(pagpolartest.Effect{Kind: "subscription", CredentialID: credential, Method: op.Method, ExternalReference: op.ExternalReference})
	case "plan_change":
		return pagpolartest.DefaultGroup(pagpolartest.Effect{Kind: "plan_change", CredentialID: credential, Key: op.Record.Key})
	}
	return pagpolartest.DefaultGroup(pagpolartest.Effect{Kind: "refund", CredentialID: credential, Key: op.Record.Key})
}

func hasID(effs []pagpolartest.Effect, id string) bool {
	for _, e := range effs {
		if e.ID == id {
			return true
		}
	}
	return false
}

func ids(effs []pagpolartest.Effect) string {
	s := make([]string, len(effs))
	for i, e := range effs {
		s[i] = e.ID
	}
	return strings.Join(s, ", ")
}
