package main

// pagpolar ops list and show: the read-only commands of the key store.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore"
)

func opsList(ctx context.Context, o *opsFlags, ids []string, out *opsOutput, stderr io.Writer) int {
	if len(ids) > 0 {
		fmt.Fprintf(stderr, "pagpolar ops list: unexpected argument %q (list takes flags only; show takes an ID)\n", ids[0])
		return exitUsage
	}
	if o.limit <= 0 && !o.all {
		fmt.Fprintln(stderr, "pagpolar ops list: -limit must be positive (or -all)")
		return exitUsage
	}
	f := keystore.Filter{Prefix: o.prefix}
	if o.cred != "" {
		p := pagpolar.RecordID(o.cred, "")
		switch {
		case o.prefix == "":
			f.Prefix = p
		case !strings.HasPrefix(o.prefix, p):
			fmt.Fprintf(stderr, "pagpolar ops list: -prefix %q is not under -credential %q (IDs start with %q)\n", o.prefix, o.cred, p)
			return exitUsage
		}
	}
	for _, s := range splitList(o.states) {
		st := keystore.State(s)
		if !st.Valid() {
			fmt.Fprintf(stderr, "pagpolar ops list: unknown state %q (want pending, unknown, succeeded, failed, not_executed)\n", s)
			return exitUsage
		}
		f.States = append(f.States, st)
	}
	if o.olderThan > 0 {
		f.UpdatedBefore = time.Now().Add(-o.olderThan)
	}
	// One more than shown, to know whether there are more.
	f.Limit = o.limit + 1
	if o.all {
		f.Limit = math.MaxInt32
	}
	store, closeStore, err := opsStores.OpenReadOnly(ctx, o.store, warnOnce(stderr, "ops"))
	if err != nil {
		return openFailed(stderr, "list", err)
	}
	defer func() { _ = closeStore() }()
	recs, err := store.List(ctx, f)
	if err != nil {
		fmt.Fprintf(stderr, "pagpolar ops list: %v\n", err)
		return exitFailed
	}
	more := !o.all && len(recs) > o.limit
	if more {
		recs = recs[:o.limit]
	}
	return out.records(recs, more, stderr)
}

// recordIDCandidates returns the store IDs arg may name, most likely
// first: arg as listed (<credential>/<operation>), and with cred the
// operation ID arg under that credential.
func recordIDCandidates(arg, cred string) []string {
	var out []string
	add := func(id string) {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	c, _, listed := pagpolar.SplitRecordID(arg)
	if listed && (cred == "" || c == cred) {
		add(arg)
	}
	if cred != "" {
		add(pagpolar.RecordID(cred, arg))
	}
	if listed {
		add(arg)
	}
	return out
}

func opsShow(ctx context.Context, o *opsFlags, ids []string, out *opsOutput, stderr io.Writer) int {
	if len(ids) != 1 {
		fmt.Fprintln(stderr, "pagpolar ops show: want one operation ID: <credential>/<operation> as listed, or the operation alone with -credential")
		return exitUsage
	}
	cands := recordIDCandidates(ids[0], o.cred)
	if len(cands) == 0 {
		fmt.Fprintf(stderr, "pagpolar ops show: %q has no credential part: give -credential (or $PAGPOLAR_CREDENTIAL_ID), or the listed form <credential>/%s\n", ids[0], ids[0])
		return exitUsage
	}
	store, closeStore, err := opsStores.OpenReadOnly(ctx, o.store, warnOnce(stderr, "ops"))
	if err != nil {
		return openFailed(stderr, "show", err)
	}
	defer func() { _ = closeStore() }()
	for _, id := range cands {
		rec, err := store.Get(ctx, id)
		switch {
		case err == nil:
			return out.record(rec)
		case !errors.Is(err, keystore.ErrNotFound):
			fmt.Fprintf(stderr, "pagpolar ops show: %v\n", err)
			return exitFailed
		}
	}
	hint := ""
	if o.cred == "" {
		hint = "; a bare operation ID needs -credential"
	}
	fmt.Fprintf(stderr, "pagpolar ops show: no operation %s in the store (looked for %s)%s; \"pagpolar ops list\" shows the IDs it holds\n",
		ids[0], strings.Join(quoteAll(cands), ", "), hint)
	return exitNoSuchOp
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}
