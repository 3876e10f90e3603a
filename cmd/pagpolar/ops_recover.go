package main

// pagpolar ops recover: after a key store lost records it had acknowledged
// (SAFETY rule 13), say what was lost and what survived, and end the
// store's refusal only when an operator accepts the loss, with what
// survived settled first.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore"
)

var recoverCommand = opsCommand{
	name: "recover", args: "",
	about: "After the key store lost records it had acknowledged (a Redis without persistence\n" +
		"restarted, a failover to a replica that lagged, a database restored from a backup),\n" +
		"the store refuses every new operation, so nothing whose record was lost is sent again\n" +
		"as if it were new. recover says where the loss was detected and which operations\n" +
		"survived unfinished. Settle those first (pagpolar ops settle -all), check by hand the\n" +
		"operations started in the 24 hours before the loss (their records may be among those\n" +
		"lost), then end the refusal with -accept NOTE. -accept refuses while surviving\n" +
		"operations are unsettled, unless -force.",
	flags: func(fs *flag.FlagSet, o *opsFlags) {
		storeFlag(fs, o)
		fs.StringVar(&o.accept, "accept", "", "accept the loss: who accepts it and why (kept with the acceptance)")
		fs.BoolVar(&o.force, "force", false, "with -accept: accept although some surviving operations are unsettled")
	},
	run: opsRecover,
}

// recoverView is what recover prints.
type recoverView struct {
	Parts       int                     `json:"parts"`
	Lost        []keystore.LostPart     `json:"lost"`
	Accepted    []keystore.AcceptedLoss `json:"accepted"`
	Unreachable []string                `json:"unreachable"`
	// Unfinished counts the surviving pending and unknown operations by
	// credential.
	Unfinished map[string]int `json:"unfinished"`
	// CheckFrom is the start of the window in which operations may have
	// lost their records: 24 h (the API's key window) before the earliest
	// detection.
	CheckFrom *time.Time `json:"check_from,omitempty"`
	// AcceptedNow says this run ended the refusal.
	AcceptedNow bool `json:"accepted_now"`
}

func opsRecover(ctx context.Context, o *opsFlags, ids []string, out *opsOutput, stderr io.Writer) int {
	switch {
	case len(ids) > 0:
		fmt.Fprintf(stderr, "pagpolar ops recover: unexpected argument %q (recover takes flags only)\n", ids[0])
		return exitUsage
	case o.force && o.accept == "":
		fmt.Fprintln(stderr, "pagpolar ops recover: -force goes with -accept NOTE")
		return exitUsage
	}
	// Without -accept, recover only reads: the store is opened read-only.
	var store recordReader
	var closeStore func() error
	var err error
	if o.accept == "" {
		store, closeStore, err = opsStores.OpenReadOnly(ctx, o.store, warnOnce(stderr, "ops recover"))
	} else {
		store, closeStore, err = opsStores.OpenWritable(ctx, o.store)
	}
	if err != nil {
		return openFailed(stderr, "recover", err)
	}
	defer func() { _ = closeStore() }()
	guard, ok := store.(keystore.AmnesiaGuard)
	if !ok {
		fmt.Fprintf(stderr, "pagpolar ops recover: this store (%T) cannot detect lost records (it does not implement keystore.AmnesiaGuard)\n", store)
		return exitUsage
	}
	rep, err := guard.Amnesia(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "pagpolar ops recover: %v\n", err)
		return exitFailed
	}
	v := recoverView{Parts: rep.Parts, Lost: rep.Lost, Accepted: rep.Accepted, Unreachable: rep.Unreachable, Unfinished: map[string]int{}}
	unfinished, err := store.List(ctx, keystore.Filter{States: []keystore.State{keystore.StatePending, keystore.StateUnknown}, Limit: math.MaxInt32})
	if err != nil {
		fmt.Fprintf(stderr, "pagpolar ops recover: listing the surviving unfinished operations: %v\n", err)
		return exitFailed
	}
	for _, r := range unfinished {
		cred, _, ok := pagpolar.SplitRecordID(r.OperationID)
		if !ok {
			cred = "(unparsed ID)"
		}
		v.Unfinished[cred]++
	}
	if rep.Detected() {
		first := rep.Lost[0].DetectedAt
		for _, l := range rep.Lost {
			if l.DetectedAt.Before(first) {
				first = l.DetectedAt
			}
		}
		from := first.Add(-24 * time.Hour).UTC()
		v.CheckFrom = &from
	}

	code := exitOK
	switch {
	case !rep.Detected():
		// Nothing to accept: -accept does nothing.
	case o.accept == "":
		code = exitUnsettled
	case len(unfinished) > 0 && !o.force:
		code = exitUnsettled
	default:
		if err := guard.AcceptLoss(ctx, o.accept); err != nil {
			fmt.Fprintf(stderr, "pagpolar ops recover: accepting the loss: %v\n", err)
			return exitFailed
		}
		after, err := guard.Amnesia(ctx)
		if err != nil {
			fmt.Fprintf(stderr, "pagpolar ops recover: the loss was accepted; reading the store again: %v\n", err)
			return exitFailed
		}
		v.Lost, v.Accepted, v.Unreachable, v.AcceptedNow = after.Lost, after.Accepted, after.Unreachable, true
		if after.Detected() {
			// Another loss was detected meanwhile.
			code = exitUnsettled
		}
	}
	if out.json {
		if c := out.encode(v); c != exitOK {
			return c
		}
		return code
	}
	printRecover(out.w, v, o, len(unfinished) > 0 && o.accept != "" && !o.force && rep.Detected())
	return code
}

