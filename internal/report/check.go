package report

import (
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
	// Method and ExternalReference name a charge's effect group; a refund's
	// group is its Idempotency-Key (Record.Key).
	Method            string
	ExternalReference string
}

// Check is the verdict of comparing a run's operations with the fake
// server's ledger. The run is correct only when every list is empty.
type Check struct {
	Operations int `json:"operations"`
	// Effects counts the successful effects in the ledger (sales that were
	// not declined, refunds), and Declined the declined sales.
	Effects  int            `json:"successful_effects"`
	ByKind   map[string]int `json:"successful_effects_by_kind"`
	Declined int            `json:"declined_sales"`
	// States counts the operations by their final record state.
	States map[string]int `json:"final_states"`

	// Duplicates: operations with more than one successful effect.
	Duplicates []string `json:"duplicates"`
	// WithoutOutcome: operations whose record is missing or not settled as
	// succeeded or failed at the end (pending, unknown, not_executed).
	WithoutOutcome []string `json:"without_outcome"`
	// Mismatches: the record and the ledger disagree (succeeded without
	// its effect in the ledger, or failed while an effect exists).
	Mismatches []string `json:"mismatches"`
	// Orphans: successful effects of the credential that belong to no
	// expected operation.
	Orphans []string `json:"orphans"`
}

// OK reports whether no operation got two effects, none was left without
// an outcome, and the records agree with the ledger.
func (c Check) OK() bool {
	return len(c.Duplicates) == 0 && len(c.WithoutOutcome) == 0 && len(c.Mismatches) == 0 && len(c.Orphans) == 0
}

// Verify compares the expected operations of credential with the ledger.
func Verify(credential string, ledger pagpolartest.Ledger, ops []Expected) Check {
	c := Check{Operations: len(ops), ByKind: map[string]int{}, States: map[string]int{}}
	groups := map[string][]pagpolartest.Effect{}
	for _, e := range ledger.Effects() {
		if e.CredentialID != credential {
			continue
		}
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
			c.States["missing"]++
			c.WithoutOutcome = append(c.WithoutOutcome, op.OperationID+": no record")
			continue
		}
		st := op.Record.State
		c.States[string(st)]++
		switch st {
		case keystore.StateSucceeded:
			switch {
			case len(effs) == 0:
				c.Mismatches = append(c.Mismatches, fmt.Sprintf("%s: succeeded with %s, but the ledger has no effect", op.OperationID, op.Record.ResultRef))
			case !hasID(effs, op.Record.ResultRef):
				c.Mismatches = append(c.Mismatches, fmt.Sprintf("%s: succeeded with %s, the ledger has %s", op.OperationID, op.Record.ResultRef, ids(effs)))
			}
		case keystore.StateFailed:
			if len(effs) > 0 {
				c.Mismatches = append(c.Mismatches, fmt.Sprintf("%s: failed (%s), but the ledger has %s", op.OperationID, op.Record.Error, ids(effs)))
			}
		default:
			c.WithoutOutcome = append(c.WithoutOutcome, fmt.Sprintf("%s: %s (%s)", op.OperationID, st, op.Record.Error))
		}
	}
	for g, effs := range groups {
		if !claimed[g] {
			c.Orphans = append(c.Orphans, fmt.Sprintf("%s: %s", g, ids(effs)))
		}
	}
	sort.Strings(c.Duplicates)
	sort.Strings(c.WithoutOutcome)
	sort.Strings(c.Mismatches)
	sort.Strings(c.Orphans)
	return c
}

// groupOf names op's effect group as pagpolartest.DefaultGroup does.
func groupOf(credential string, op Expected) string {
	if op.Method != "" {
		return pagpolartest.DefaultGroup(pagpolartest.Effect{Kind: "sale", CredentialID: credential, Method: op.Method, ExternalReference: op.ExternalReference})
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
