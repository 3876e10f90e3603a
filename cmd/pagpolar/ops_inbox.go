package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pagpolar/pagpolar-go/webhook"
)

const inboxUsage = `usage: pagpolar ops inbox <command> [flags] [KEY]

The operator's view of a webhook inbox. The store is -store URL or
$PAGPOLAR_INBOX_STORE (the inbox is not the key store of $PAGPOLAR_STORE,
though both may live in one database), in the key store's URL forms:
sqlite:PATH, postgres://..., redis://..., redis+cluster://h1:p,h2:p/...,
with the same parameters: ?table= (SQL), ?prefix= (Redis), and the opt-outs
?volatile=1 (a Redis without an append-only file) and ?async_commit=1 (a
PostgreSQL session with synchronous_commit off), needed only by the commands
that write.

commands:
  list   list events by state and age    [-state dead,error] [-older-than 1h] [-limit 100]   (reads only)
  show   show one event                  KEY [-payload: also print the stored body]          (reads only)
  retry  make a dead or error event due again now   KEY
  reap   delete processed and dead events not changed for -retention, in batches
         [-retention 720h] [-batch 100] [-pause 10ms] [-dry-run: list what it would delete, up to -limit; reads only]

The read commands open the inbox read-only: they never create a file, a
table or a key, and an inbox that does not exist is an error (exit 2). A
Redis without an append-only file is read after one warning.

Stored bodies can hold customer data. When the receiver seals them (webhook.Config.PayloadKeys),
show -payload opens them only with the keys in $PAGPOLAR_WEBHOOK_PAYLOAD_KEYS (id:base64,...);
without them it says which key sealed the body. Everything else (key, event, sale or subscription,
state, attempts, deliveries, last error, times) is stored in clear and always shown.

Run "pagpolar ops inbox <command> -h" for a command's flags.

exit codes:
  0  done (a dry run: nothing changed)
  1  the store failed (unreachable, refused a write)
  2  bad usage, or the inbox does not exist (no file, no table, no key under the prefix)
  3  no such event`

// inboxCommands are the subcommands of pagpolar ops inbox.
var inboxCommands = []string{"list", "show", "retry", "reap"}

