package main

// pagpolar ops settle: settling unfinished operations by lookup, and its dry run.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/apicheck"
	"github.com/pagpolar/pagpolar-go/keystore"
)

// settleTarget resolves settle's arguments to a credential and, unless
// -all, one operation ID of it.
func settleTarget(o *opsFlags, ids []string) (cred, opID string, err error) {
	switch {
	case o.all && len(ids) == 0:
		if o.cred == "" {
			return "", "", errors.New("-all needs -credential (the stable credential ID the operations were recorded under)")
		}
		return o.cred, "", nil
	case o.all || len(ids) != 1:
		return "", "", errors.New("give one operation ID or -all")
	}
	arg := ids[0]
	c, op, listed := pagpolar.SplitRecordID(arg)
	switch {
	case o.cred == "" && listed:
		return c, op, nil
	case o.cred == "":
		return "", "", fmt.Errorf("%q has no credential part: give -credential (or $PAGPOLAR_CREDENTIAL_ID), or the listed form <credential>/%s", arg, arg)
	case listed && c == o.cred:
		return c, op, nil
	}
	return o.cred, arg, nil // the operation alone (it may hold a "/")
}

func opsSettle(ctx context.Context, o *opsFlags, ids []string, out *opsOutput, stderr io.Writer) int {
	cred, opID, err := settleTarget(o, ids)
	if err != nil {
		fmt.Fprintf(stderr, "pagpolar ops settle: %v\n", err)
		return exitUsage
	}
	if o.dryRun {
		return settleDryRun(ctx, o, cred, opID, out, stderr)
	}
	token := os.Getenv("PAGPOLAR_TOKEN")
	if token == "" {
		fmt.Fprintln(stderr, "pagpolar ops settle: set $PAGPOLAR_TOKEN (never passed as a flag: flags show in ps); -dry-run needs none")
		return exitUsage
	}
	if o.baseURL == "" {
		fmt.Fprintln(stderr, "pagpolar ops settle: give -base-url or set $PAGPOLAR_BASE_URL (the API's base URL, ending in /v1; there is no default, so that settle never reaches production unless told to)")
		return exitUsage
	}
	if o.wait <= 0 && opID != "" {
		fmt.Fprintln(stderr, "pagpolar ops settle: -wait must be positive")
		return exitUsage
	}
	store, closeStore, err := opsStores.OpenWritable(ctx, o.store)
	if err != nil {
		return openFailed(stderr, "settle", err)
	}
	defer func() { _ = closeStore() }()
	if opID == "" {
		if code := credentialHasOperations(ctx, store, cred, stderr); code != exitOK {
			return code
		}
	}
	// One read of the API first: a wrong base URL, a refused credential or
	// an unreachable host is said as such, not as every lookup failing.
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = apicheck.Probe(pctx, apicheck.ProbeConfig{BaseURL: o.baseURL, Token: pagpolar.StaticToken(token)})
	cancel()
	if err != nil {
		fmt.Fprintf(stderr, "pagpolar ops settle: %s; nothing was looked up or changed\n", strings.TrimPrefix(err.Error(), "apicheck: "))
		return exitFailed
	}
	c, err := pagpolar.NewClient(cred, pagpolar.StaticToken(token), pagpolar.WithBaseURL(o.baseURL), pagpolar.WithStore(store))
	if err != nil {
		fmt.Fprintf(stderr, "pagpolar ops settle: %v\n", err)
		return exitUsage
	}
	var results []pagpolar.ResumeResult
	if opID == "" {
		results, err = c.ResumeAll(ctx)
	} else {
		fmt.Fprintf(stderr, "pagpolar ops settle: looking %s up, for up to %s\n", pagpolar.RecordID(cred, opID), o.wait)
		// Resume polls until a lookup is conclusive; when wctx ends first
		// it reports the operation unknown, with the time it will be.
		wctx, cancel := context.WithTimeout(ctx, o.wait)
		var r *pagpolar.ResumeResult
		r, err = c.Resume(wctx, opID)
		cancel()
		if r != nil {
			results = append(results, *r)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "pagpolar ops settle: %v\n", err)
		switch {
		case errors.Is(err, pagpolar.ErrNotFound):
			fmt.Fprintf(stderr, "pagpolar ops settle: no operation %s in the store\n", pagpolar.RecordID(cred, opID))
			return exitNoSuchOp
		case len(results) == 0:
			return exitFailed
		}
	}
	return out.resumed(cred, results)
}

// settleDryRun says what settle would do with each operation, reading the
// store only.
func settleDryRun(ctx context.Context, o *opsFlags, cred, opID string, out *opsOutput, stderr io.Writer) int {
	store, closeStore, err := opsStores.OpenReadOnly(ctx, o.store, warnOnce(stderr, "ops"))
	if err != nil {
		return openFailed(stderr, "settle", err)
	}
	defer func() { _ = closeStore() }()
	var recs []keystore.Record
	if opID != "" {
		found := false
		for _, id := range recordIDCandidates(opID, cred) {
			rec, err := store.Get(ctx, id)
			if err == nil {
				recs, found = append(recs, rec), true
				break
			}
			if !errors.Is(err, keystore.ErrNotFound) {
				fmt.Fprintf(stderr, "pagpolar ops settle: %v\n", err)
				return exitFailed
			}
		}
		if !found {
			fmt.Fprintf(stderr, "pagpolar ops settle: no operation %s in the store\n", pagpolar.RecordID(cred, opID))
			return exitNoSuchOp
		}
	} else {
		if code := credentialHasOperations(ctx, store, cred, stderr); code != exitOK {
			return code
		}
		recs, err = store.List(ctx, keystore.Filter{States: []keystore.State{keystore.StatePending, keystore.StateUnknown},
			Prefix: pagpolar.RecordID(cred, ""), Limit: math.MaxInt32})
		if err != nil {
			fmt.Fprintf(stderr, "pagpolar ops settle: %v\n", err)
			return exitFailed
		}
	}
	return out.wouldSettle(recs, time.Now())
}

// credentialHasOperations checks that the store holds some operation
// (in any state) of cred, so that a mistyped -credential is said, with the
// credentials the store does hold, instead of "0 operation(s)".
func credentialHasOperations(ctx context.Context, store recordReader, cred string, stderr io.Writer) int {
	recs, err := store.List(ctx, keystore.Filter{Prefix: pagpolar.RecordID(cred, ""), Limit: 1})
	if err != nil {
		fmt.Fprintf(stderr, "pagpolar ops settle: %v\n", err)
		return exitFailed
	}
	if len(recs) > 0 {
		return exitOK
	}
	// The credentials of up to 1000 records, as a hint.
	some, err := store.List(ctx, keystore.Filter{Limit: 1000})
	seen := map[string]bool{}
	var creds []string
	for _, r := range some {
		if c, _, ok := pagpolar.SplitRecordID(r.OperationID); ok && !seen[c] {
			seen[c] = true
			creds = append(creds, fmt.Sprintf("%q", c))
		}
	}
	hint := "the store holds no operation at all"
	switch {
	case err != nil:
		hint = "the store's credentials could not be listed: " + err.Error()
	case len(creds) > 0:
		slices.Sort(creds)
		hint = "it holds operations of " + strings.Join(creds, ", ")
	}
	fmt.Fprintf(stderr, "pagpolar ops settle: no operation of credential %q in the store (%s): check -credential or $PAGPOLAR_CREDENTIAL_ID\n", cred, hint)
	return exitNoSuchOp
}