func printRecover(w io.Writer, v recoverView, o *opsFlags, refused bool) {
	switch {
	case v.AcceptedNow && len(v.Lost) == 0:
		fmt.Fprintln(w, "loss accepted: the store takes new operations again.")
	case len(v.Lost) == 0:
		fmt.Fprintf(w, "no loss detected in the store's %d part(s): it takes new operations.\n", v.Parts)
	default:
		fmt.Fprintf(w, "LOSS DETECTED in %d of %d part(s): the store refuses every new operation (nothing is sent).\n", len(v.Lost), v.Parts)
		for _, l := range v.Lost {
			fmt.Fprintf(w, "  %-12s detected %s: %s\n", l.Part, l.DetectedAt.UTC().Format(time.RFC3339), l.Reason)
		}
	}
	if len(v.Unreachable) > 0 {
		fmt.Fprintf(w, "unreachable, state unknown: %v\n", v.Unreachable)
	}
	for _, a := range v.Accepted {
		fmt.Fprintf(w, "  last accepted in %s at %s: %s\n", a.Part, a.At.UTC().Format(time.RFC3339), a.Note)
	}
	creds := make([]string, 0, len(v.Unfinished))
	for c := range v.Unfinished {
		creds = append(creds, c)
	}
	slices.Sort(creds)
	if len(creds) > 0 {
		fmt.Fprintln(w, "surviving unfinished operations (pending or unknown), by credential:")
		for _, c := range creds {
			fmt.Fprintf(w, "  %-24s %d   settle: pagpolar ops settle -store ... -credential %s -all\n", c, v.Unfinished[c], c)
		}
	}
	if len(v.Lost) == 0 || v.AcceptedNow {
		return
	}
	fmt.Fprintf(w, "\nto recover:\n")
	fmt.Fprintf(w, "  1. settle the surviving unfinished operations (above), by lookup; settle never charges.\n")
	fmt.Fprintf(w, "  2. check by hand the operations your system started since %s: their records may be\n", v.CheckFrom.Format(time.RFC3339))
	fmt.Fprintf(w, "     among those lost, and one called again after the loss is accepted is sent as new (a\n")
	fmt.Fprintf(w, "     second charge where its first attempt's answer was lost). Look them up by reference.\n")
	fmt.Fprintf(w, "  3. pagpolar ops recover -store ... -accept \"who: why\"\n")
	if refused {
		fmt.Fprintf(w, "\nnot accepted: %d credential(s) still have unfinished operations; settle them, or pass -force.\n", len(creds))
	}
}
