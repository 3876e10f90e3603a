package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
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
offer's price: give the cheapest offer the account has. Every card sale it
made is refunded in full where the API allows it (unless a refund ended as
the check cannot account for: then it stops refunding), and the notes name
any that is not; PIX and boleto sales stay pending (nothing is captured);
the subscription (by PIX) stays pending. A base URL that looks like
production (api.pagpolar.com, any IP address but loopback, a host with a
zone, or a name with no DNS label starting "staging"/"sandbox" (also after
a hyphen: api-staging) that is not localhost) is refused unless
-i-know-this-is-production.

A base URL with user information, a query or a fragment is refused; the
report prints the base URL without them. Send the -json output with a bug
report: before any observed text is built from an answer, every bearer
token the check sent, the card token, the check's placeholder customer
values and anything shaped like an e-mail address are replaced by
[redacted] / [e-mail] (as sent, JSON- and URL-escaped). It holds the IDs
of what the API created on staging, and the answers' shapes, amounts and
times as seen (digits are kept: they are the evidence). Read it before you
send it if your API echoes other data.

exit codes: the strongest that applies wins (3, then 2, then 1)
  0  every shape confirmed (but those no scripted call is sure to show:
     Retry-After, a declined card, webhooks, the 409 race) and every SDK
     path settled
  1  not everything is confirmed: some shape differs, is absent, or was
     not exercised (e.g. no -card-token); the SDK settled every path
  2  the run could not be made (bad usage, a refused base URL, the API
     unreachable or the credential refused), or it is incomplete: some
     requests got no answer and no path ended unknown
  3  some SDK path ended unknown or otherwise than expected (e.g. a body
     refused), or the API does not keep one key to one effect or does not
     replay (idempotency.one-effect, replay.header, replay.body): a path
     the SDK cannot keep safe; this wins even if requests got no answer

flags:
`

// checkTransport, if set, carries the check's requests (tests: a
// recording transport; nil in the binary).
var checkTransport http.RoundTripper

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
	if checkTransport != nil {
		cfg.HTTPClient = &http.Client{Transport: checkTransport}
	}
	if *window > 0 {
		// The fake's window, shortened: the waits that follow it shrink alike.
		short := *window / 6
		cfg.Policy = &pagpolar.RetryPolicy{ProcessingWindow: *window, WindowMargin: short, SettleDelay: short,
			LookupInterval: max(short/2, time.Millisecond), MaxRetryAfter: short, MaxSettleWait: 3 * *window}
	}
	cfg.Phase = func(line string) { fmt.Fprintln(stderr, "pagpolar check: "+line) }
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
