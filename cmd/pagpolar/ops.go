package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore"
)

const opsUsage = `usage: pagpolar ops <command> [flags] [ID]

The operator's view of a key store: what the SDK recorded for each operation
(its Idempotency-Key, state, attempts, and the sale, refund or subscription
it found). Records never hold a token, card data or a personal document.

commands:
  list    list operations by state and age                    (reads only)
  show    show one operation                                  (reads only)
  settle  settle unfinished operations by lookup, never charging
  reap    delete settled records past their retention
  recover after the store lost records: what was lost, what survived, -accept
  inbox   the webhook inbox: list, show, retry, reap          (pagpolar ops inbox -h)

Run "pagpolar ops <command> -h" for a command's flags. Flags may come before
or after the ID.

The store is -store URL or $PAGPOLAR_STORE: sqlite:PATH, postgres://...,
redis://... list and show open it read-only: they never create a file, a
table or a key, and a store that does not exist is an error. settle and reap
write to it; -dry-run says what they would change, and changes nothing.

Operation IDs: the store names each operation <credential>/<operation>, e.g.
cred_123/pix:PEDIDO-1234 (a credential holding "/" or "%" is escaped:
acme%2Feu/pix:PEDIDO-1234). list, show and settle print that form; show and
settle also take the operation alone (pix:PEDIDO-1234) with -credential or
$PAGPOLAR_CREDENTIAL_ID.

exit codes:
  0  done (a dry run: nothing changed)
  1  the store or the API failed (unreachable, refused a write)
  2  bad usage, or the store does not exist or holds no PagPolar records
  3  no such operation
  4  settle: some operations are still unsettled; run settle again after the
     time in their CONCLUSIVE AFTER column. recover: the store detected a loss
     and still refuses new operations`

// Exit codes of pagpolar ops (documented in opsUsage).
const (
	exitOK         = 0
	exitFailed     = 1
	exitUsage      = 2
	exitNoSuchOp   = 3
	exitUnsettled  = 4
	defaultListMax = 100
)

// recordReader is what the read-only commands need of a key store.
type recordReader interface {
	Get(ctx context.Context, operationID string) (keystore.Record, error)
	List(ctx context.Context, f keystore.Filter) ([]keystore.Record, error)
}

// storeOpener is how pagpolar ops reaches key stores; tests replace it.
//
// OpenReadOnly opens the store rawURL names for list, show and the dry
// runs. It never writes: it creates no file, table, index or key, runs no
// migration and writes no metadata, so it works under a read-only database
// role. A store that does not exist, or exists without PagPolar's records
// (no table, no key under the prefix), is an error wrapping errNoStore;
// one that cannot be reached wraps keystore.ErrUnavailable.
//
// OpenWritable opens it for settle and reap, which change records. It too
// refuses a store that does not exist (errNoStore) rather than create one:
// a typo in the URL must not start an empty store.
type storeOpener interface {
	OpenReadOnly(ctx context.Context, rawURL string) (recordReader, func() error, error)
	OpenWritable(ctx context.Context, rawURL string) (keystore.Store, func() error, error)
}

// errNoStore is matched (errors.Is) by the errors of a store URL that
// names no existing PagPolar key store.
var errNoStore = errors.New("no PagPolar key store there")

// noStoreError says why a URL names no key store; it matches errNoStore.
type noStoreError string

func (e noStoreError) Error() string        { return string(e) }
func (e noStoreError) Is(target error) bool { return target == errNoStore }

func noStore(format string, args ...any) error { return noStoreError(fmt.Sprintf(format, args...)) }

// opsStores is the storeOpener pagpolar ops uses.
var opsStores storeOpener = interimOpener{}

// opsFlags holds every flag of every ops command; each command defines
// only its own (opsCommand.flags).
type opsFlags struct {
	store     string
	declare   string // ops init -declare
	json      bool
	states    string
	olderThan time.Duration
	prefix    string
	limit     int
	all       bool
	cred      string
	baseURL   string
	dryRun    bool
	wait      time.Duration
	retention time.Duration
	batch     int
	yield     float64
	minPause  time.Duration
	maxPause  time.Duration
	accept    string
	force     bool
}

// opsCommand is one subcommand of pagpolar ops.
type opsCommand struct {
	name  string
	args  string // after the flags in the usage line
	about string
	flags func(fs *flag.FlagSet, o *opsFlags)
	run   func(ctx context.Context, o *opsFlags, ids []string, out *opsOutput, stderr io.Writer) int
}

func storeFlag(fs *flag.FlagSet, o *opsFlags) {
	fs.StringVar(&o.store, "store", os.Getenv("PAGPOLAR_STORE"), "key store URL: sqlite:PATH, postgres://..., redis://... (default $PAGPOLAR_STORE)")
	fs.BoolVar(&o.json, "json", false, "machine-readable output")
}

