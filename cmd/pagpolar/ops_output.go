package main

// What pagpolar ops prints: records, settle's results and the dry runs, as
// text for people or JSON for scripts.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore"
)

type opsOutput struct {
	w    io.Writer
	json bool
}

// opView is what ops prints of a record: everything but the lease owner's
// internals is safe to show (no token or personal data is ever stored).
type opView struct {
	OperationID    string          `json:"operation_id"`
	Key            string          `json:"idempotency_key"`
	Kind           string          `json:"kind"`
	State          keystore.State  `json:"state"`
	Attempts       int             `json:"attempts"`
	Ref            string          `json:"ref,omitempty"`
	Error          string          `json:"error,omitempty"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
	FirstSentAt    *time.Time      `json:"first_sent_at,omitempty"`
	LastSentAt     *time.Time      `json:"last_sent_at,omitempty"`
	LeaseOwner     string          `json:"lease_owner,omitempty"`
	LeaseExpiresAt *time.Time      `json:"lease_expires_at,omitempty"`
	Meta           json.RawMessage `json:"meta,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
}

func view(r keystore.Record) opView {
	v := opView{OperationID: r.OperationID, Key: r.Key, Kind: r.Kind, State: r.State, Attempts: r.Attempts, Ref: r.ResultRef,
		Error: r.Error, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, LeaseOwner: r.LeaseOwner}
	if !r.FirstSentAt.IsZero() {
		v.FirstSentAt = &r.FirstSentAt
	}
	if !r.LastSentAt.IsZero() {
		v.LastSentAt = &r.LastSentAt
	}
	// A settled record's lease means nothing (the SDK does not spend a
	// write releasing it), so it is only shown on unfinished ones.
	if r.LeaseOwner != "" && !r.LeaseExpiresAt.IsZero() && !r.State.Settled() {
		v.LeaseExpiresAt = &r.LeaseExpiresAt
	} else {
		v.LeaseOwner = ""
	}
	if json.Valid(r.Meta) {
		v.Meta = r.Meta
	}
	if json.Valid(r.Result) {
		v.Result = r.Result
	}
	return v
}

func (o *opsOutput) encode(v any) int {
	enc := json.NewEncoder(o.w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return exitFailed
	}
	return exitOK
}

// moreNotice is what list says when it shows only some of the matches.
func moreNotice(shown int) string {
	return fmt.Sprintf("showing %d of at least %d; -limit N or -all", shown, shown+1)
}

// listView is list's JSON: the operations and whether the store holds
// more matches than shown (then Notice says how to see them).
type listView struct {
	Operations []opView `json:"operations"`
	More       bool     `json:"more"`
	Notice     string   `json:"notice,omitempty"`
}

// records prints a list; more says the store holds more matches than
// shown (text: the last line says so; JSON: "more" and "notice").
func (o *opsOutput) records(recs []keystore.Record, more bool, _ io.Writer) int {
	if o.json {
		v := listView{Operations: make([]opView, 0, len(recs)), More: more}
		for _, r := range recs {
			v.Operations = append(v.Operations, view(r))
		}
		if more {
			v.Notice = moreNotice(len(recs))
		}
		return o.encode(v)
	}
	tw := tabwriter.NewWriter(o.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "OPERATION\tKIND\tSTATE\tATTEMPTS\tAGE\tREF\tERROR")
	for _, r := range recs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.OperationID, r.Kind, r.State, r.Attempts,
			time.Since(r.UpdatedAt).Truncate(time.Second), r.ResultRef, truncate(r.Error, 60))
	}
	if err := tw.Flush(); err != nil {
		return exitFailed
	}
	if more {
		fmt.Fprintln(o.w, moreNotice(len(recs)))
	} else {
		fmt.Fprintf(o.w, "%d operation(s)\n", len(recs))
	}
	return exitOK
}

func (o *opsOutput) record(r keystore.Record) int {
	if o.json {
		return o.encode(view(r))
	}
	v := view(r)
	tw := tabwriter.NewWriter(o.w, 0, 4, 2, ' ', 0)
	row := func(k string, val any) { fmt.Fprintf(tw, "%s\t%v\n", k, val) }
	row("operation", v.OperationID)
	row("idempotency key", v.Key)
	row("kind", v.Kind)
	row("state", v.State)
	row("attempts", v.Attempts)
	row("ref", v.Ref)
	row("error", v.Error)
	row("created", v.CreatedAt.Format(time.RFC3339))
	row("updated", v.UpdatedAt.Format(time.RFC3339))
	if v.FirstSentAt != nil {
		row("first sent", v.FirstSentAt.Format(time.RFC3339Nano))
		row("last sent", v.LastSentAt.Format(time.RFC3339Nano))
	}
	if v.LeaseExpiresAt != nil {
		row("lease", fmt.Sprintf("%s until %s", v.LeaseOwner, v.LeaseExpiresAt.Format(time.RFC3339)))
	}
	row("meta", string(v.Meta))
	row("result", string(v.Result))
	if err := tw.Flush(); err != nil {
		return exitFailed
	}
	return exitOK
}

