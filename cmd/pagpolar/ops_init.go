package main

// pagpolar ops init: say whether the key store can prove its history
// (keystore.HistoryProver) and, with -declare NOTE, declare it new.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
)

var initCommand = opsCommand{
	name: "init", args: "",
	about: "Says whether the key store can prove that it holds every record it acknowledged.\n" +
		"A store whose markers were just written (a new database or prefix, or one that was\n" +
		"emptied and opened again: a Redis restarted without persistence, a SQLite file deleted)\n" +
		"cannot, for 25 hours: until then the SDK looks every operation's effect up before its\n" +
		"first send (one lookup each). -declare NOTE states that no operation was ever sent with\n" +
		"records in this store that it does not hold now (a new deployment or credential), and\n" +
		"ends the lookups. Refused while the store reports a detected loss (ops recover first).",
	flags: func(fs *flag.FlagSet, o *opsFlags) {
		storeFlag(fs, o)
		fs.StringVar(&o.declare, "declare", "", "declare the store new: who declares it and why (kept in the store)")
	},
	run: opsInit,
}

// initView is what init prints.
type initView struct {
	Proven        bool       `json:"proven"`
	UnprovenSince *time.Time `json:"unproven_since,omitempty"`
	ProvenAt      *time.Time `json:"proven_at,omitempty"`
	Reason        string     `json:"reason,omitempty"`
	Declared      string     `json:"declared,omitempty"`
	DeclaredNow   bool       `json:"declared_now"`
}

func opsInit(ctx context.Context, o *opsFlags, ids []string, out *opsOutput, stderr io.Writer) int {
	if len(ids) > 0 {
		fmt.Fprintf(stderr, "pagpolar ops init: unexpected argument %q (init takes flags only)\n", ids[0])
		return exitUsage
	}
	store, closeStore, err := opsStores.OpenWritable(ctx, o.store)
	if err != nil {
		return openFailed(stderr, "init", err)
	}
	defer func() { _ = closeStore() }()
	hp, ok := store.(keystore.HistoryProver)
	if !ok {
		fmt.Fprintf(stderr, "pagpolar ops init: this store (%T) cannot say whether it holds its whole history (it does not implement keystore.HistoryProver)\n", store)
		return exitUsage
	}
	declared := false
	if o.declare != "" {
		if g, ok := store.(keystore.AmnesiaGuard); ok {
			rep, err := g.Amnesia(ctx)
			if err != nil {
				fmt.Fprintf(stderr, "pagpolar ops init: %v\n", err)
				return exitFailed
			}
			if rep.Detected() {
				fmt.Fprintln(stderr, "pagpolar ops init: the store reports a detected loss: run pagpolar ops recover (settle, then accept the loss) before declaring it new")
				return exitUnsettled
			}
		}
		if err := hp.DeclareNew(ctx, o.declare); err != nil {
			fmt.Fprintf(stderr, "pagpolar ops init: %v\n", err)
			return exitFailed
		}
		declared = true
	}
	h, err := hp.History(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "pagpolar ops init: %v\n", err)
		return exitFailed
	}
	v := initView{Proven: h.Proven(), Reason: h.Reason, Declared: h.Declared, DeclaredNow: declared}
	if !h.Proven() {
		since, at := h.UnprovenSince.UTC(), h.ProvenAt.UTC()
		v.UnprovenSince, v.ProvenAt = &since, &at
	}
	code := exitOK
	if !h.Proven() {
		code = exitUnsettled
	}
	if out.json {
		if c := out.encode(v); c != exitOK {
			return c
		}
		return code
	}
	switch {
	case h.Proven() && h.Declared != "":
		fmt.Fprintf(out.w, "history proven: declared new (%s). First sends go out without a lookup.\n", h.Declared)
	case h.Proven():
		fmt.Fprintln(out.w, "history proven: the store has existed unbroken for longer than the API's key memory. First sends go out without a lookup.")
	default:
		fmt.Fprintf(out.w, "HISTORY UNPROVEN since %s (%s).\nEvery operation's first send is looked up first until %s, or until the store is declared new (-declare NOTE).\n",
			v.UnprovenSince.Format(time.RFC3339), h.Reason, v.ProvenAt.Format(time.RFC3339))
	}
	return code
}
