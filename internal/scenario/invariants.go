package scenario

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// Outcome is what one call told its caller about an operation.
type Outcome int

// The outcomes.
const (
	// NoClaim: the call claims nothing about the effect (nothing was sent
	// by it: the store refused, another worker holds the operation, the
	// caller's context ended before anything was decided).
	NoClaim     Outcome = iota
	Succeeded           // the effect exists (EffectID, when given)
	Failed              // the operation failed definitively (refused, declined)
	NotExecuted         // nothing took effect; the caller may send again
	Unknown             // maybe: ErrOutcomeUnknown, or a record left pending/unknown
)

var outcomeNames = [...]string{"no-claim", "succeeded", "failed", "not-executed", "unknown"}

func (o Outcome) String() string { return outcomeNames[o] }

// Report is one call's answer about one operation.
type Report struct {
	Step     int    // the step (1-based) that made the call; 0 for the final settling
	OpID     string // the operation
	Outcome  Outcome
	EffectID string            // with Succeeded: the sale, refund, subscription or plan change returned
	Decision pagpolar.Decision // with Succeeded: the decision reported with it
	At       time.Time         // when the call returned, on the API's clock
	Err      error
}

// classify reads what a money call returned.
func classify(err error) Outcome {
	var opErr *pagpolar.OperationError
	switch {
	case err == nil:
		return Succeeded
	case errors.Is(err, pagpolar.ErrOutcomeUnknown):
		return Unknown
	case errors.As(err, &opErr):
		// The branch a caller reads (OutcomeOf), not the record's state:
		// a not_executed the store did not take is unknown.
		switch pagpolar.OutcomeOf(err) {
		case pagpolar.OutcomeFailed:
			return Failed
		case pagpolar.OutcomeNotExecuted:
			return NotExecuted
		}
		return Unknown
	case errors.Is(err, pagpolar.ErrDeclined), errors.Is(err, pagpolar.ErrRefused):
		return Failed
	case errors.Is(err, pagpolar.ErrRateLimited), errors.Is(err, pagpolar.ErrUnavailable),
		errors.Is(err, pagpolar.ErrBudgetExhausted), errors.Is(err, pagpolar.ErrUnauthorized):
		return NotExecuted
	}
	var apiErr *pagpolar.APIError
	if errors.As(err, &apiErr) {
		return Failed
	}
	return NoClaim
}

// fromState reads a record's (or ResumeResult's) state.
func fromState(s keystore.State) Outcome {
	switch s {
	case keystore.StateSucceeded:
		return Succeeded
	case keystore.StateFailed:
		return Failed
	case keystore.StateNotExecuted:
		return NotExecuted
	case keystore.StatePending, keystore.StateUnknown:
		return Unknown
	}
	return NoClaim
}

// Violation is a broken invariant.
type Violation struct {
	OpID string
	What string
	// Exposure: the operation met a documented exposure (SAFETY.md,
	// "Known exposure": processing past the 60 s mark, a lookup lagging
	// past the window), where the invariant cannot be promised. Counted,
	// not failed.
	Exposure bool
}

func (v Violation) String() string {
	s := v.OpID + ": " + v.What
	if v.Exposure {
		s += " (under a documented exposure)"
	}
	return s
}

// Truth is what the check is given: the fake's ledger and, per operation,
// its Idempotency-Key and whether it met a documented exposure.
type Truth struct {
	Ledger   pagpolartest.Ledger
	Keys     map[string]string // operation ID → key
	Exposed  map[string]bool
	SetupIDs map[string]bool // keys of the setup's effects (not operations of the scenario)
}