// settledRow is one line of settle's output.
type settledRow struct {
	OperationID     string         `json:"operation_id"` // <credential>/<operation>, as list and show print it
	State           keystore.State `json:"state"`
	Ref             string         `json:"ref,omitempty"`
	Attempts        int            `json:"attempts"`
	ConclusiveAfter *time.Time     `json:"conclusive_after,omitempty"` // unsettled: run settle again after this
	Note            string         `json:"note,omitempty"`
}

func (o *opsOutput) resumed(cred string, rs []pagpolar.ResumeResult) int {
	unsettled := 0
	rows := make([]settledRow, 0, len(rs))
	for _, r := range rs {
		row := settledRow{OperationID: pagpolar.RecordID(cred, r.OperationID), State: r.State, Ref: r.Ref, Attempts: r.Attempts}
		var unk *pagpolar.OutcomeUnknownError
		switch {
		case errors.As(r.Err, &unk):
			row.Note = "outcome unknown: " + unk.Reason
			if unk.Err != nil {
				row.Note += " (" + strings.Join(strings.Fields(unk.Err.Error()), " ") + ")"
			}
			if unk.Ref != "" {
				row.Note += "; found " + unk.Ref
			}
			if !unk.SettleAfter.IsZero() {
				t := unk.SettleAfter.UTC()
				row.ConclusiveAfter = &t
			}
		case errors.Is(r.Err, pagpolar.ErrInProgress):
			row.Note = "another worker holds its lease: run settle again once it is released or expired"
		case r.Err != nil:
			row.Note = r.Err.Error()
		}
		if !r.State.Settled() {
			unsettled++
		}
		rows = append(rows, row)
	}
	if o.json {
		if o.encode(rows) != exitOK {
			return exitFailed
		}
	} else {
		tw := tabwriter.NewWriter(o.w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "OPERATION\tSTATE\tREF\tATTEMPTS\tCONCLUSIVE AFTER\tNOTE")
		for _, r := range rows {
			after := "-"
			if r.ConclusiveAfter != nil {
				after = r.ConclusiveAfter.Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", r.OperationID, r.State, r.Ref, r.Attempts, after, truncate(r.Note, 100))
		}
		_ = tw.Flush()
		fmt.Fprintf(o.w, "%d operation(s), %d still unsettled\n", len(rows), unsettled)
	}
	if unsettled > 0 {
		return exitUnsettled // distinguishable: "run again later"
	}
	return exitOK
}

// wouldSettle prints what settle would do with recs, as Resume decides it
// from the record alone (the lookups' answers are not known in advance).
func (o *opsOutput) wouldSettle(recs []keystore.Record, now time.Time) int {
	type row struct {
		OperationID string         `json:"operation_id"`
		State       keystore.State `json:"state"`
		Attempts    int            `json:"attempts"`
		Would       string         `json:"would"`
	}
	rows := make([]row, 0, len(recs))
	lookups, notExecuted, skipped := 0, 0, 0
	for _, r := range recs {
		var would string
		switch {
		case r.State.Settled():
			would = "nothing: already " + string(r.State)
			skipped++
		case r.LeaseOwner != "" && r.LeaseExpiresAt.After(now):
			would = fmt.Sprintf("skip it: leased by %s until %s (a live worker; run again after)", r.LeaseOwner, r.LeaseExpiresAt.UTC().Format(time.RFC3339))
			skipped++
		case r.State == keystore.StatePending && r.Attempts == 0:
			would = "record not_executed: it was saved but never sent (no request); left unsettled instead if the store cannot prove its history"
			notExecuted++
		default:
			would = "look its " + r.Kind + " up and record what it finds (succeeded, failed, not_executed once proven absent, or still unknown); never resend"
			lookups++
		}
		rows = append(rows, row{r.OperationID, r.State, r.Attempts, would})
	}
	summary := fmt.Sprintf("dry run: %d operation(s): %d would be looked up, %d recorded not_executed without a request, %d left alone; nothing changed",
		len(rows), lookups, notExecuted, skipped)
	if o.json {
		return o.encode(map[string]any{"dry_run": true, "operations": rows, "summary": summary})
	}
	tw := tabwriter.NewWriter(o.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "OPERATION\tSTATE\tATTEMPTS\tSETTLE WOULD")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", r.OperationID, r.State, r.Attempts, r.Would)
	}
	_ = tw.Flush()
	fmt.Fprintln(o.w, summary)
	return exitOK
}

// wouldReap prints the records reap would delete.
func (o *opsOutput) wouldReap(recs []keystore.Record, more bool, cutoff time.Time) int {
	n := fmt.Sprintf("%d", len(recs))
	if more {
		n = "more than " + n + " (-limit shows more)"
	}
	summary := fmt.Sprintf("dry run: would delete %s succeeded or failed record(s) last changed before %s; nothing deleted", n, cutoff.UTC().Format(time.RFC3339))
	if o.json {
		views := make([]opView, 0, len(recs))
		for _, r := range recs {
			views = append(views, view(r))
		}
		return o.encode(map[string]any{"dry_run": true, "cutoff": cutoff.UTC(), "would_delete": views, "limit_reached": more, "summary": summary})
	}
	tw := tabwriter.NewWriter(o.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "OPERATION\tKIND\tSTATE\tUPDATED")
	for _, r := range recs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.OperationID, r.Kind, r.State, r.UpdatedAt.UTC().Format(time.RFC3339))
	}
	_ = tw.Flush()
	fmt.Fprintln(o.w, summary)
	return exitOK
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