func credFlag(fs *flag.FlagSet, o *opsFlags, usage string) {
	fs.StringVar(&o.cred, "credential", os.Getenv("PAGPOLAR_CREDENTIAL_ID"), usage+" (default $PAGPOLAR_CREDENTIAL_ID)")
}

var opsCommands = []opsCommand{
	{
		name: "list", args: "",
		about: "Lists operations, oldest change first, and says when there are more than it shows.",
		flags: func(fs *flag.FlagSet, o *opsFlags) {
			storeFlag(fs, o)
			fs.StringVar(&o.states, "state", "", "comma-separated states: pending, unknown, succeeded, failed, not_executed (default: all)")
			fs.DurationVar(&o.olderThan, "older-than", 0, "only operations not changed for this long, e.g. 10m")
			fs.StringVar(&o.prefix, "prefix", "", "only IDs starting with this, e.g. cred_123/pix:")
			// No default from the environment: a list must not be
			// filtered without being asked to.
			fs.StringVar(&o.cred, "credential", "", "only this credential's operations")
			fs.IntVar(&o.limit, "limit", defaultListMax, "show at most this many")
			fs.BoolVar(&o.all, "all", false, "show every matching operation (no -limit)")
		},
		run: opsList,
	},
	{
		name: "show", args: "ID",
		about: "Shows one operation: its key, state, attempts, times, and what was found.\nID is <credential>/<operation> as listed, or the operation alone with -credential.",
		flags: func(fs *flag.FlagSet, o *opsFlags) {
			storeFlag(fs, o)
			credFlag(fs, o, "the credential of a bare operation ID")
		},
		run: opsShow,
	},
	{
		name: "settle", args: "ID | -all",
		about: "Settles unfinished operations by looking their effect up (Client.Resume, ResumeAll).\n" +
			"It never sends a money request: an operation proven absent is recorded not_executed,\n" +
			"and sending it again is the caller's decision. The token comes from $PAGPOLAR_TOKEN\n" +
			"(never a flag: flags show in ps). -dry-run needs no token and changes nothing.\n" +
			"With one ID, settle polls for up to -wait until a lookup is conclusive; -all does not\n" +
			"wait. Either way an operation still unsettled is printed with the time after which a\n" +
			"lookup is conclusive (CONCLUSIVE AFTER), and the exit code is 4.",
		flags: func(fs *flag.FlagSet, o *opsFlags) {
			storeFlag(fs, o)
			credFlag(fs, o, "the stable credential ID the operations were recorded under")
			fs.StringVar(&o.baseURL, "base-url", envOr("PAGPOLAR_BASE_URL", pagpolar.DefaultBaseURL), "API base URL (default $PAGPOLAR_BASE_URL or production)")
			fs.BoolVar(&o.all, "all", false, "every unfinished operation of the credential")
			fs.BoolVar(&o.dryRun, "dry-run", false, "say what settle would look up and record; change nothing")
			fs.DurationVar(&o.wait, "wait", 10*time.Second, "with one ID: how long to poll for a conclusive lookup")
		},
		run: opsSettle,
	},
	{
		name: "reap", args: "",
		about: "Deletes succeeded and failed records not changed for -retention, in batches.\n" +
			"Unfinished (pending, unknown) and not_executed records are never deleted.",
		flags: func(fs *flag.FlagSet, o *opsFlags) {
			storeFlag(fs, o)
			fs.DurationVar(&o.retention, "retention", keystore.DefaultRetention, "keep settled records this long (at least "+keystore.MinRetention.String()+")")
			fs.IntVar(&o.batch, "batch", keystore.DefaultReapBatch, "records deleted per batch (one short transaction each)")
			fs.Float64Var(&o.yield, "yield", keystore.DefaultReapYield, "after each batch, pause this many times as long as the batch took, so live writes keep the store (negative: no pause)")
			fs.DurationVar(&o.minPause, "min-pause", keystore.DefaultReapMinPause, "shortest pause between batches")
			fs.DurationVar(&o.maxPause, "max-pause", keystore.DefaultReapMaxPause, "longest pause between batches")
			fs.BoolVar(&o.dryRun, "dry-run", false, "list what reap would delete, up to -limit; delete nothing")
			fs.IntVar(&o.limit, "limit", defaultListMax, "records listed by -dry-run")
		},
		run: opsReap,
	},
	recoverCommand,
	initCommand,
}

func findOpsCommand(name string) *opsCommand {
	for i := range opsCommands {
		if opsCommands[i].name == name {
			return &opsCommands[i]
		}
	}
	return nil
}