// Check is the specification: the invariants of SAFETY.md that every run
// must keep, whatever the API's shapes, clocks, caches and faults.
//
//  1. No operation has two successful effects (by its key, and by the
//     business grouping of the ledger: one charge per order and method).
//  2. No effect exists that no operation of the run sent (a key the
//     client should never have used).
//  3. A call that said succeeded names an effect of that operation that
//     exists (not another operation's) and, when it reported a decision
//     (paid, applied, completed, active...), took effect: not a declined
//     sale. A success reported undecided (pending, in analysis,
//     requested, scheduled, or a status it could not read) claims only
//     that the effect exists: existence and decision are two answers, and
//     an answer that shows no status proves no decision.
//  4. A call that said failed or not executed did so while no successful
//     effect of the operation existed or was still on its way (made by a
//     request sent before the call returned).
//  5. The store's final word on each operation agrees with the ledger.
//
// "Unknown" breaks nothing: it is the explicit answer for an ambiguous
// operation, counted by the runner as a liveness figure.
func Check(tr Truth, reports []Report, final map[string]keystore.Record) []Violation {
	var out []Violation
	add := func(op, format string, args ...any) {
		out = append(out, Violation{OpID: op, What: fmt.Sprintf(format, args...), Exposure: tr.Exposed[op]})
	}
	opOfKey := map[string]string{}
	for op, k := range tr.Keys {
		opOfKey[k] = op
	}
	effects := tr.Ledger.Effects()
	byOp := map[string][]pagpolartest.Effect{}
	for _, e := range effects {
		if e.Kind == "sale" && e.SubscriptionID != "" {
			continue // a subscription's first sale or a renewal: the subscription counts
		}
		if tr.SetupIDs[e.Key] {
			continue
		}
		op, ok := opOfKey[e.Key]
		if !ok {
			if e.Successful {
				add("key "+e.Key, "a successful %s %s was made with a key no operation of the run has", e.Kind, e.ID)
			}
			continue
		}
		byOp[op] = append(byOp[op], e)
	}
	ownerOf := map[string]string{} // effect ID → operation
	for op, es := range byOp {
		for _, e := range es {
			ownerOf[e.ID] = op
		}
	}
	successful := func(op string) []pagpolartest.Effect {
		var s []pagpolartest.Effect
		for _, e := range byOp[op] {
			if e.Successful {
				s = append(s, e)
			}
		}
		return s
	}
	for op := range tr.Keys { // 1
		if s := successful(op); len(s) > 1 {
			add(op, "%d successful effects: %s", len(s), effectList(s))
		}
	}
	for g, es := range tr.Ledger.Duplicates(pagpolartest.DefaultGroup) {
		if !tr.SetupIDs[es[0].Key] {
			add(opOfKey[es[0].Key], "the ledger groups %d successful effects under one business operation %s: %s", len(es), g, effectList(es))
		}
	}
	// Requests by key, to tell which effects a call could have caused.
	lastSent := map[string]time.Time{}
	for _, r := range tr.Ledger.Requests {
		if r.Key != "" && r.At.After(lastSent[r.Key]) {
			lastSent[r.Key] = r.At
		}
	}
	// contradicts reports whether effect e contradicts report r: made
	// before the call returned, or by no request sent after it (an effect
	// made later by a request sent after the call returned is a new
	// decision of the caller's).
	contradicts := func(r Report, e pagpolartest.Effect) bool {
		return !e.CreatedAt.After(r.At) || !lastSent[tr.Keys[r.OpID]].After(r.At)
	}
	// A success reported refused (declined, failed) tells the caller that
	// nothing was charged and a new operation may try: false while an
	// effect of the operation took effect, unless a request sent after
	// the call returned made it.
	refusedWhileCharged := func(r Report) {
		if !r.Decision.Refused() {
			return
		}
		for _, e := range successful(r.OpID) {
			if contradicts(r, e) {
				add(r.OpID, "step %d said succeeded refused (decision %q) while its effect %s %s (%s) took effect", r.Step, r.Decision, e.Kind, e.ID, e.Status)
			}
		}
	}
	for _, r := range reports { // 3, 4
		switch r.Outcome {
		case Succeeded:
			if r.EffectID == "" {
				if len(successful(r.OpID)) == 0 {
					add(r.OpID, "step %d said succeeded (%v), but no successful effect exists", r.Step, r.Err)
				}
				refusedWhileCharged(r)
				continue
			}
			var found *pagpolartest.Effect
			for _, e := range byOp[r.OpID] {
				if e.ID == r.EffectID {
					found = &e
				}
			}
			switch {
			case found == nil && ownerOf[r.EffectID] == "" && len(successful(r.OpID)) > 0:
				// Not an identifier (a plan change settled from its
				// subscription names the subscription): it claims the
				// effect exists, and it does.
			case found == nil:
				add(r.OpID, "step %d said succeeded with %s, which is not an effect of this operation (%s)", r.Step, r.EffectID, effectList(byOp[r.OpID]))
			case !found.Successful && claimsDecision(r.Decision):
				add(r.OpID, "step %d said succeeded with %s (decision %q), whose status %s did not take effect", r.Step, r.EffectID, r.Decision, found.Status)
			}
			refusedWhileCharged(r)
		case Failed, NotExecuted:
			for _, e := range successful(r.OpID) {
				if contradicts(r, e) {
					add(r.OpID, "step %d said %s (%v) while its effect %s %s (%s) exists or was on its way", r.Step, r.Outcome, r.Err, e.Kind, e.ID, e.Status)
				}
			}
		}
	}
	for op, rec := range final { // 5
		s := successful(op)
		switch fromState(rec.State) {
		case Succeeded:
			d := pagpolar.DecisionOfResult(rec.Result)
			switch o := ownerOf[rec.ResultRef]; {
			case len(s) == 0 && (claimsDecision(d) || len(byOp[op]) == 0):
				add(op, "the store says succeeded (%s, decision %q), the ledger has no successful effect (%s)", rec.ResultRef, d, effectList(byOp[op]))
			case rec.ResultRef != "" && o != "" && o != op:
				add(op, "the store says succeeded with %s, an effect of %s (this operation's: %s)", rec.ResultRef, o, effectList(s))
			case len(s) == 0 && rec.ResultRef != "" && !names(byOp[op], rec.ResultRef):
				// Undecided: it claims only that its effect exists, and
				// the one it names must be this operation's.
				add(op, "the store says succeeded undecided with %s, not an effect of this operation (%s)", rec.ResultRef, effectList(byOp[op]))
			case d.Refused() && len(s) > 0:
				add(op, "the store says succeeded refused (decision %q, %s) while the ledger has %s", d, rec.ResultRef, effectList(s))
			}
		case Failed, NotExecuted:
			if len(s) > 0 {
				add(op, "the store says %s (%s), the ledger has %s", rec.State, rec.Error, effectList(s))
			}
		}
	}
	return out
}

