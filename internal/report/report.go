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

	// Webhooks is the demo's last phase: the run's webhook events settle
	// what stayed "outcome unknown" (nil in chaos runs).
	Webhooks *Webhooks `json:"webhooks,omitempty"`

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
	// Stopped says why settling stopped before everything was settled
	// (its deadline, a store refusing every operation...); "" it ran to
	// its end.
	Stopped string `json:"stopped,omitempty"`
	// Amnesia says that settling stopped because the key store detected
	// that it lost records it had acknowledged, and refuses every new
	// operation (Stopped says so too).
	Amnesia bool `json:"amnesia,omitempty"`
}

// Webhooks is what the run's webhook events settled: when operations are
// still unknown after the reconciler, every event the fake emitted is
// delivered to an inbox whose Settle is the client (sharing its key store).
// The counts come from the records' states before and after, and from the
// fake's request log.
type Webhooks struct {
	UnknownBefore int      `json:"unknown_before"` // operations unknown when the phase began (0: the phase did not run)
	Settled       int      `json:"settled"`        // of those, succeeded after it: settled by an event
	StillUnknown  int      `json:"still_unknown"`  // of those, still unknown
	Other         []string `json:"other"`          // of those, in any other state after it (must be empty: events settle only successes)
	CarriedOn     int      `json:"carried_on"`     // orders run again once their first operation was settled (their refund or plan change)
	Events        int      `json:"events"`         // events delivered
	Deliveries    int      `json:"deliveries"`     // delivery attempts
	Refused       int      `json:"refused"`        // attempts the inbox did not answer 2xx
	Requests      int      `json:"requests"`       // requests the fake received meanwhile (must be 0: settling from an event never sends)
	MS            float64  `json:"ms"`
}