// newOpsFlagSet returns cmd's flag set, writing nothing itself: errors
// and help are printed by runOps.
func (cmd *opsCommand) newFlagSet(o *opsFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("ops "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	cmd.flags(fs, o)
	return fs
}

// printHelp writes cmd's usage and its own flags.
func (cmd *opsCommand) printHelp(w io.Writer) {
	fs := cmd.newFlagSet(&opsFlags{})
	usage := "usage: pagpolar ops " + cmd.name + " [flags]"
	if cmd.args != "" {
		usage += " " + cmd.args
	}
	fmt.Fprintf(w, "%s\n\n%s\n\nflags:\n", usage, cmd.about)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprintln(w, "\nexit codes: 0 done; 1 store or API error; 2 bad usage or no such store; 3 no such operation; 4 (settle) still unsettled, (recover) loss not accepted")
}

// runOps is the `pagpolar ops` command.
func runOps(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, opsUsage)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		fmt.Fprintln(stdout, opsUsage)
		return exitOK
	case "help":
		if len(args) == 1 {
			fmt.Fprintln(stdout, opsUsage)
			return exitOK
		}
		if args[1] == "inbox" {
			return runInbox(ctx, []string{"-h"}, stdout, stderr)
		}
		if cmd := findOpsCommand(args[1]); cmd != nil {
			cmd.printHelp(stdout)
			return exitOK
		}
		fmt.Fprintf(stderr, "pagpolar ops help: no command %q\n\n%s\n", args[1], opsUsage)
		return exitUsage
	case "inbox":
		return runInbox(ctx, args[1:], stdout, stderr)
	}
	cmd := findOpsCommand(args[0])
	if cmd == nil {
		fmt.Fprintf(stderr, "pagpolar ops: unknown command %q\n\n%s\n", args[0], opsUsage)
		return exitUsage
	}
	var o opsFlags
	ids, err := parseInterleaved(cmd.newFlagSet(&o), args[1:])
	switch {
	case errors.Is(err, flag.ErrHelp):
		cmd.printHelp(stdout)
		return exitOK
	case err != nil:
		fmt.Fprintf(stderr, "pagpolar ops %s: %s\nRun \"pagpolar ops %s -h\" for its flags.\n", cmd.name, explainFlagError(cmd.name, err), cmd.name)
		return exitUsage
	}
	if o.store == "" {
		fmt.Fprintf(stderr, "pagpolar ops %s: -store is required (sqlite:PATH, postgres://..., redis://...; or set $PAGPOLAR_STORE)\n", cmd.name)
		return exitUsage
	}
	return cmd.run(ctx, &o, ids, &opsOutput{w: stdout, json: o.json}, stderr)
}

// parseInterleaved parses args with fs, accepting flags before and after
// the positional arguments, which it returns in order. Everything after a
// "--" is positional.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" && !flagWantsValue(fs, args, used-1) {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// flagWantsValue reports whether args[i] is the value of the flag before
// it (e.g. "-prefix --"), not a "--" terminator.
func flagWantsValue(fs *flag.FlagSet, args []string, i int) bool {
	if i == 0 {
		return false
	}
	name := strings.TrimLeft(args[i-1], "-")
	if name == "" || strings.Contains(name, "=") || !strings.HasPrefix(args[i-1], "-") {
		return false
	}
	f := fs.Lookup(name)
	if f == nil {
		return false
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return !ok || !b.IsBoolFlag()
}

// explainFlagError turns the flag package's "flag provided but not
// defined: -x" into a message saying which commands have that flag.
func explainFlagError(cmd string, err error) string {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok {
		return err.Error()
	}
	var owners []string
	for i := range opsCommands {
		if opsCommands[i].newFlagSet(&opsFlags{}).Lookup(name) != nil {
			owners = append(owners, opsCommands[i].name)
		}
	}
	if len(owners) == 0 {
		return fmt.Sprintf("-%s is not a flag of ops %s", name, cmd)
	}
	return fmt.Sprintf("-%s is not a flag of ops %s (it is one of: %s)", name, cmd, strings.Join(owners, ", "))
}

// openFailed prints why a store could not be opened and returns the exit
// code: 2 when there is no such store (or the URL is wrong), 1 otherwise.
func openFailed(stderr io.Writer, cmd string, err error) int {
	fmt.Fprintf(stderr, "pagpolar ops %s: %v\n", cmd, err)
	if errors.Is(err, errNoStore) || errors.Is(err, errBadStoreURL) {
		return exitUsage
	}
	return exitFailed
}

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
	store, closeStore, err := opsStores.OpenReadOnly(ctx, o.store)
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
// operation ID arg under that credential (also as an earlier version
// wrote it, unescaped).
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
		add(cred + "/" + arg) // legacy: the credential unescaped
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
	store, closeStore, err := opsStores.OpenReadOnly(ctx, o.store)
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
	store, closeStore, err := opsStores.OpenWritable(ctx, o.store)
	if err != nil {
		return openFailed(stderr, "settle", err)
	}
	defer func() { _ = closeStore() }()
	c, err := pagpolar.NewClient(cred, pagpolar.StaticToken(token), pagpolar.WithBaseURL(o.baseURL), pagpolar.WithStore(store))
	if err != nil {
		fmt.Fprintf(stderr, "pagpolar ops settle: %v\n", err)
		return exitUsage
	}
	var results []pagpolar.ResumeResult
	if opID == "" {
		results, err = c.ResumeAll(ctx)
	} else {
		if o.wait <= 0 {
			fmt.Fprintln(stderr, "pagpolar ops settle: -wait must be positive")
			return exitUsage
		}
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
	store, closeStore, err := opsStores.OpenReadOnly(ctx, o.store)
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
		recs, err = store.List(ctx, keystore.Filter{States: []keystore.State{keystore.StatePending, keystore.StateUnknown},
			Prefix: pagpolar.RecordID(cred, ""), Limit: math.MaxInt32})
		if err != nil {
			fmt.Fprintf(stderr, "pagpolar ops settle: %v\n", err)
			return exitFailed
		}
	}
	return out.wouldSettle(recs, time.Now())
}