func runInbox(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, inboxUsage)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, inboxUsage)
		return exitOK
	}
	sub, args := args[0], args[1:]
	if !slices.Contains(inboxCommands, sub) {
		fmt.Fprintf(stderr, "pagpolar ops inbox: unknown command %q\n\n%s\n", sub, inboxUsage)
		return exitUsage
	}
	fs := flag.NewFlagSet("ops inbox "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	storeURL := fs.String("store", os.Getenv("PAGPOLAR_INBOX_STORE"), "inbox store URL: sqlite:PATH, postgres://..., redis://... (default $PAGPOLAR_INBOX_STORE)")
	asJSON := fs.Bool("json", false, "machine-readable output")
	states := fs.String("state", "", "comma-separated states: received, processing, processed, error, dead (list)")
	olderThan := fs.Duration("older-than", 0, "only events not updated for this long (list)")
	limit := fs.Int("limit", 100, "maximum events (list, reap -dry-run)")
	payload := fs.Bool("payload", false, "print the stored body too (show); it may hold customer data")
	retention := fs.Duration("retention", webhook.DefaultRetention, "keep processed and dead events this long after their last change (reap)")
	batch := fs.Int("batch", webhook.DefaultReapBatch, "events deleted per batch (reap)")
	pause := fs.Duration("pause", 10*time.Millisecond, "wait between batches, so live traffic goes first (reap)")
	dryRun := fs.Bool("dry-run", false, "list what reap would delete, up to -limit, and delete nothing (reap)")
	pos, err := parseInterleaved(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprintf(stdout, "usage: pagpolar ops inbox %s [flags]%s\n\nflags:\n", sub, map[string]string{"show": " KEY", "retry": " KEY"}[sub])
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fmt.Fprintln(stdout, "\nexit codes: 0 done; 1 store error; 2 bad usage or no such inbox; 3 no such event")
		return exitOK
	case err != nil:
		msg := err.Error()
		if strings.Contains(msg, "-allow-volatile") || strings.Contains(msg, "-allow-async-commit") {
			msg += " (the opt-outs are in the store URL, as for the key store: ?volatile=1, ?async_commit=1)"
		}
		fmt.Fprintf(stderr, "pagpolar ops inbox %s: %s\nRun \"pagpolar ops inbox %s -h\" for its flags.\n", sub, msg, sub)
		return exitUsage
	}
	if *storeURL == "" {
		fmt.Fprintf(stderr, "pagpolar ops inbox %s: -store is required (sqlite:PATH, postgres://..., redis://...; or set $PAGPOLAR_INBOX_STORE)\n", sub)
		return exitUsage
	}
	if (sub == "list" || sub == "reap") && len(pos) > 0 {
		fmt.Fprintf(stderr, "pagpolar ops inbox %s: unexpected argument %q (%s takes flags only)\n", sub, pos[0], sub)
		return exitUsage
	}
	if (sub == "show" || sub == "retry") && len(pos) != 1 {
		fmt.Fprintf(stderr, "pagpolar ops inbox %s: want one event key (as listed)\n", sub)
		return exitUsage
	}
	if *limit <= 0 {
		fmt.Fprintf(stderr, "pagpolar ops inbox %s: -limit must be positive\n", sub)
		return exitUsage
	}
	if sub == "reap" && *retention < webhook.MinRetention {
		fmt.Fprintf(stderr, "pagpolar ops inbox reap: -retention %v is shorter than the minimum %v\n", *retention, webhook.MinRetention)
		return exitUsage
	}
	if sub == "reap" && (*batch <= 0 || *pause < 0) {
		fmt.Fprintln(stderr, "pagpolar ops inbox reap: -batch must be positive and -pause not negative")
		return exitUsage
	}
	var keys []webhook.PayloadKey
	if sub == "show" && *payload {
		if env := os.Getenv("PAGPOLAR_WEBHOOK_PAYLOAD_KEYS"); env != "" {
			var err error
			if keys, err = webhook.ParsePayloadKeys(env); err != nil {
				fmt.Fprintf(stderr, "pagpolar ops inbox show: $PAGPOLAR_WEBHOOK_PAYLOAD_KEYS: %v\n", err)
				return 2
			}
		}
	}
	readOnly := sub == "list" || sub == "show" || (sub == "reap" && *dryRun)
	store, closeStore, err := openInbox(ctx, *storeURL, readOnly, warnOnce(stderr, "ops inbox "+sub))
	if err != nil {
		return openFailed(stderr, "inbox "+sub, err)
	}
	defer func() { _ = closeStore() }()
	out := &opsOutput{w: stdout, json: *asJSON}

	switch sub {
	case "list":
		f := webhook.Filter{Limit: *limit + 1} // one more than shown: are there more?
		for _, s := range splitList(*states) {
			st := webhook.State(s)
			if !st.Valid() {
				fmt.Fprintf(stderr, "pagpolar ops inbox list: unknown state %q\n", s)
				return 2
			}
			f.States = append(f.States, st)
		}
		if *olderThan > 0 {
			f.UpdatedBefore = time.Now().Add(-*olderThan)
		}
		recs, err := store.List(ctx, f)
		if err != nil {
			fmt.Fprintf(stderr, "pagpolar ops inbox list: %v\n", err)
			return 1
		}
		more := len(recs) > *limit
		if more {
			recs = recs[:*limit]
		}
		notice := ""
		if more {
			notice = fmt.Sprintf("showing %d of at least %d; -limit N", len(recs), len(recs)+1)
		}
		if out.json {
			views := make([]eventView, 0, len(recs))
			for _, r := range recs {
				views = append(views, eventViewOf(r, false, nil))
			}
			return out.encode(map[string]any{"events": views, "more": more, "notice": notice})
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY\tEVENT\tSTATE\tATTEMPTS\tDELIVERIES\tAGE\tLAST ERROR")
		for _, r := range recs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", r.Key, r.Event, r.State, r.Attempts, r.Deliveries,
				time.Since(r.UpdatedAt).Truncate(time.Second), truncate(r.LastError, 60))
		}
		_ = tw.Flush()
		if more {
			fmt.Fprintln(stdout, notice)
		} else {
			fmt.Fprintf(stdout, "%d event(s)\n", len(recs))
		}
		return 0
	case "show", "retry":
		var rec webhook.Record
		if sub == "show" {
			rec, err = store.Get(ctx, pos[0])
		} else {
			rec, err = store.Retry(ctx, pos[0])
		}
		if err != nil {
			fmt.Fprintf(stderr, "pagpolar ops inbox %s: %v\n", sub, err)
			if errors.Is(err, webhook.ErrNotFound) {
				return 3
			}
			return 1
		}
		v := eventViewOf(rec, *payload && sub == "show", keys)
		if out.json {
			return out.encode(v)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "key\t%s\nevent\t%s\nentity\t%s\nstate\t%s\nattempts\t%d\ndeliveries\t%d\nlast error\t%s\nnext attempt\t%s\nreceived\t%s\nupdated\t%s\n",
			v.Key, v.Event, v.Entity, v.State, v.Attempts, v.Deliveries, v.LastError, v.NextAttemptAt, v.ReceivedAt.Format(time.RFC3339), v.UpdatedAt.Format(time.RFC3339))
		if v.SealedWith != "" {
			fmt.Fprintf(tw, "payload sealed with\t%s\n", v.SealedWith)
		}
		if v.Payload != "" {
			fmt.Fprintf(tw, "payload\t%s\n", v.Payload)
		}
		_ = tw.Flush()
		return 0
	case "reap":
		return reapInbox(ctx, store, webhook.ReapOptions{Retention: *retention, Batch: *batch, Pause: *pause, Now: time.Now()}, *dryRun, *limit, out, stdout, stderr)
	}
	fmt.Fprintf(stderr, "pagpolar ops inbox: unknown command %q\n\n%s\n", sub, inboxUsage)
	return 2
}

