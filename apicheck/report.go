package apicheck

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// Report is what a run found.
type Report struct {
	RunID      string    `json:"run_id"`
	BaseURL    string    `json:"base_url"`
	SDKVersion string    `json:"sdk_version"`
	Started    time.Time `json:"started"`
	Calls      int       `json:"calls"`
	// NoAnswer counts requests that got no answer at all (connection
	// refused, reset, timed out): the run is then incomplete.
	NoAnswer int       `json:"no_answer,omitempty"`
	Items    []Item    `json:"items"`
	Paths    []*Path   `json:"paths"`
	Created  []Created `json:"created"`
	// Notes are what the run left for a person to do or know (a sale it
	// could not refund in full, the subscription it cannot cancel).
	Notes []string `json:"notes,omitempty"`
}

// Item is one assumed shape and what the run found.
type Item struct {
	ID         string `json:"id"`
	Assumed    string `json:"assumed"`
	Documented bool   `json:"documented,omitempty"`
	Status     Status `json:"status"`
	// Observed is, when the status is not confirmed, what was seen and
	// where (the first such answer), and in how many of the answers that
	// showed the shape.
	Observed string `json:"observed,omitempty"`
	Seen     int    `json:"seen"` // answers that showed it
	// SDK is how the SDK acted on the paths that depend on this shape:
	// "settles (...)" or "ends unknown on PATH: reason"; "-" when no path
	// of the check depends on it.
	SDK string `json:"sdk"`
	// EndsUnknown: a path that depends on it did not settle, or (for the
	// idempotency and replay items) it differs or is absent, which makes
	// those paths ones the SDK cannot keep safe.
	EndsUnknown bool `json:"ends_unknown,omitempty"`
	// Optional: no scripted call is sure to show it (a 429/503, a declining
	// card, a webhook, the 409 race); not exercised, it does not keep the
	// run from exit 0.
	Optional bool `json:"optional,omitempty"`
}

// Outcomes of a path.
const (
	OutcomeSettled    = "settled"    // the SDK settled the operation as the check expected
	OutcomeUnknown    = "unknown"    // ErrOutcomeUnknown
	OutcomeUnexpected = "unexpected" // settled otherwise than expected, or another error
)

// Path is one SDK call of the check and how it ended.
type Path struct {
	Name        string `json:"name"` // e.g. "pix/lost-answer": a PIX whose answer was lost, settled by lookup
	OperationID string `json:"operation_id"`
	Outcome     string `json:"outcome"`
	Detail      string `json:"detail"`
}

// Created is something the run created on the API.
type Created struct {
	Kind        string `json:"kind"` // sale, refund, subscription, plan_change
	ID          string `json:"id"`
	Route       string `json:"route"`
	Step        string `json:"step"`
	Reference   string `json:"external_reference,omitempty"`
	Amount      string `json:"amount,omitempty"` // as the API wrote it
	Status      string `json:"status,omitempty"`
	Idempotency string `json:"idempotency_key,omitempty"`
}

// Exit codes of `pagpolar check` (ExitCode), strongest first: 3, 2, 1, 0.
const (
	// ExitConfirmed: every item is confirmed (but the optional ones no
	// scripted call is sure to show, which may be not exercised), and
	// every SDK path settled.
	ExitConfirmed = 0
	// ExitDiffers: not everything is confirmed — some shape differs, is
	// absent, or was not exercised (no card token, say) — and the SDK
	// settled every path the run made.
	ExitDiffers = 1
	// ExitUsage: the run could not be made (bad usage or Config, a refused
	// base URL, the API unreachable or refusing the credential: Run's
	// error), or it is incomplete: some request got no answer, and no path
	// ended unknown.
	ExitUsage = 2
	// ExitUnknown: some SDK path did not settle (ended unknown, or
	// otherwise than expected), or the API does not keep one key to one
	// effect or does not replay (idempotency.one-effect, replay.header,
	// replay.body differ or are absent): a path the SDK cannot keep safe.
	// It wins over an incomplete run.
	ExitUnknown = 3
)

