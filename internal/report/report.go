// Package report is the bookkeeping of `pagpolar demo` and `pagpolar chaos`:
// it counts what the SDK did (through its Hook), summarises latencies, checks
// the key store's final records against the fake server's ledger, and prints
// the result for people (text) or scripts (JSON).
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Report is the outcome of one run.
type Report struct {
	Mode      string  `json:"mode"`  // "demo" or "chaos"
	Store     string  `json:"store"` // the store's URL without credentials
	Orders    int     `json:"orders"`
	FaultRate float64 `json:"fault_rate"`
	Seed      int64   `json:"seed"`
	WindowMS  float64 `json:"processing_window_ms"`
	// Shapes the fake answered in ("today": internal/wire's), and the
	// offset of the client's clock from the fake's and the store's.
	Shapes            []string `json:"shapes"`
	ClientClockOffset string   `json:"client_clock_offset,omitempty"`

	Check Check `json:"check"`

	// Obtained counts the operations by how the SDK obtained their final
	// answer in the call that settled them: response (the first answer to
	// a request), replay, lookup, local_record, declined, failed.
	Obtained Counts `json:"obtained"`
	// Settling says how the operations left unsettled by the checkout pass
	// were settled afterwards.
	Settling Settling `json:"settling"`

	SDK Stats `json:"sdk"` // from the client's Hook

	Requests      Requests `json:"requests"` // as the fake server received them
	FaultsApplied Counts   `json:"faults_applied"`

	Latency   Latency `json:"latency"` // per operation, first call to settled answer, checkout pass
	RunTimeMS float64 `json:"run_time_ms"`

	Chaos *ChaosStats `json:"chaos,omitempty"`
}

// Settling is the reconciliation after the checkout pass.
type Settling struct {
	LeftUnsettled     int `json:"left_unsettled"`      // operations the checkout pass left without an outcome
	SettledByResume   int `json:"settled_by_resume"`   // settled by ResumeAll (a lookup; never a send)
	SettledByReissue  int `json:"settled_by_reissue"`  // settled by calling again with the same operation ID
	ReconcileRounds   int `json:"reconcile_rounds"`    // ResumeAll + re-issue rounds run
	StillUnsettledEnd int `json:"still_unsettled_end"` // left after the last round
	// SettleMS is how long settling took, from the end of the checkout
	// pass until nothing more could be settled.
	SettleMS float64 `json:"settle_ms"`
}

// Requests counts what the fake server received.
type Requests struct {
	Total         int     `json:"total"`
	Posts         int     `json:"money_posts"`
	Reads         int     `json:"reads"`
	PerOrder      float64 `json:"per_order"`
	PostsPerOrder float64 `json:"money_posts_per_order"`
}

// ChaosStats is what only a chaos run has.
type ChaosStats struct {
	Workers       int      `json:"workers"`
	Incarnations  int      `json:"worker_processes_started"`
	Killed        int      `json:"killed_by_parent"`     // SIGKILLed at random moments
	CrashPoints   Counts   `json:"crash_point_kills"`    // processes that SIGKILLed themselves, by point
	OtherExits    int      `json:"other_abnormal_exits"` // exits neither killed nor clean (a bug)
	Completions   int      `json:"completions"`          // operation outcomes reported by workers
	Disagreements []string `json:"disagreements"`        // two workers reported different outcomes for one operation
}

// OK reports whether the run proved what it must: no double effect, no
// operation without an outcome, records in line with the ledger, and (chaos)
// workers that agreed and died only as planned.
func (r *Report) OK() bool {
	if !r.Check.OK() {
		return false
	}
	if r.Chaos != nil && (len(r.Chaos.Disagreements) > 0 || r.Chaos.OtherExits > 0) {
		return false
	}
	return true
}

