package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"sort"
	"syscall"

	"github.com/pagpolar/pagpolar-go"
)

// commandFunc runs one command with its arguments (after the command name).
// It returns the process exit status: 0 success, 1 failure, 2 bad usage.
// ctx ends on SIGINT or SIGTERM.
type commandFunc func(ctx context.Context, args []string, stdout, stderr io.Writer) int

// commands maps a command name to its function; a new command lives in its
// own file and adds one line here and one in summaries.
var commands = map[string]commandFunc{
	"sim":    runSim,
	"demo":   runDemo,
	"chaos":  runChaos,
	"worker": runWorker, // hidden: the process chaos starts and kills
	"ops":    runOps,
	"check":  runCheck,
}

// summaries is the one-line description `pagpolar help` prints.
var summaries = map[string]string{
	"sim":   "run the fake PagPolar API on 127.0.0.1 with injected faults",
	"demo":  "run orders through the SDK against the in-process fake with faults, check its ledger",
	"chaos": "the demo across worker processes sharing one store, SIGKILLed and restarted",
	"ops":   "operator's view of a key store and a webhook inbox: list, show, settle, reap, inbox",
	"check": "check a PagPolar API (staging) against the shapes the SDK assumes; report and exit 0/1/2/3",
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches args[0] to its command.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		help(stderr)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 && args[0] == "help" && !slices.Contains([]string{"-h", "-help", "--help", "help"}, args[1]) {
			// help <command>: the command's own help.
			if cmd, ok := commands[args[1]]; ok && summaries[args[1]] != "" {
				return cmd(ctx, []string{"-h"}, stdout, stderr)
			}
			fmt.Fprintf(stderr, "pagpolar help: unknown command %q\n\n", args[1])
			help(stderr)
			return 2
		}
		help(stdout)
		return 0
	case "version", "-version", "--version":
		fmt.Fprintf(stdout, "pagpolar %s (github.com/pagpolar/pagpolar-go, %s)\n", pagpolar.Version, runtime.Version())
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "pagpolar: unknown command %q\n\n", args[0])
		help(stderr)
		return 2
	}
	return cmd(ctx, args[1:], stdout, stderr)
}

func help(w io.Writer) {
	fmt.Fprintln(w, "usage: pagpolar <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for name := range commands {
		if summaries[name] != "" { // no summary: a hidden command
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "  %-8s %s\n", name, summaries[name])
	}
	fmt.Fprintf(w, "  %-8s %s\n", "version", "print the SDK version")
	fmt.Fprintln(w, "\nRun `pagpolar <command> -h` or `pagpolar help <command>` for a command's flags.")
}