// MarshalJSON writes an empty list as [], never null.
func (w Webhooks) MarshalJSON() ([]byte, error) {
	type plain Webhooks
	if w.Other == nil {
		w.Other = []string{}
	}
	return json.Marshal(plain(w))
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

// MarshalJSON writes empty lists as [], never null.
func (c ChaosStats) MarshalJSON() ([]byte, error) {
	type plain ChaosStats
	if c.Disagreements == nil {
		c.Disagreements = []string{}
	}
	if c.CrashPoints == nil {
		c.CrashPoints = Counts{}
	}
	return json.Marshal(plain(c))
}

// MarshalJSON writes empty lists and counters as [] and {}, never null.
func (r Report) MarshalJSON() ([]byte, error) {
	type plain Report
	if r.Shapes == nil {
		r.Shapes = []string{}
	}
	for _, c := range []*Counts{&r.Obtained, &r.FaultsApplied, &r.SDK.Retries, &r.SDK.Ambiguous} {
		if *c == nil {
			*c = Counts{}
		}
	}
	return json.Marshal(plain(r))
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
	if w := r.Webhooks; w != nil && (w.Requests > 0 || len(w.Other) > 0) {
		return false
	}
	return true
}

// WriteJSON writes r as indented JSON. Empty lists are written [], never
// null.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// CheckLine is one counted check of the report: what is counted, how
// many, and whether anything but 0 fails the run. A new check is one more
// entry in Report.CheckLines.
type CheckLine struct {
	Label      string
	N          int
	MustBeZero bool
	Note       string // said after the count ("" nothing)
}

// CheckLines are the checks of the run, in the order the text prints them
// (just above the verdict, its last line).
func (r *Report) CheckLines() []CheckLine {
	return []CheckLine{
		{Label: "charged twice (two successful effects for one operation)", N: len(r.Check.Duplicates), MustBeZero: true},
		{Label: "reported failed or not executed, but the effect exists", N: len(r.Check.FalseFailures), MustBeZero: true},
		{Label: "reported succeeded, but the effect is not in the ledger", N: len(r.Check.WithoutEffect), MustBeZero: true},
		{Label: "sales or refunds that no operation asked for", N: len(r.Check.Orphans), MustBeZero: true},
		{Label: "operations without an outcome at the end", N: len(r.Check.Unfinished), MustBeZero: true},
		{Label: "effects whose record the key store lost", N: len(r.Check.LostRecords), MustBeZero: !r.Settling.Amnesia, Note: lostNote(r)},
		{Label: "left \"outcome unknown\"", N: len(r.Check.Unknown), Note: fmt.Sprintf("%.2f%% of operations; allowed: the SDK could not prove what happened and says so; a later call settles it", 100*r.Check.UnknownShare)},
		{Label: "of those, unknown although the effect exists", N: len(r.Check.UnknownWithEffect), Note: "a liveness figure: each is listed with its cause"},
	}
}

// WriteText writes the report for a person: what ran, what happened, the
// faults met and the operations behind any failed check, then the checks,
// and last the verdict, so that it is the last line on the screen.
func (r *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	line := func(k, format string, args ...any) {
		fmt.Fprintf(tw, "  %s\t"+format+"\n", append([]any{k}, args...)...)
	}
	fmt.Fprintf(tw, "pagpolar %s\n", r.Mode)

	fmt.Fprintln(tw, "\nwhat ran")
	line("orders", "%d, making %d operations (charges, subscriptions, refunds, plan changes); seed %d", r.Orders, r.Check.Operations, r.Seed)
	line("faults", "%.0f %% of the money requests were made to go wrong on purpose (list below)", r.FaultRate*100)
	line("in-processing window", "%s, standing in for the API's 60 s (every timeout and wait of the client is scaled to it)", msString(r.WindowMS))
	shapes := "today's (internal/wire)"
	if len(r.Shapes) > 0 && !(len(r.Shapes) == 1 && r.Shapes[0] == "today") {
		shapes = strings.Join(r.Shapes, ", ")
	}
	line("answer shapes", "%s; client clock offset %s", shapes, orZero(r.ClientClockOffset))
	line("key store", "%s", r.Store)

	fmt.Fprintln(tw, "\nwhat happened")
	line("effects in the ledger", "%d successful (%s); %d declined card sales", r.Check.Effects, counts(Counts(r.Check.ByKind)), r.Check.Declined)
	line("final states of the operations", "%s", counts(Counts(r.Check.States)))
	if len(r.Check.Decisions) > 0 {
		line("decisions of the succeeded", "%s; declined after they were answered: %d", counts(Counts(r.Check.Decisions)), r.Check.DeclinedLater)
	}
	line("where the final answers came from", "%s", obtained(r.Obtained))
	s := r.Settling
	line("settled after the checkout pass", "%d %s had no final answer when the checkout pass ended (a checkout request gives up after %s, as a web request would);",
		s.LeftUnsettled, plural(s.LeftUnsettled, "operation", "operations"), msString(2*r.WindowMS))
	line("", "a background job then settled %d by looking them up (ResumeAll: lookups, never a charge)", s.SettledByResume)
	line("", "and %d by calling again with the same operation ID (the SDK looks up first and resends only once the first attempt is proven absent);",
		s.SettledByReissue)
	line("", "%d still open after %d %s of that job, %s", s.StillUnsettledEnd, s.ReconcileRounds, plural(s.ReconcileRounds, "round", "rounds"), msString(s.SettleMS))
	if s.Stopped != "" {
		line("", "settling stopped before the end: %s", s.Stopped)
	}
	if wh := r.Webhooks; wh != nil {
		if wh.UnknownBefore == 0 {
			line("settled by webhook events", "none needed: no operation was left \"outcome unknown\"")
		} else {
			line("settled by webhook events", "%d unknown %s settled by webhook events, %d still unknown: the run's %d events (%d deliveries) went to an inbox whose Settle is the client;",
				wh.Settled, plural(wh.Settled, "outcome", "outcomes"), wh.StillUnknown, wh.Events, wh.Deliveries)
			line("", "%d requests reached the API meanwhile%s, %d deliveries refused, %d settled otherwise%s, %s; then %d %s went on (refund, plan change)",
				wh.Requests, must0(wh.Requests), wh.Refused, len(wh.Other), must0(len(wh.Other)), msString(wh.MS), wh.CarriedOn, plural(wh.CarriedOn, "order", "orders"))
		}
	}
	line("resends with the same key, by cause", "%s", described(r.SDK.Retries, retryCauses))
	line("answers that needed a lookup, by cause", "%s; %d lookups in all", described(r.SDK.Ambiguous, ambiguousCauses), r.SDK.Lookups)
	line("retries refused by the retry budget", "%d (each ends \"not executed\": safe to call again)", r.SDK.Budget)
	line("requests the fake received", "%d (%d money POSTs, %d reads): %.2f per order, %.2f POSTs per order", r.Requests.Total, r.Requests.Posts, r.Requests.Reads, r.Requests.PerOrder, r.Requests.PostsPerOrder)
	line("time per operation, checkout pass", "median %s, 99th percentile %s, slowest %s (n=%d)", msString(r.Latency.P50MS), msString(r.Latency.P99MS), msString(r.Latency.MaxMS), r.Latency.N)
	if c := r.Chaos; c != nil {
		line("worker processes", "%d workers, %d processes started, %d SIGKILLed by chaos, crash points %s, other abnormal exits %d%s",
			c.Workers, c.Incarnations, c.Killed, counts(c.CrashPoints), c.OtherExits, must0(c.OtherExits))
		line("worker completions", "%d; disagreements %d%s", c.Completions, len(c.Disagreements), must0(len(c.Disagreements)))
	}
	line("run time", "%s", msString(r.RunTimeMS))

	fmt.Fprintf(tw, "\nfaults met: %d requests went wrong on purpose (processed: the sale, refund, subscription or plan change was created) [name in -json]\n", r.FaultsApplied.Total())
	for _, k := range r.FaultsApplied.Keys() {
		d := faultWords[k]
		if d == "" {
			d = k
		}
		fmt.Fprintf(tw, "  %d\t%s [%s]\n", r.FaultsApplied[k], d, k)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	listed := false
	for _, l := range []struct {
		name string
		list []string
	}{{"charged twice", r.Check.Duplicates}, {"false failure", r.Check.FalseFailures}, {"succeeded without effect", r.Check.WithoutEffect},
		{"effect nobody asked for", r.Check.Orphans}, {"without an outcome", r.Check.Unfinished}, {"record lost by the key store", r.Check.LostRecords}, {"outcome unknown", r.Check.Unknown}, {"unknown although the effect exists", r.Check.UnknownWithEffect}, {"settled otherwise by an event", webhookOther(r)}} {
		for i, s := range l.list {
			if !listed {
				fmt.Fprintln(w, "\nthe operations behind the counts")
				listed = true
			}
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

	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nthe checks: the fake's ledger against what the SDK reported")
	for _, c := range r.CheckLines() {
		switch {
		case c.MustBeZero:
			line(c.Label, "%d%s", c.N, must0(c.N))
		case c.Note != "":
			line(c.Label, "%d (%s)", c.N, c.Note)
		default:
			line(c.Label, "%d", c.N)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\npagpolar %s: %s\n", r.Mode, r.Verdict())
	return nil
}

// Incomplete reports a run whose only failed check is operations left
// without an outcome because settling stopped before the end
// (Settling.Stopped says why): not a double or a false effect, but a run
// that could not finish.
func (r *Report) Incomplete() bool {
	if r.OK() || r.Settling.Stopped == "" {
		return false
	}
	cp := *r
	cp.Check.Unfinished = nil
	if r.Settling.Amnesia {
		// The store detected the loss and refused: what it lost is
		// counted, and is no double effect.
		cp.Check.LostRecords = nil
	}
	return cp.OK()
}

// lostNote explains the lost-records count: with the loss detected, the
// effects of operations the store forgot (each one effect, sent once,
// before the loss) are the loss's size, not a double charge.
func lostNote(r *Report) string {
	switch {
	case len(r.Check.LostRecords) == 0:
		return ""
	case r.Settling.Amnesia:
		return "the store lost records it had acknowledged, detected it and refused every new operation: each is one effect whose record is gone, not a double; an operator settles them (pagpolar ops recover)"
	}
	return "the store lost records without detecting it"
}

// Verdict is the report's one-line conclusion, the last line of its text.
func (r *Report) Verdict() string {
	switch {
	case r.Incomplete():
		return "INCOMPLETE: no order was charged twice, but settling stopped with operations still open: " + r.Settling.Stopped
	case !r.OK():
		return "FAILED: see the lines marked <-- above"
	}
	return "OK: no order was charged twice, and every operation has an outcome"
}

// faultWords says what each fault of pagpolartest does, by its name.
var faultWords = map[string]string{
	"drop_before_processing": "connection dropped before the API processed anything",
	"gateway":                "a gateway's error page (502/503/504); nothing processed",
	"rate_limit":             "429 Too Many Requests; nothing processed",
	"unavailable":            "the API's own 503; nothing processed",
	"latency":                "a slow answer",
	"commit_then_drop":       "processed, then the answer was lost",
	"commit_drop_release":    "processed, then the answer was lost and the key released (a blind resend would charge again)",
	"commit_then_500":        "processed, then answered 500",
	"commit_then_500_after":  "processed, then answered 500 some time later",
	"500_no_commit":          "answered 500 without processing",
	"hold":                   "kept in processing for a while (same-key requests get 409)",
	"lookup_lag":             "processed, but hidden from lookups for a while",
	"gateway_after_commit":   "processed, then a gateway's error page",
	"decline":                "card declined",
}

// retryCauses and ambiguousCauses say what the SDK's cause codes mean.
var retryCauses = map[string]string{
	"429":               "429 rate limited",
	"503":               "the API's own 503",
	"not-sent":          "connection refused, nothing sent",
	"trusted-not-found": "proven absent by lookup",
}

var ambiguousCauses = map[string]string{
	"500":       "500",
	"502":       "502 from a gateway",
	"503":       "503 from a gateway",
	"504":       "504 from a gateway",
	"transport": "connection lost or timed out",
	"409":       "409 still in processing",
}

func described(c Counts, words map[string]string) string {
	if len(c) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(c))
	for _, k := range c.Keys() {
		d := words[k]
		if d == "" {
			d = k
		}
		parts = append(parts, fmt.Sprintf("%s %d", d, c[k]))
	}
	return strings.Join(parts, ", ")
}

// obtained says how the final answers were obtained, in words.
func obtained(c Counts) string {
	return described(c, map[string]string{
		"response":     "the API's answer",
		"replay":       "a replay of the key's first answer",
		"lookup":       "a lookup",
		"local_record": "the key store (no request)",
		"declined":     "declined",
		"failed":       "failed",
		"unsettled":    "no final answer",
	})
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
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

func webhookOther(r *Report) []string {
	if r.Webhooks == nil {
		return nil
	}
	return r.Webhooks.Other
}
