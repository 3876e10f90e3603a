package apicheck

// The scripted calls of a run, in order, and how each ends up in the report.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// path records how one SDK call ended.
func (r *runner) path(name, opID string, src pagpolar.Source, err error, expect string) {
	p := &Path{Name: name, OperationID: opID}
	var unk *pagpolar.OutcomeUnknownError
	switch {
	case err == nil && expect == "":
		p.Outcome, p.Detail = OutcomeSettled, "succeeded ("+string(src)+")"
		if strings.HasSuffix(name, "/lost-answer") && src != pagpolar.SourceLookup {
			p.Detail += "; not by its lookup: the lookup did not find the effect, and the SDK waited out the in-processing window to send again"
		}
	case err == nil:
		p.Outcome, p.Detail = OutcomeUnexpected, "succeeded ("+string(src)+"), expected "+expect
	case errors.As(err, &unk):
		p.Outcome, p.Detail = OutcomeUnknown, unk.Reason
		if unk.Ref != "" {
			p.Detail += "; found " + unk.Ref
		}
	case expect != "":
		p.Outcome, p.Detail = OutcomeSettled, expect+": "+oneLine(err.Error())
	default:
		p.Outcome, p.Detail = OutcomeUnexpected, oneLine(err.Error())
	}
	p.Detail = r.rec.rd.scrub(p.Detail)
	r.mu.Lock()
	r.paths[name] = p
	r.rep.Paths = append(r.rep.Paths, p)
	r.mu.Unlock()
	r.progress("%-28s %-10s %s", name, p.Outcome, p.Detail)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// script is the run's calls, in order. Each step goes on whatever the
// earlier ones ended in: what it cannot do is reported not exercised.
func (r *runner) script(ctx context.Context) {
	cust := customer()
	order := r.ref("order")

	// Charges: the answer to a's send is withheld (a lost answer: the SDK
	// settles by GET /sales?external_reference=); b repeats the operation
	// from another store (the API's replay).
	charge := func(kind string, call func(c *pagpolar.Client) (*pagpolar.Charge, error)) string {
		id := ""
		r.rec.setStep(kind + "/lookup")
		r.tapA.dropNextAnswer()
		res, err := call(r.a)
		src := pagpolar.Source("")
		if res != nil {
			src, id = res.Operation.Source, res.Sale.ID
		}
		r.path(kind+"/lost-answer", r.opID(kind), src, err, "")
		r.rec.setStep(kind + "/replay")
		res, err = call(r.b)
		src = ""
		if res != nil {
			src = res.Operation.Source
			if id == "" {
				id = res.Sale.ID
			}
		}
		r.path(kind+"/replay", r.opID(kind), src, err, "")
		if id == "" {
			id = r.createdID(kind + "/lookup")
		}
		return id
	}
	kinds := "PIX and boleto"
	if r.cfg.CardToken != "" {
		kinds = "PIX, boleto and card"
	}
	r.phase("charges (%s): each first answer is withheld, so the SDK settles it by lookup; this can take a few minutes", kinds)
	charge("pix", func(c *pagpolar.Client) (*pagpolar.Charge, error) {
		return c.Payments.Pix(ctx, pagpolar.PixParams{OperationID: r.opID("pix"), OfferID: r.cfg.OfferID, ExternalReference: order, Customer: cust})
	})
	charge("boleto", func(c *pagpolar.Client) (*pagpolar.Charge, error) {
		return c.Payments.Boleto(ctx, pagpolar.BoletoParams{OperationID: r.opID("boleto"), OfferID: r.cfg.OfferID, ExternalReference: order, Customer: cust})
	})
	if r.cfg.CardToken != "" {
		r.cardSale = charge("card", func(c *pagpolar.Client) (*pagpolar.Charge, error) {
			return c.Payments.CreditCard(ctx, pagpolar.CreditCardParams{OperationID: r.opID("card"), OfferID: r.cfg.OfferID, ExternalReference: order, Customer: cust, CardToken: r.cfg.CardToken})
		})
	}
	if ctx.Err() != nil {
		return
	}

	// Refunds of the card sale: 1 centavo with the answer withheld, its
	// replay, one over what is left (refused), then the rest.
	if r.cardSale != "" {
		r.phase("refunds of the card sale")
		r.refunds(ctx)
	}
	if ctx.Err() != nil {
		return
	}

	// Subscription and plan changes (PIX: nothing is captured).
	subRef := r.ref("subscription")
	subscribe := func(c *pagpolar.Client) (*pagpolar.SubscriptionResult, error) {
		return c.Subscriptions.Subscribe(ctx, pagpolar.SubscribeParams{OperationID: r.opID("subscribe"), OfferID: r.cfg.PlanID,
			ExternalReference: subRef, Customer: cust, PaymentMethod: wire.MethodPix})
	}
	r.phase("subscription and plan changes")
	r.rec.setStep("subscribe/lookup")
	r.tapA.dropNextAnswer()
	sres, err := subscribe(r.a)
	src := pagpolar.Source("")
	if sres != nil {
		src, r.subID = sres.Operation.Source, sres.Subscription.ID
	}
	r.path("subscribe/lost-answer", r.opID("subscribe"), src, err, "")
	r.rec.setStep("subscribe/replay")
	sres, err = subscribe(r.b)
	src = ""
	if sres != nil {
		src = sres.Operation.Source
		if r.subID == "" {
			r.subID = sres.Subscription.ID
		}
	}
	r.path("subscribe/replay", r.opID("subscribe"), src, err, "")
	if r.subID == "" {
		r.subID = r.createdID("subscribe/lookup")
	}
	if r.subID != "" {
		change := func(c *pagpolar.Client, op, to string) (*pagpolar.PlanChangeResult, error) {
			return c.Subscriptions.ChangePlan(ctx, pagpolar.ChangePlanParams{OperationID: r.opID(op), SubscriptionID: r.subID, NewOfferID: to})
		}
		r.rec.setStep("plan-change/answer")
		pres, err := change(r.a, "plan-change-1", r.cfg.OtherPlanID)
		r.path("plan-change/answer", r.opID("plan-change-1"), sourceOf(pres), err, "")
		r.rec.setStep("plan-change/lookup")
		r.tapA.dropNextAnswer()
		pres, err = change(r.a, "plan-change-2", r.cfg.PlanID)
		r.path("plan-change/lost-answer", r.opID("plan-change-2"), sourceOf(pres), err, "")
		r.rec.setStep("plan-change/replay")
		pres, err = change(r.b, "plan-change-1", r.cfg.OtherPlanID)
		r.path("plan-change/replay", r.opID("plan-change-1"), sourceOf(pres), err, "")
	}
	if ctx.Err() != nil {
		return
	}
	r.phase("reads and protocol checks (replays, the 409 race, a POST without a key)")
	r.reads(ctx, order, subRef)
	r.protocol(ctx)
	if r.cfg.CardToken != "" && ctx.Err() == nil {
		r.cleanup(ctx)
	}
}

// cardSales are the card sales the run's 2xx answers name (a replay too:
// one that names a sale not seen before made it), in order, and the card
// sale of the refunds if not among them.
func (r *runner) cardSales() []string {
	var ids []string
	for _, x := range r.rec.exchanges() {
		if _, kind := routeOf(x); kind != "card" || x.method != http.MethodPost || x.status < 200 || x.status >= 300 {
			continue
		}
		if obj, err := wire.ParseObject(x.body); err == nil {
			if id, _ := obj.Str(wire.AllNames(wire.FID)); id != "" && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	if r.cardSale != "" && !slices.Contains(ids, r.cardSale) {
		ids = append(ids, r.cardSale)
	}
	return ids
}

// cleanup refunds what is left of every card sale the run created beyond
// the one its refunds exercised (an API that does not keep one key to one
// effect makes more), and of that one if its last refund was not made;
// unless a refund ended as the check cannot account for (stopRefunds).
// Then it reads each one back, for the notes.
func (r *runner) cleanup(ctx context.Context) {
	ids := r.cardSales()
	for i, id := range ids {
		if r.stopRefunds || id == r.cardSale && (r.refundedOK("refund/rest") || r.cardTotal <= r.refunded) {
			continue
		}
		r.rec.setStep("cleanup/sale")
		sale, err := r.a.Payments.GetSale(ctx, id)
		if err != nil {
			r.note(fmt.Sprintf("card sale %s could not be read to refund what is left of it (%s): refund it by hand", id, oneLine(err.Error())))
			continue
		}
		left := sale.Amount - sale.RefundedAmount
		if left <= 0 {
			continue
		}
		step := fmt.Sprintf("cleanup/refund-%d", i+1)
		r.rec.setStep(step)
		r.mu.Lock()
		r.cleanupSent[step] = left
		r.mu.Unlock()
		_, err = r.a.Refunds.Create(ctx, pagpolar.RefundParams{OperationID: r.opID(fmt.Sprintf("cleanup-refund-%d", i+1)), SaleID: id, Amount: left, Reason: "pagpolar check " + r.cfg.RunID})
		if err != nil {
			r.progress("cleanup: refund of %d centavos of card sale %s: %s", left, id, oneLine(err.Error()))
		}
	}
	r.rec.setStep("cleanup/read")
	for _, id := range ids {
		_, _ = r.raw(ctx, http.MethodGet, strings.Replace(wire.RouteSale, "{identifier}", url.PathEscape(id), 1), nil, nil, "")
	}
}

func sourceOf(p *pagpolar.PlanChangeResult) pagpolar.Source {
	if p == nil {
		return ""
	}
	return p.Operation.Source
}

func (r *runner) refunds(ctx context.Context) {
	r.rec.setStep("refund/sale-before")
	sale, err := r.a.Payments.GetSale(ctx, r.cardSale)
	if err != nil {
		r.progress("refunds: not made: GET the card sale: %v", err)
		return
	}
	r.cardTotal = sale.Amount
	salePath := strings.Replace(wire.RouteSale, "{identifier}", url.PathEscape(r.cardSale), 1)
	refund := func(c *pagpolar.Client, op string, amount int64) (*pagpolar.RefundResult, error) {
		return c.Refunds.Create(ctx, pagpolar.RefundParams{OperationID: r.opID(op), SaleID: r.cardSale, Amount: amount, Reason: "pagpolar check " + r.cfg.RunID})
	}
	src := func(res *pagpolar.RefundResult) pagpolar.Source {
		if res == nil {
			return ""
		}
		return res.Operation.Source
	}
	r.rec.setStep("refund/lookup")
	r.tapA.dropNextAnswer()
	res, err := refund(r.a, "refund-1", 1)
	r.path("refund/lost-answer", r.opID("refund-1"), src(res), err, "")
	r.rec.setStep("refund/replay")
	res, err = refund(r.b, "refund-1", 1)
	r.path("refund/replay", r.opID("refund-1"), src(res), err, "")
	if r.refundedOK("refund/lookup") {
		r.refunded++
		r.rec.setStep("refund/sale-after-partial")
		_, _ = r.raw(ctx, http.MethodGet, salePath, nil, nil, "")
	}
	if r.cardTotal <= r.refunded {
		return
	}
	left := r.cardTotal - r.refunded
	r.rest = left
	r.rec.setStep("refund/over")
	res, err = refund(r.a, "refund-over", left+1)
	expect := "refused"
	r.path("refund/refused", r.opID("refund-over"), src(res), err, expect)
	if why := overRefused(r.rec.exchanges(), "refund/over"); why != "" {
		// It may have refunded: another refund could take more than the
		// sale had. Nothing more is refunded by the check.
		r.stopRefunds = true
		r.note(fmt.Sprintf("the refund of %d centavos (1 over what was left) of card sale %s was not refused (%s): the check sent no more refunds; check the sale's refunds and refund what is left by hand", left+1, r.cardSale, why))
		return
	}
	r.rec.setStep("refund/rest")
	res, err = refund(r.a, "refund-rest", left)
	r.path("refund/answer", r.opID("refund-rest"), src(res), err, "")
	if r.refundedOK("refund/rest") {
		r.refunded += left
	}
}

// overRefused says why the step's over-refund was not seen refused ("":
// it was). Refused is every answer to its POSTs a 4xx other than 409 and
// 429 (which say nothing of the refund), at least one of them, and none a
// 2xx, a 5xx or missing.
func overRefused(xs []exchange, step string) string {
	refused := 0
	for _, x := range xs {
		if x.step != step || x.method != http.MethodPost {
			continue
		}
		switch {
		case x.status == 0:
			return "a send got no answer"
		case x.status >= 200 && x.status < 300:
			return fmt.Sprintf("answered %d", x.status)
		case x.status == http.StatusConflict || x.status == http.StatusTooManyRequests:
		case x.status >= 400 && x.status < 500:
			refused++
		default:
			return fmt.Sprintf("answered %d", x.status)
		}
	}
	if refused == 0 {
		return "no refusal was seen"
	}
	return ""
}

// note adds a note for a person.
func (r *runner) note(s string) {
	r.mu.Lock()
	r.rep.Notes = append(r.rep.Notes, s)
	r.mu.Unlock()
	r.progress("note: %s", s)
}

// refundedOK says whether the step's POST /refunds created a refund (read
// raw: whatever the SDK made of it).
func (r *runner) refundedOK(step string) bool {
	for _, x := range r.rec.exchanges() {
		if x.step == step && x.method == http.MethodPost && x.status >= 200 && x.status < 300 && !x.replayed() {
			return true
		}
	}
	return false
}

// createdID is the identifier in the step's first fresh 2xx POST answer.
func (r *runner) createdID(step string) string {
	for _, x := range r.rec.exchanges() {
		if x.step == step && x.method == http.MethodPost && x.status >= 200 && x.status < 300 {
			if o, err := wire.ParseObject(x.body); err == nil {
				id, _ := o.Str(wire.AllNames(wire.FID))
				return id
			}
		}
	}
	return ""
}

// reads are the read routes, raw: every page of each list.
func (r *runner) reads(ctx context.Context, order, subRef string) {
	r.rec.setStep("reads")
	r.list(ctx, wire.RouteSales, url.Values{"external_reference": {order}})
	for _, step := range []string{"pix/lookup", "boleto/lookup", "card/lookup"} {
		if id := r.createdID(step); id != "" {
			_, _ = r.raw(ctx, http.MethodGet, strings.Replace(wire.RouteSale, "{identifier}", url.PathEscape(id), 1), nil, nil, "")
		}
	}
	if r.cardSale != "" {
		r.list(ctx, wire.RouteRefunds, url.Values{"sale_identifier": {r.cardSale}})
	}
	if r.subID != "" {
		_, _ = r.raw(ctx, http.MethodGet, strings.Replace(wire.RouteSubscription, "{id}", url.PathEscape(r.subID), 1), nil, nil, "")
	}
	r.list(ctx, wire.RouteSubscriptions, url.Values{"external_reference": {subRef}})
	r.list(ctx, wire.RouteSales, url.Values{"external_reference": {subRef}})
}

// list reads every page of a list the way the SDK would follow it
// (wire.ParseList), at most 20 pages.
func (r *runner) list(ctx context.Context, path string, q url.Values) {
	x, err := r.raw(ctx, http.MethodGet, path, q, nil, "")
	for range 20 {
		if err != nil || x.status != http.StatusOK {
			return
		}
		page, perr := wire.ParseList(x.body, x.header)
		if perr != nil || page.Next.Done || page.Next.Problem != "" {
			return
		}
		switch {
		case page.Next.URL != "":
			u, uerr := url.Parse(page.Next.URL)
			if uerr != nil {
				return
			}
			if !u.IsAbs() {
				u = r.base.ResolveReference(u)
			}
			if u.Host != r.base.Host {
				return
			}
			x, err = r.raw(ctx, http.MethodGet, strings.TrimPrefix(u.Path, strings.TrimRight(r.base.Path, "/")), u.Query(), nil, "")
		default:
			nq := url.Values{}
			for k, v := range q {
				nq[k] = v
			}
			for k, v := range page.Next.Query {
				nq[k] = v
			}
			x, err = r.raw(ctx, http.MethodGet, path, nq, nil, "")
		}
	}
}

// protocol: a 400 for a missing key, a 404 error body, and a key in
// processing (409) raced with three concurrent sends of one new key.
func (r *runner) protocol(ctx context.Context) {
	cust := customer()
	body := wire.PixRequest{OfferIdentifier: r.cfg.OfferID, ExternalReference: r.ref("no-key"),
		Customer: wire.Customer{Name: cust.Name, Email: cust.Email, Document: cust.Document, Phone: cust.Phone}}
	r.rec.setStep("missing-key")
	_, _ = r.raw(ctx, http.MethodPost, wire.RoutePix, nil, body, "")
	// A 400 alone does not prove nothing was created: look for the sale.
	r.rec.setStep("missing-key/lookup")
	_, _ = r.raw(ctx, http.MethodGet, wire.RouteSales, url.Values{"external_reference": {body.ExternalReference}}, nil, "")
	r.rec.setStep("not-found")
	_, _ = r.raw(ctx, http.MethodGet, strings.Replace(wire.RouteSale, "{identifier}", r.ref("no-such-sale"), 1), nil, nil, "")

	r.rec.setStep("in-progress")
	body.ExternalReference = r.ref("in-progress")
	key := r.prefix + "in-progress-key"
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { _, _ = r.raw(ctx, http.MethodPost, wire.RoutePix, nil, body, key) })
	}
	wg.Wait()
}
