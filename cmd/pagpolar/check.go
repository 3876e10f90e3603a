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

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/apicheck"
)

const checkUsage = `usage: pagpolar check [flags]

Checks a PagPolar API (your staging account) against the shapes the SDK
assumes (internal/wire/wire.go), and says how the SDK acts on what it finds.
It makes a short scripted set of real calls — a PIX, a boleto and a card
charge, the lookups, a partial refund of 1 centavo, a refused one and the
refund of the rest, a subscription and two plan changes, each money call repeated under the same
key, a 409 race, a POST without a key — each with its own operation ID and a
reference starting pagpolar-check-<run>-, and prints:

  - per assumed shape: confirmed, differs (with what was seen), absent, or
    not exercised, and how the SDK acted on the paths that depend on it;
  - per SDK path (a real call through the SDK, its answer withheld once so
    that the SDK settles it by lookup, then repeated from a second client so
    that it settles through the API's replay): settled, or unknown and why;
  - everything it created (sales, refunds, the subscription, plan changes).

The API is named by the variables the examples read: PAGPOLAR_BASE_URL,
PAGPOLAR_CREDENTIAL_ID, PAGPOLAR_TOKEN; the offers by PAGPOLAR_OFFER_ID,
PAGPOLAR_PLAN_ID, PAGPOLAR_OTHER_PLAN_ID (or the flags). Charges cost the
offer's price: give the cheapest offer the account has. The card sale is
refunded in full; PIX and boleto sales stay pending (nothing is captured);
the subscription (by PIX) stays pending. A base URL that looks like
production (api.pagpolar.com, or a host without "staging"/"sandbox" in its
name that is not localhost) is refused unless -i-know-this-is-production.

Send the -json output with a bug report: it holds no token and no customer
data beyond the check's own placeholder customer.

exit codes:
  0  every shape exercised is as assumed and every SDK path settled
  1  some shape differs or is absent; the SDK settled every path anyway
  2  bad usage, a refused base URL, the API unreachable / the credential
     refused, or requests that got no answer during the run (incomplete)
  3  some SDK path ended unknown, or otherwise than expected (e.g. a body
     refused): see the paths

flags:
`

// runCheck is `pagpolar check`.
func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("pagpolar check", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cardToken := fs.String("card-token", os.Getenv("PAGPOLAR_CARD_TOKEN"), "a test card token of that API (default $PAGPOLAR_CARD_TOKEN); without one, no card charge and no refunds")
	offer := fs.String("offer", os.Getenv("PAGPOLAR_OFFER_ID"), "offer for the charges: the cheapest one (default $PAGPOLAR_OFFER_ID)")
	plan := fs.String("plan", os.Getenv("PAGPOLAR_PLAN_ID"), "a plan's offer to subscribe to (default $PAGPOLAR_PLAN_ID)")
	otherPlan := fs.String("other-plan", os.Getenv("PAGPOLAR_OTHER_PLAN_ID"), "another plan's offer, for the plan change (default $PAGPOLAR_OTHER_PLAN_ID)")
	asJSON := fs.Bool("json", false, "print the report as JSON (to attach to a bug report, or diff between runs)")
	prod := fs.Bool("i-know-this-is-production", false, "run against a base URL that looks like production: it charges real money")
	runID := fs.String("run-id", "", "name of the run in references and operation IDs (default: random; reusing one within 24 h gets the earlier run's replays)")
	timeout := fs.Duration("timeout", 10*time.Minute, "how long the whole check may take")
	window := fs.Duration("processing-window", 0, "the API's in-processing window, if not the documented 60 s: only for a fake configured the same way (pagpolar sim -processing-window)")
	verbose := fs.Bool("v", false, "print each SDK path's outcome on stderr as it ends")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, checkUsage)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return 0
		}
		fmt.Fprintf(stderr, "pagpolar check: %v\nRun \"pagpolar check -h\" for the flags.\n", err)
		return apicheck.ExitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "pagpolar check: unexpected argument %q\n", fs.Arg(0))
		return apicheck.ExitUsage
	}
	var missing []string
	env := map[string]string{}
	for _, k := range []string{"PAGPOLAR_BASE_URL", "PAGPOLAR_CREDENTIAL_ID", "PAGPOLAR_TOKEN"} {
		if env[k] = os.Getenv(k); env[k] == "" {
			missing = append(missing, "$"+k)
		}
	}
	for _, f := range []struct{ v, name string }{{*offer, "-offer ($PAGPOLAR_OFFER_ID)"}, {*plan, "-plan ($PAGPOLAR_PLAN_ID)"}, {*otherPlan, "-other-plan ($PAGPOLAR_OTHER_PLAN_ID)"}} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(stderr, "pagpolar check: not set: %s (`pagpolar sim` prints them all for its fake)\n", strings.Join(missing, ", "))
		return apicheck.ExitUsage
	}
	cfg := apicheck.Config{
		BaseURL: env["PAGPOLAR_BASE_URL"], CredentialID: env["PAGPOLAR_CREDENTIAL_ID"], Token: pagpolar.StaticToken(env["PAGPOLAR_TOKEN"]),
		OfferID: *offer, PlanID: *plan, OtherPlanID: *otherPlan, CardToken: *cardToken,
		RunID: *runID, AllowProduction: *prod,
	}
	if *window > 0 {
		// The fake's window, shortened: the waits that follow it shrink alike.
		short := *window / 6
		cfg.Policy = &pagpolar.RetryPolicy{ProcessingWindow: *window, WindowMargin: short, SettleDelay: short,
			LookupInterval: max(short/2, time.Millisecond), MaxRetryAfter: short, MaxSettleWait: 3 * *window}
	}
	if *verbose {
		cfg.Progress = func(line string) { fmt.Fprintln(stderr, "pagpolar check: "+line) }
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	rep, err := apicheck.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "pagpolar check: %v\n", err)
		if errors.Is(err, apicheck.ErrProduction) {
			fmt.Fprintln(stderr, "pagpolar check: nothing was sent. To run it there anyway: -i-know-this-is-production")
		}
		return apicheck.ExitUsage
	}
	if *asJSON {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteTable(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "pagpolar check: writing the report: %v\n", err)
		return apicheck.ExitUsage
	}
	return rep.ExitCode()
}
