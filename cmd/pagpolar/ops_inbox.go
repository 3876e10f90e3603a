package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pagpolar/pagpolar-go/webhook"
	"github.com/pagpolar/pagpolar-go/webhook/redisinbox"
	"github.com/pagpolar/pagpolar-go/webhook/sqlinbox"
)

const inboxUsage = `usage: pagpolar ops inbox <command> -store URL [flags]

The operator's view of a webhook inbox (sqlite:PATH, postgres://..., redis://...).

commands:
  list   list events by state and age    [-state dead,error] [-older-than 1h] [-limit 100]
  show   show one event                  KEY [-payload: also print the stored body]
  retry  make a dead or error event due again now   KEY`

// openInbox opens a webhook inbox store from a URL, migrating SQL schemas.
func openInbox(ctx context.Context, raw string) (webhook.Store, func() error, error) {
	switch {
	case strings.HasPrefix(raw, "sqlite:"):
		s, err := sqlinbox.OpenSQLite(strings.TrimPrefix(strings.TrimPrefix(raw, "sqlite:"), "//"))
		if err != nil {
			return nil, nil, err
		}
		if err := s.Migrate(ctx); err != nil {
			_ = s.Close()
			return nil, nil, err
		}
		return s, s.Close, nil
	case strings.HasPrefix(raw, "postgres://"), strings.HasPrefix(raw, "postgresql://"):
		s, err := sqlinbox.OpenPostgres(raw)
		if err != nil {
			return nil, nil, err
		}
		if err := s.Migrate(ctx); err != nil {
			_ = s.Close()
			return nil, nil, err
		}
		return s, s.Close, nil
	case strings.HasPrefix(raw, "redis://"), strings.HasPrefix(raw, "rediss://"):
		s, err := redisinbox.NewFromURL(raw)
		if err != nil {
			return nil, nil, err
		}
		return s, s.Close, nil
	}
	return nil, nil, fmt.Errorf("unsupported inbox store URL %q (want sqlite:PATH, postgres:// or redis://)", redactURL(raw))
}

func runInbox(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(stderr, inboxUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("ops inbox "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	storeURL := fs.String("store", os.Getenv("PAGPOLAR_INBOX_STORE"), "inbox store URL (default $PAGPOLAR_INBOX_STORE)")
	asJSON := fs.Bool("json", false, "machine-readable output")
	states := fs.String("state", "", "comma-separated states: received, processing, processed, error, dead (list)")
	olderThan := fs.Duration("older-than", 0, "only events not updated for this long (list)")
	limit := fs.Int("limit", 100, "maximum events (list)")
	payload := fs.Bool("payload", false, "print the stored body too (show); it may hold customer data")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *storeURL == "" {
		fmt.Fprintln(stderr, "pagpolar ops inbox: -store is required")
		return 2
	}
	store, closeStore, err := openInbox(ctx, *storeURL)
	if err != nil {
		fmt.Fprintf(stderr, "pagpolar ops inbox: %v\n", err)
		return 1
	}
	defer func() { _ = closeStore() }()
	out := &opsOutput{w: stdout, json: *asJSON}

	switch sub {
	case "list":
		f := webhook.Filter{Limit: *limit}
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
		if out.json {
			views := make([]eventView, 0, len(recs))
			for _, r := range recs {
				views = append(views, eventViewOf(r, false))
			}
			return out.encode(views)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY\tEVENT\tSTATE\tATTEMPTS\tDELIVERIES\tAGE\tLAST ERROR")
		for _, r := range recs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", r.Key, r.Event, r.State, r.Attempts, r.Deliveries,
				time.Since(r.UpdatedAt).Truncate(time.Second), truncate(r.LastError, 60))
		}
		_ = tw.Flush()
		fmt.Fprintf(stdout, "%d event(s)\n", len(recs))
		return 0
	case "show", "retry":
		if fs.NArg() != 1 {
			fmt.Fprintf(stderr, "pagpolar ops inbox %s: want one event key (as listed)\n", sub)
			return 2
		}
		var rec webhook.Record
		if sub == "show" {
			rec, err = store.Get(ctx, fs.Arg(0))
		} else {
			rec, err = store.Retry(ctx, fs.Arg(0), time.Now())
		}
		if err != nil {
			fmt.Fprintf(stderr, "pagpolar ops inbox %s: %v\n", sub, err)
			if errors.Is(err, webhook.ErrNotFound) {
				return 3
			}
			return 1
		}
		v := eventViewOf(rec, *payload && sub == "show")
		if out.json {
			return out.encode(v)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "key\t%s\nevent\t%s\nentity\t%s\nstate\t%s\nattempts\t%d\ndeliveries\t%d\nlast error\t%s\nnext attempt\t%s\nreceived\t%s\nupdated\t%s\n",
			v.Key, v.Event, v.Entity, v.State, v.Attempts, v.Deliveries, v.LastError, v.NextAttemptAt, v.ReceivedAt.Format(time.RFC3339), v.UpdatedAt.Format(time.RFC3339))
		if v.Payload != "" {
			fmt.Fprintf(tw, "payload\t%s\n", v.Payload)
		}
		_ = tw.Flush()
		return 0
	}
	fmt.Fprintf(stderr, "pagpolar ops inbox: unknown command %q\n\n%s\n", sub, inboxUsage)
	return 2
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
	Payload       string        `json:"payload,omitempty"`
}

func eventViewOf(r webhook.Record, withPayload bool) eventView {
	v := eventView{Key: r.Key, Event: r.Event, Entity: r.Entity, State: r.State, Attempts: r.Attempts, Deliveries: r.Deliveries,
		LastError: r.LastError, ReceivedAt: r.ReceivedAt, UpdatedAt: r.UpdatedAt}
	if !r.NextAttemptAt.IsZero() && (r.State == webhook.StateReceived || r.State == webhook.StateError) {
		v.NextAttemptAt = r.NextAttemptAt.Format(time.RFC3339)
	}
	if withPayload {
		v.Payload = string(r.Payload)
	}
	return v
}
