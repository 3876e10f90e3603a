package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/storeurl"
)

const opsUsage = `usage: pagpolar ops <command> -store URL [flags] [ID]     (flags before the ID)

The operator's view of a key store (sqlite:PATH, postgres://..., redis://...).

commands:
  list    list operations by state and age      [-state S1,S2 (default: all)] [-older-than 10m] [-prefix P] [-limit 100]
  show    show one operation                    ID (as listed: <credential>/<operation>)
  settle  settle unfinished operations by lookup, never charging
                                                [ID | -all] -credential ID [-base-url URL]; token from $PAGPOLAR_TOKEN
  reap    delete settled records past retention [-retention 720h] [-batch 500]
  inbox   the webhook inbox: list, show, retry  (pagpolar ops inbox -h)

Every command takes -json for machine-readable output. Records never hold a
token, card data or a personal document.

exit codes: 0 done; 1 store or API error; 2 bad usage; 3 no such operation;
4 (settle) some operations are still unsettled: run it again after the
"conclusive after" time it prints.`

// runOps is the `pagpolar ops` command.
func runOps(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stderr, opsUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sub, args := args[0], args[1:]
	if sub == "inbox" {
		return runInbox(ctx, args, stdout, stderr)
	}
	fs := flag.NewFlagSet("ops "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	storeURL := fs.String("store", os.Getenv("PAGPOLAR_STORE"), "key store URL: sqlite:PATH, postgres://..., redis://... (default $PAGPOLAR_STORE)")
	asJSON := fs.Bool("json", false, "machine-readable output")
	states := fs.String("state", "", "comma-separated states (list; default: all)")
	olderThan := fs.Duration("older-than", 0, "only records not updated for this long (list)")
	prefix := fs.String("prefix", "", "operation ID prefix, e.g. <credential>/pix: (list)")
	limit := fs.Int("limit", 100, "maximum records (list)")
	all := fs.Bool("all", false, "settle every unfinished operation of the credential (settle)")
	cred := fs.String("credential", os.Getenv("PAGPOLAR_CREDENTIAL_ID"), "credential ID (settle; default $PAGPOLAR_CREDENTIAL_ID)")
	baseURL := fs.String("base-url", envOr("PAGPOLAR_BASE_URL", pagpolar.DefaultBaseURL), "API base URL (settle; default $PAGPOLAR_BASE_URL or production)")
	retention := fs.Duration("retention", keystore.DefaultRetention, "keep settled records this long (reap)")
	batch := fs.Int("batch", 500, "records deleted per batch (reap)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *storeURL == "" {
		fmt.Fprintln(stderr, "pagpolar ops: -store is required (sqlite:PATH, postgres://..., redis://...)")
		return 2
	}
	store, closeStore, err := storeurl.Open(ctx, *storeURL)
	if err != nil {
		fmt.Fprintf(stderr, "pagpolar ops: %v\n", err)
		return 1
	}
	defer func() { _ = closeStore() }()
	out := &opsOutput{w: stdout, json: *asJSON}

	switch sub {
	case "list":
		f := keystore.Filter{Prefix: *prefix, Limit: *limit}
		for _, s := range splitList(*states) {
			st := keystore.State(s)
			if !st.Valid() {
				fmt.Fprintf(stderr, "pagpolar ops list: unknown state %q (want pending, unknown, succeeded, failed, not_executed)\n", s)
				return 2
			}
			f.States = append(f.States, st)
		}
		if *olderThan > 0 {
			f.UpdatedBefore = time.Now().Add(-*olderThan)
		}
		recs, err := store.List(ctx, f)
		if err != nil {
			fmt.Fprintf(stderr, "pagpolar ops list: %v\n", err)
			return 1
		}
		return out.records(recs)
	case "show":
		if fs.NArg() != 1 {
			fmt.Fprintln(stderr, "pagpolar ops show: want one operation ID (as listed: <credential>/<operation>)")
			return 2
		}
		rec, err := store.Get(ctx, fs.Arg(0))
		if err != nil {
			fmt.Fprintf(stderr, "pagpolar ops show: %v\n", err)
			if errors.Is(err, keystore.ErrNotFound) {
				return 3
			}
			return 1
		}
		return out.record(rec)
	case "settle":
		if *cred == "" {
			fmt.Fprintln(stderr, "pagpolar ops settle: -credential is required (the stable credential ID the operations were recorded under)")
			return 2
		}
		token := os.Getenv("PAGPOLAR_TOKEN")
		if token == "" {
			fmt.Fprintln(stderr, "pagpolar ops settle: set $PAGPOLAR_TOKEN (never passed as a flag: flags show in ps)")
			return 2
		}
		c, err := pagpolar.NewClient(*cred, pagpolar.StaticToken(token), pagpolar.WithBaseURL(*baseURL), pagpolar.WithStore(store))
		if err != nil {
			fmt.Fprintf(stderr, "pagpolar ops settle: %v\n", err)
			return 2
		}
		var results []pagpolar.ResumeResult
		switch {
		case *all && fs.NArg() == 0:
			results, err = c.ResumeAll(ctx)
		case !*all && fs.NArg() == 1:
			var r *pagpolar.ResumeResult
			r, err = c.Resume(ctx, strings.TrimPrefix(fs.Arg(0), *cred+"/"))
			if r != nil {
				results = append(results, *r)
			}
		default:
			fmt.Fprintln(stderr, "pagpolar ops settle: give one operation ID or -all")
			return 2
		}
		if err != nil {
			fmt.Fprintf(stderr, "pagpolar ops settle: %v\n", err)
			if len(results) == 0 {
				return 1
			}
		}
		return out.resumed(results)
	case "reap":
		n, err := keystore.Reap(ctx, store, *retention, *batch, time.Now())
		if err != nil {
			fmt.Fprintf(stderr, "pagpolar ops reap: removed %d, then: %v\n", n, err)
			return 1
		}
		if *asJSON {
			return out.encode(map[string]int{"removed": n})
		}
		fmt.Fprintf(stdout, "removed %d settled records older than %s\n", n, *retention)
		return 0
	}
	fmt.Fprintf(stderr, "pagpolar ops: unknown command %q\n\n%s\n", sub, opsUsage)
	return 2
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func splitList(s string) []string {
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

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
		return 1
	}
	return 0
}

func (o *opsOutput) records(recs []keystore.Record) int {
	if o.json {
		views := make([]opView, 0, len(recs))
		for _, r := range recs {
			views = append(views, view(r))
		}
		return o.encode(views)
	}
	tw := tabwriter.NewWriter(o.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "OPERATION\tKIND\tSTATE\tATTEMPTS\tAGE\tREF\tERROR")
	for _, r := range recs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.OperationID, r.Kind, r.State, r.Attempts,
			time.Since(r.UpdatedAt).Truncate(time.Second), r.ResultRef, truncate(r.Error, 60))
	}
	if err := tw.Flush(); err != nil {
		return 1
	}
	fmt.Fprintf(o.w, "%d operation(s)\n", len(recs))
	return 0
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
		return 1
	}
	return 0
}

func (o *opsOutput) resumed(rs []pagpolar.ResumeResult) int {
	unsettled := 0
	type row struct {
		OperationID string         `json:"operation_id"`
		State       keystore.State `json:"state"`
		Ref         string         `json:"ref,omitempty"`
		Attempts    int            `json:"attempts"`
		Note        string         `json:"note,omitempty"`
	}
	rows := make([]row, 0, len(rs))
	for _, r := range rs {
		note := ""
		if r.Err != nil {
			note = r.Err.Error()
		}
		if !r.State.Settled() {
			unsettled++
		}
		rows = append(rows, row{r.OperationID, r.State, r.Ref, r.Attempts, note})
	}
	if o.json {
		if o.encode(rows) != 0 {
			return 1
		}
	} else {
		tw := tabwriter.NewWriter(o.w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "OPERATION\tSTATE\tREF\tATTEMPTS\tNOTE")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", r.OperationID, r.State, r.Ref, r.Attempts, truncate(r.Note, 100))
		}
		_ = tw.Flush()
		fmt.Fprintf(o.w, "%d operation(s), %d still unsettled\n", len(rows), unsettled)
	}
	if unsettled > 0 {
		return 4 // distinguishable: "run again later"
	}
	return 0
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
