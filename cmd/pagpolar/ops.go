package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

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

The store is -store URL or $PAGPOLAR_STORE, in the SDK's URL forms
(keystore/storeurl): sqlite:PATH, postgres://..., redis://...,
redis+cluster://h1:p,h2:p/..., with ?table=, ?prefix=, and the opt-outs
?volatile=1 and ?async_commit=1 that the writing commands need. list, show,
the dry runs and recover without -accept open it read-only: they never
create a file, a table or a key, a store that does not exist is an error
(exit 2), and a Redis without an append-only file is read after a warning.
settle, reap and recover -accept write to it, and also refuse a store that
does not exist; -dry-run says what they would change, and changes nothing.

Operation IDs: the store names each operation <credential>/<operation>, e.g.
cred_123/pix:PEDIDO-1234 (a credential holding "/" or "%" is escaped:
acme%2Feu/pix:PEDIDO-1234). list, show and settle print that form; show and
settle also take the operation alone (pix:PEDIDO-1234) with -credential or
$PAGPOLAR_CREDENTIAL_ID.

exit codes:
  0  done (a dry run: nothing changed)
  1  the store or the API failed (unreachable, refused a write; settle: the
     API unreachable, the credential refused, a base URL without /v1)
  2  bad usage (settle: no -base-url nor $PAGPOLAR_BASE_URL, no
     $PAGPOLAR_TOKEN), or the store does not exist or holds no PagPolar
     records
  3  no such operation (settle -all: the store holds none of -credential)
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
			"(never a flag: flags show in ps), the API from -base-url or $PAGPOLAR_BASE_URL (there\n" +
			"is no default: settle never reaches production unless told to). Before any lookup it\n" +
			"reads GET /sales once, so that an unreachable API, a refused credential or a base URL\n" +
			"without /v1 is said as such (exit 1). -dry-run needs neither and changes nothing.\n" +
			"-all with a -credential under which the store holds no operation at all is exit 3,\n" +
			"naming the credentials it does hold (a mistyped credential is not \"0 to settle\").\n" +
			"With one ID, settle polls for up to -wait until a lookup is conclusive; -all does not\n" +
			"wait. Either way an operation still unsettled is printed with the time after which a\n" +
			"lookup is conclusive (CONCLUSIVE AFTER), and the exit code is 4.",
		flags: func(fs *flag.FlagSet, o *opsFlags) {
			storeFlag(fs, o)
			credFlag(fs, o, "the stable credential ID the operations were recorded under")
			// Never production by default: an operator names the API.
			fs.StringVar(&o.baseURL, "base-url", os.Getenv("PAGPOLAR_BASE_URL"), "API base URL, ending in /v1 (default $PAGPOLAR_BASE_URL; required: there is no default)")
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
	fmt.Fprintln(w, "\nexit codes: 0 done; 1 store or API error; 2 bad usage or no such store; 3 no such operation (settle -all: none of -credential); 4 (settle) still unsettled, (recover) loss not accepted")
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
	if errors.Is(err, errNoStore) || errors.Is(err, errNoInbox) || errors.Is(err, errBadStoreURL) {
		return exitUsage
	}
	return exitFailed
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