// claimsDecision reports whether a success reported with decision d
// claims that its effect took effect: every decision but the undecided
// ones (pending, in analysis, requested, scheduled, unrecognized) and a
// later refusal, which says the effect exists and nothing was charged. A
// success reported with no decision at all claims it took effect.
func claimsDecision(d pagpolar.Decision) bool {
	return d == "" || (d.Decided() && !d.Refused())
}

// names reports whether ref is one of the effects es or the subscription
// one of them belongs to (a plan change settled from its subscription
// names it, bare or as "subscription <id> on <offer>" when the change has
// no identifier of its own).
func names(es []pagpolartest.Effect, ref string) bool {
	for _, e := range es {
		if e.ID == ref || e.SubscriptionID != "" && (e.SubscriptionID == ref || strings.HasPrefix(ref, "subscription "+e.SubscriptionID+" on ")) {
			return true
		}
	}
	return false
}

func effectList(es []pagpolartest.Effect) string {
	s := ""
	for i, e := range es {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s %s %s", e.Kind, e.ID, e.Status)
	}
	if s == "" {
		return "none"
	}
	return s
}

// storeRecords reads the final record of each operation.
func storeRecords(ctx context.Context, st keystore.Store, cred string, ops []string) map[string]keystore.Record {
	out := map[string]keystore.Record{}
	for _, op := range ops {
		if rec, err := st.Get(ctx, pagpolar.RecordID(cred, op)); err == nil {
			out[op] = rec
		}
	}
	return out
}