// reapInbox deletes (or, dry, lists) processed and dead events past retention.
func reapInbox(ctx context.Context, store webhook.Store, o webhook.ReapOptions, dry bool, limit int, out *opsOutput, stdout, stderr io.Writer) int {
	cutoff := o.Cutoff()
	if dry {
		recs, err := webhook.ReapCandidates(ctx, store, o, limit)
		if err != nil {
			fmt.Fprintf(stderr, "pagpolar ops inbox reap: %v\n", err)
			return 1
		}
		if out.json {
			views := make([]eventView, 0, len(recs))
			for _, r := range recs {
				views = append(views, eventViewOf(r, false, nil))
			}
			return out.encode(map[string]any{"dry_run": true, "cutoff": cutoff, "would_delete": views, "limit_reached": len(recs) >= limit})
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY\tEVENT\tSTATE\tUPDATED")
		counts := map[webhook.State]int{}
		for _, r := range recs {
			counts[r.State]++
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Key, r.Event, r.State, r.UpdatedAt.Format(time.RFC3339))
		}
		_ = tw.Flush()
		more := ""
		if len(recs) >= limit {
			more = fmt.Sprintf(" (at least: the list stops at -limit %d)", limit)
		}
		fmt.Fprintf(stdout, "dry run: would delete %d event(s)%s: %d processed, %d dead, last changed before %s; nothing deleted\n",
			len(recs), more, counts[webhook.StateProcessed], counts[webhook.StateDead], cutoff.Format(time.RFC3339))
		return 0
	}
	n, err := webhook.Reap(ctx, store, o)
	if err != nil {
		fmt.Fprintf(stderr, "pagpolar ops inbox reap: removed %d, then: %v\n", n, err)
		return 1
	}
	if out.json {
		return out.encode(map[string]any{"removed": n, "cutoff": cutoff})
	}
	fmt.Fprintf(stdout, "removed %d processed or dead event(s) last changed before %s\n", n, cutoff.Format(time.RFC3339))
	return 0
}

type eventView struct {
	Key           string        `json:"key"`
	Event         string        `json:"event"`
	Entity        string        `json:"entity"`
	State         webhook.State `json:"state"`
	Attempts      int           `json:"attempts"`
	Deliveries    int           `json:"deliveries"`
	LastError     string        `json:"last_error,omitempty"`
	NextAttemptAt string        `json:"next_attempt_at,omitempty"`
	ReceivedAt    time.Time     `json:"received_at"`
	UpdatedAt     time.Time     `json:"updated_at"`
	SealedWith    string        `json:"payload_sealed_with,omitempty"`
	Payload       string        `json:"payload,omitempty"`
}

// eventViewOf is what an operator sees of r. The body is shown only when
// asked for; a sealed one only opened with keys, and otherwise named by the
// key that sealed it.
func eventViewOf(r webhook.Record, withPayload bool, keys []webhook.PayloadKey) eventView {
	v := eventView{Key: r.Key, Event: r.Event, Entity: r.Entity, State: r.State, Attempts: r.Attempts, Deliveries: r.Deliveries,
		LastError: r.LastError, ReceivedAt: r.ReceivedAt, UpdatedAt: r.UpdatedAt}
	if !r.NextAttemptAt.IsZero() && (r.State == webhook.StateReceived || r.State == webhook.StateError) {
		v.NextAttemptAt = r.NextAttemptAt.Format(time.RFC3339)
	}
	id, sealed := webhook.Sealed(r.Payload)
	if sealed {
		v.SealedWith = id
	}
	if !withPayload {
		return v
	}
	switch body, err := webhook.OpenPayload(r, keys...); {
	case err == nil:
		v.Payload = string(body)
	case errors.Is(err, webhook.ErrPayloadKeyMissing):
		v.Payload = fmt.Sprintf("(sealed with key %q: put it in $PAGPOLAR_WEBHOOK_PAYLOAD_KEYS to open it)", id)
	default:
		v.Payload = fmt.Sprintf("(cannot open: %v)", err)
	}
	return v
}