// ExitCode is the run's verdict, the strongest that applies: ExitUnknown,
// then ExitUsage (some request got no answer), then ExitDiffers, else
// ExitConfirmed.
func (r *Report) ExitCode() int {
	for _, p := range r.Paths {
		if p.Outcome != OutcomeSettled {
			return ExitUnknown
		}
	}
	for _, it := range r.Items {
		if d, _ := defByID(it.ID); d.unsafe && (it.Status == Differs || it.Status == Absent) {
			return ExitUnknown
		}
	}
	if r.NoAnswer > 0 {
		return ExitUsage
	}
	for _, it := range r.Items {
		d, _ := defByID(it.ID)
		if it.Status == Differs || it.Status == Absent || it.Status == NotExercised && !d.optional && !it.Optional {
			return ExitDiffers
		}
	}
	return ExitConfirmed
}

// Item returns the item with id.
func (r *Report) Item(id string) (Item, bool) {
	for _, it := range r.Items {
		if it.ID == id {
			return it, true
		}
	}
	return Item{}, false
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the report for people: first what is not as
// assumed (in full), then the SDK paths, every shape in one line each,
// and what the run created.
func (r *Report) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "pagpolar check %s against %s (SDK %s, %d calls)\n", r.RunID, r.BaseURL, r.SDKVersion, r.Calls)
	var off []Item
	for _, it := range r.Items {
		if it.Status == Differs || it.Status == Absent {
			off = append(off, it)
		}
	}
	if len(off) == 0 {
		fmt.Fprintln(w, "\nEvery shape the check exercised is as the SDK assumes.")
	} else {
		fmt.Fprintln(w, "\nNot as the SDK assumes:")
		for _, it := range off {
			fmt.Fprintf(w, "  %s: %s\n    assumed:  %s\n    observed: %s\n    SDK:      %s\n", it.ID, it.Status, it.Assumed, it.Observed, it.SDK)
		}
	}
	fmt.Fprintln(w, "\nSDK paths (each a real call through the SDK):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, p := range r.Paths {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", p.Name, p.Outcome, clip(p.Detail, 160))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nEvery assumed shape:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, it := range r.Items {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", it.ID, it.Status, shortSDK(it.SDK))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nCreated on the API (references start with pagpolar-check-"+r.RunID+"-):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range r.Created {
		fmt.Fprintf(tw, "  %s\t%s\t%s\tamount %s\t%s\t%s\n", c.Kind, orDash(c.ID), orDash(c.Reference), orDash(c.Amount), orDash(c.Status), c.Step)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "  note: "+n)
	}
	counts := map[Status]int{}
	for _, it := range r.Items {
		counts[it.Status]++
	}
	verdict := map[int]string{
		ExitConfirmed: "every shape is confirmed (the optional ones aside) and every SDK path settled",
		ExitDiffers:   "not everything is confirmed (some shapes differ, are absent or were not exercised); the SDK settled every path",
		ExitUnknown:   "some SDK path did not settle, or the API does not keep one key to one effect: see above",
		ExitUsage:     "some requests got no answer: the run is incomplete",
	}[r.ExitCode()]
	_, err := fmt.Fprintf(w, "\n%d confirmed, %d differ, %d absent, %d not exercised: %s (exit %d)\n",
		counts[Confirmed], counts[Differs], counts[Absent], counts[NotExercised], verdict, r.ExitCode())
	return err
}