// WriteJSON writes r as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes r for people.
func (r *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	line := func(k, format string, args ...any) { fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{k}, args...)...) }
	verdict := "OK"
	if !r.OK() {
		verdict = "FAILED"
	}
	fmt.Fprintf(tw, "pagpolar %s: %s\n", r.Mode, verdict)
	line("store", "%s", r.Store)
	shapes := "today (internal/wire's)"
	if len(r.Shapes) > 0 {
		shapes = strings.Join(r.Shapes, ", ")
	}
	line("answer shapes", "%s; client clock offset %s", shapes, orZero(r.ClientClockOffset))
	line("orders", "%d (operations %d; fault rate %.0f%%, seed %d; in-processing window %s, standing in for the API's 60 s)", r.Orders, r.Check.Operations, r.FaultRate*100, r.Seed, msString(r.WindowMS))
	line("successful effects in the ledger", "%d (%s); declined sales %d", r.Check.Effects, counts(Counts(r.Check.ByKind)), r.Check.Declined)
	line("charged twice (2+ successful effects)", "%d%s", len(r.Check.Duplicates), must0(len(r.Check.Duplicates)))
	line("reported failed while the effect exists", "%d%s", len(r.Check.FalseFailures), must0(len(r.Check.FalseFailures)))
	line("reported succeeded without the effect", "%d%s", len(r.Check.WithoutEffect), must0(len(r.Check.WithoutEffect)))
	line("effects no operation asked for", "%d%s", len(r.Check.Orphans), must0(len(r.Check.Orphans)))
	line("operations left unfinished", "%d%s", len(r.Check.Unfinished), must0(len(r.Check.Unfinished)))
	line("left \"outcome unknown\"", "%d (allowed: the SDK could not prove what happened and says so; a later call settles it)", len(r.Check.Unknown))
	line("final states", "%s", counts(Counts(r.Check.States)))
	line("how obtained", "%s", counts(r.Obtained))
	line("after the checkout pass", "%d operations still open; settled by ResumeAll (lookups, never a charge) %d, by calling again with the same operation ID %d; %d open at the end, after %d rounds, %s",
		r.Settling.LeftUnsettled, r.Settling.SettledByResume, r.Settling.SettledByReissue, r.Settling.StillUnsettledEnd, r.Settling.ReconcileRounds, msString(r.Settling.SettleMS))
	line("retries by cause", "%s", counts(r.SDK.Retries))
	line("ambiguous answers by cause", "%s (settled by %d lookups)", counts(r.SDK.Ambiguous), r.SDK.Lookups)
	line("budget exhaustions", "%d", r.SDK.Budget)
	line("requests", "%d (%d money POSTs, %d reads): %.2f per order, %.2f POSTs per order", r.Requests.Total, r.Requests.Posts, r.Requests.Reads, r.Requests.PerOrder, r.Requests.PostsPerOrder)
	line("faults applied", "%s", counts(r.FaultsApplied))
	line("latency per operation", "p50 %s, p99 %s, max %s (n=%d)", msString(r.Latency.P50MS), msString(r.Latency.P99MS), msString(r.Latency.MaxMS), r.Latency.N)
	if c := r.Chaos; c != nil {
		line("worker processes", "%d workers, %d processes started, %d SIGKILLed by chaos, crash points %s, other abnormal exits %d%s",
			c.Workers, c.Incarnations, c.Killed, counts(c.CrashPoints), c.OtherExits, must0(c.OtherExits))
		line("worker completions", "%d; disagreements %d%s", c.Completions, len(c.Disagreements), must0(len(c.Disagreements)))
	}
	line("run time", "%s", msString(r.RunTimeMS))
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, l := range []struct {
		name string
		list []string
	}{{"charged twice", r.Check.Duplicates}, {"false failure", r.Check.FalseFailures}, {"succeeded without effect", r.Check.WithoutEffect},
		{"effect nobody asked for", r.Check.Orphans}, {"unfinished", r.Check.Unfinished}, {"unknown", r.Check.Unknown}} {
		for i, s := range l.list {
			if i == 20 {
				fmt.Fprintf(w, "  %s: ... and %d more\n", l.name, len(l.list)-20)
				break
			}
			fmt.Fprintf(w, "  %s: %s\n", l.name, s)
		}
	}
	if r.Chaos != nil {
		for _, s := range r.Chaos.Disagreements {
			fmt.Fprintf(w, "  disagreement: %s\n", s)
		}
	}
	return nil
}

func orZero(s string) string {
	if s == "" {
		return "0s"
	}
	return s
}

func must0(n int) string {
	if n == 0 {
		return ""
	}
	return "   <-- must be 0"
}

func counts(c Counts) string {
	if len(c) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(c))
	for _, k := range c.Keys() {
		parts = append(parts, fmt.Sprintf("%s %d", k, c[k]))
	}
	return strings.Join(parts, ", ")
}

func msString(v float64) string {
	switch {
	case v >= 10000:
		return fmt.Sprintf("%.1fs", v/1000)
	case v >= 1000:
		return fmt.Sprintf("%.2fs", v/1000)
	default:
		return fmt.Sprintf("%.1fms", v)
	}
}