func opsReap(ctx context.Context, o *opsFlags, ids []string, out *opsOutput, stderr io.Writer) int {
	switch {
	case len(ids) > 0:
		fmt.Fprintf(stderr, "pagpolar ops reap: unexpected argument %q (reap takes flags only)\n", ids[0])
		return exitUsage
	case o.retention < keystore.MinRetention:
		fmt.Fprintf(stderr, "pagpolar ops reap: -retention %v is shorter than the minimum %v: a late retry of a reaped operation is sent again\n", o.retention, keystore.MinRetention)
		return exitUsage
	case o.batch <= 0 || o.limit <= 0:
		fmt.Fprintln(stderr, "pagpolar ops reap: -batch and -limit must be positive")
		return exitUsage
	case o.minPause < 0 || o.maxPause < o.minPause:
		fmt.Fprintf(stderr, "pagpolar ops reap: -min-pause %v, -max-pause %v: want 0 <= min <= max\n", o.minPause, o.maxPause)
		return exitUsage
	}
	now := time.Now()
	cutoff := now.Add(-o.retention)
	if o.dryRun {
		store, closeStore, err := opsStores.OpenReadOnly(ctx, o.store)
		if err != nil {
			return openFailed(stderr, "reap", err)
		}
		defer func() { _ = closeStore() }()
		recs, err := store.List(ctx, keystore.Filter{States: []keystore.State{keystore.StateSucceeded, keystore.StateFailed}, UpdatedBefore: cutoff, Limit: o.limit + 1})
		if err != nil {
			fmt.Fprintf(stderr, "pagpolar ops reap: %v\n", err)
			return exitFailed
		}
		more := len(recs) > o.limit
		if more {
			recs = recs[:o.limit]
		}
		return out.wouldReap(recs, more, cutoff)
	}
	store, closeStore, err := opsStores.OpenWritable(ctx, o.store)
	if err != nil {
		return openFailed(stderr, "reap", err)
	}
	defer func() { _ = closeStore() }()
	var batches, retried int
	var busy, paused time.Duration
	start := time.Now()
	// ReapOptions takes a zero pause for its default: -min-pause 0 means none.
	n, err := keystore.ReapWith(ctx, store, keystore.ReapOptions{Retention: o.retention, Batch: o.batch, Yield: o.yield,
		MinPause: max(o.minPause, time.Nanosecond), MaxPause: max(o.maxPause, time.Nanosecond), Now: now,
		Progress: func(b keystore.ReapBatch) {
			batches++
			busy += b.Took
			paused += b.Pause
			if b.Err != nil {
				retried++
				fmt.Fprintf(stderr, "pagpolar ops reap: a batch failed, trying again in %v: %v\n", b.Pause, b.Err)
			}
		}})
	if err != nil {
		fmt.Fprintf(stderr, "pagpolar ops reap: removed %d, then: %v\n", n, err)
		return exitFailed
	}
	wall := time.Since(start)
	if out.json {
		return out.encode(map[string]any{"removed": n, "cutoff": cutoff.UTC(), "batches": batches,
			"seconds": wall.Seconds(), "busy_seconds": busy.Seconds(), "paused_seconds": paused.Seconds(), "retried": retried})
	}
	fmt.Fprintf(out.w, "removed %d succeeded or failed record(s) last changed before %s\n", n, cutoff.UTC().Format(time.RFC3339))
	fmt.Fprintf(out.w, "%d batch(es) in %.1f s: %.1f s deleting, %.1f s paused for live writes; %d retried\n", batches, wall.Seconds(), busy.Seconds(), paused.Seconds(), retried)
	return exitOK
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