// shortSDK is the SDK column in one short line.
func shortSDK(s string) string {
	if strings.HasPrefix(s, "settles (") {
		if n := strings.Count(s, ",") + 1; n > 1 {
			return fmt.Sprintf("settles (%d paths)", n)
		}
		return s
	}
	if i := strings.Index(s, ": "); i > 0 && strings.HasPrefix(s, "cannot keep ") {
		return s[:i]
	}
	if i := strings.Index(s, ": "); i > 0 && strings.HasPrefix(s, "ends ") {
		return s[:i]
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// finish builds the report from the recorded exchanges and paths.
func (r *runner) finish() {
	o := r.observe()
	r.rep.Calls = len(r.rec.exchanges())
	for _, x := range r.rec.exchanges() {
		if x.status == 0 {
			r.rep.NoAnswer++
		}
	}
	if r.rep.NoAnswer > 0 {
		r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("%d requests got no answer (connection errors): the run is incomplete; run it again", r.rep.NoAnswer))
	}
	for _, d := range defs {
		it := Item{ID: d.id, Assumed: d.assumed, Documented: d.documented}
		list := o.by[d.id]
		it.Seen = len(list)
		it.Status, it.Observed = aggregate(list)
		it.SDK, it.EndsUnknown = r.sdkColumn(d.paths)
		it.Optional = d.optional
		if d.unsafe && (it.Status == Differs || it.Status == Absent) {
			it.EndsUnknown = true
			it.SDK = "cannot keep these paths safe: with a key not kept to one effect, or no replay, a lost answer or a retry can make a second effect (a double charge); " + it.SDK
		}
		r.rep.Items = append(r.rep.Items, it)
	}
	r.rep.Created = r.created()
	if it, _ := r.rep.Item("idempotency.one-effect"); it.Status == Differs {
		r.rep.Notes = append(r.rep.Notes, "the API made one operation more than once under one Idempotency-Key (idempotency.one-effect): "+
			"against it the SDK's lookups and retries can charge twice, and no setting of the SDK prevents it; do not go live on it. "+
			"Every effect it made is listed under Created; the check refunded what it could of every card sale, and names below any it could not")
	}
	r.rep.Notes = append(r.rep.Notes, r.notes()...)
	rd := r.rec.rd
	for i := range r.rep.Created {
		c := &r.rep.Created[i]
		c.ID, c.Reference, c.Amount, c.Status = rd.scrub(c.ID), rd.scrub(c.Reference), rd.scrub(c.Amount), rd.scrub(c.Status)
	}
	for i, n := range r.rep.Notes {
		r.rep.Notes[i] = rd.scrub(n)
	}
}

// notes: whether the card sale ended fully refunded (as the API reports
// it, last read), and what stays on the account.
func (r *runner) notes() []string {
	var out []string
	for _, id := range r.cardSales() {
		var last []byte
		for _, x := range r.rec.exchanges() {
			if _, kind := routeOf(x); kind == "sale" && x.status == http.StatusOK && strings.HasSuffix(x.path, "/"+url.PathEscape(id)) {
				last = x.body
			}
		}
		if obj, err := wire.ParseObject(last); err == nil {
			amount := obj.Amount(wire.AllNames(wire.FAmount)).Best()
			refunded := obj.Amount(wire.AllNames(wire.FRefundedAmount)).Best()
			status, _ := obj.Str(wire.AllNames(wire.FStatus))
			if amount == 0 || refunded != amount {
				out = append(out, fmt.Sprintf("card sale %s is not shown fully refunded (status %q, refunded %d of %d centavos as the SDK reads them): check it, and refund the rest by hand if need be", id, status, refunded, amount))
			}
		} else {
			out = append(out, "card sale "+id+" could not be read back: check that it is refunded")
		}
	}
	if r.subID != "" {
		out = append(out, "subscription "+r.subID+" (PIX, nothing captured) stays on the account: the API documents no route to cancel it")
	}
	return out
}

func aggregate(list []obs) (Status, string) {
	if len(list) == 0 {
		return NotExercised, ""
	}
	n := map[Status]int{}
	var firstDiff, firstAbsent *obs
	for i := range list {
		n[list[i].st]++
		switch {
		case list[i].st == Differs && firstDiff == nil:
			firstDiff = &list[i]
		case list[i].st == Absent && firstAbsent == nil:
			firstAbsent = &list[i]
		}
	}
	of := func(k int) string { return fmt.Sprintf(" [%d of %d answers]", k, len(list)) }
	switch {
	case firstDiff != nil:
		return Differs, firstDiff.value + " at " + firstDiff.where + of(n[Differs])
	case n[Absent] == len(list):
		return Absent, "missing at " + firstAbsent.where + of(n[Absent])
	case firstAbsent != nil:
		return Differs, "missing at " + firstAbsent.where + of(n[Absent])
	}
	return Confirmed, ""
}

// sdkColumn says how the SDK acted on the given paths.
func (r *runner) sdkColumn(paths []string) (string, bool) {
	if len(paths) == 0 {
		return "-", false
	}
	var settled, bad []string
	badDetail := ""
	for _, name := range paths {
		p, ok := r.paths[name]
		if !ok {
			continue
		}
		if p.Outcome == OutcomeSettled {
			settled = append(settled, name)
			continue
		}
		if badDetail == "" {
			badDetail = p.Outcome + " on " + name + ": " + p.Detail
		}
		bad = append(bad, name)
	}
	switch {
	case len(bad) > 0:
		s := "ends " + badDetail
		if len(bad) > 1 {
			s += fmt.Sprintf(" (also %s)", strings.Join(bad[1:], ", "))
		}
		return s, true
	case len(settled) > 0:
		return "settles (" + strings.Join(settled, ", ") + ")", false
	}
	return "not run", false
}

// created lists every effect the run's fresh 2xx answers created.
func (r *runner) created() []Created {
	var out []Created
	seen := map[string]bool{} // identifiers in 2xx POST answers so far
	for _, x := range r.rec.exchanges() {
		if x.method != http.MethodPost || x.status < 200 || x.status >= 300 {
			continue
		}
		id := ""
		if obj, err := wire.ParseObject(x.body); err == nil {
			id, _ = obj.Str(wire.AllNames(wire.FID))
		}
		newID := id != "" && !seen[id]
		seen[id] = true
		route, kind := routeOf(x)
		// A replay is no new effect, unless it names one no answer named
		// before (a "replay" that made another). An unmarked answer naming
		// an effect already listed is not one either — except a plan
		// change answered with its subscription, whose ID names no plan
		// change.
		subAnswer := false
		if obj, err := wire.ParseObject(x.body); err == nil && kind == "plan-change" && looksLikeSubscription(obj) {
			subAnswer = true
		}
		if !newID && (x.replayed() || id != "" && !subAnswer) {
			continue
		}
		c := Created{Route: route, Step: x.step, Idempotency: x.key}
		switch kind {
		case "pix", "boleto", "card":
			c.Kind = "sale"
		case "subscribe":
			c.Kind = "subscription"
		case "plan-change":
			c.Kind = "plan_change"
		case "refund":
			c.Kind = "refund"
		default:
			c.Kind = "unknown"
		}
		if obj, err := wire.ParseObject(x.body); err == nil && kind == "plan-change" && looksLikeSubscription(obj) {
			sub, _ := obj.Str(wire.AllNames(wire.FID))
			c.Status = "answered with subscription " + sub
		} else if err == nil {
			c.ID, _ = obj.Str(wire.AllNames(wire.FID))
			c.Reference, _ = obj.Str(wire.AllNames(wire.FRef))
			c.Status, _ = obj.Str(wire.AllNames(wire.FStatus))
			if v, ok := obj.Get("amount"); ok {
				c.Amount = strings.TrimSpace(string(v))
			}
		}
		out = append(out, c)
	}
	// A POST without a key that created a sale (whatever it answered):
	// found by the lookup after it.
	for _, x := range r.rec.exchanges() {
		if x.step != "missing-key/lookup" || x.status != http.StatusOK {
			continue
		}
		for _, id := range r.keylessSales(x) {
			if !slices.ContainsFunc(out, func(c Created) bool { return c.ID == id }) {
				out = append(out, Created{Kind: "sale", ID: id, Route: "POST " + wire.RoutePix + " (without a key; found by GET " + wire.RouteSales + "?external_reference=)",
					Step: "missing-key", Reference: r.ref("no-key")})
			}
		}
	}
	// Plan changes answered with the subscription: their identifiers are
	// the subscription's plan changes the run did not otherwise see.
	listed := map[string]bool{}
	for _, c := range out {
		listed[c.ID] = true
	}
	var unseen []string
	for _, id := range r.planChangeIDs() {
		if !listed[id] {
			unseen = append(unseen, id)
			listed[id] = true
		}
	}
	for i := range out {
		if out[i].Kind == "plan_change" && out[i].ID == "" && len(unseen) > 0 {
			out[i].ID, unseen = unseen[0], unseen[1:]
			out[i].Status += " (identifier from GET /subscriptions/{id})"
		}
	}
	return out
}

// planChangeIDs are the plan changes GET /subscriptions/{id} listed last.
func (r *runner) planChangeIDs() []string {
	var ids []string
	for _, x := range r.rec.exchanges() {
		if _, kind := routeOf(x); kind != "subscription" || x.status != http.StatusOK {
			continue
		}
		obj, err := wire.ParseObject(x.body)
		if err != nil {
			continue
		}
		items, _ := obj.Array(wire.AllNames(wire.FPlanChanges))
		ids = ids[:0]
		for _, it := range items {
			if pc, err := wire.ParseObject(it); err == nil {
				if id, _ := pc.Str(wire.AllNames(wire.FID)); id != "" {
					ids = append(ids, id)
				}
			}
		}
	}
	return ids
}

func (r *runner) createdSummary() string {
	var parts []string
	for _, c := range r.created() {
		parts = append(parts, c.Kind+" "+c.ID)
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}
