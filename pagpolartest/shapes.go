package pagpolartest

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Shape is a way of answering that differs from the shapes in
// internal/wire but that a real PagPolar could plausibly use: only the PIX
// request, the routes, the idempotency headers and the 409 message are
// documented. A Server answers in every shape given to WithShapes at once.
// What the server records (its Ledger) is the same in every shape: only
// the answers change, so a test checks the SDK's outcome against one truth.
type Shape string

// The shapes.
const (
	// ShapeToday is the shapes of internal/wire, unchanged.
	ShapeToday Shape = "today"
	// ShapeMethodHyphen spells the card method "credit-card".
	ShapeMethodHyphen Shape = "method-hyphen"
	// ShapeMethodUpper spells methods "PIX", "BOLETO", "CREDIT_CARD".
	ShapeMethodUpper Shape = "method-upper"
	// ShapeMethodCard spells the card method "card".
	ShapeMethodCard Shape = "method-card"
	// ShapePlanChangeAsSubscription answers a plan change with the
	// subscription object, not a plan change.
	ShapePlanChangeAsSubscription Shape = "plan-change-as-subscription"
	// ShapeNoPlanChanges leaves plan_changes out of GET /subscriptions/{id}
	// (and of every subscription).
	ShapeNoPlanChanges Shape = "no-plan-changes"
	// ShapeRefundRequested gives new refunds the status "requested".
	ShapeRefundRequested Shape = "refund-requested"
	// ShapeErrorMessageOnly answers errors with {"message": ...} only, no
	// code.
	ShapeErrorMessageOnly Shape = "errors-message-only"
	// ShapeGatewayJSON makes intermediaries (FaultGateway,
	// FaultGatewayAfterCommit) answer JSON pages with a code of their own,
	// as API gateways do, instead of HTML.
	ShapeGatewayJSON Shape = "gateway-json"
	// ShapePagedCursor pages lists two items at a time with has_more and
	// next_cursor (read back as ?cursor=).
	ShapePagedCursor Shape = "paged-cursor"
	// ShapePagedLink pages lists two items at a time with a Link header
	// (rel="next").
	ShapePagedLink Shape = "paged-link"
	// ShapePagedPages pages lists two items at a time with page and
	// total_pages (read back as ?page=).
	ShapePagedPages Shape = "paged-pages"
	// ShapeTimeZone writes times in São Paulo's offset (-03:00).
	ShapeTimeZone Shape = "time-zone"
	// ShapeTimeSeconds writes times in whole seconds, without a fraction.
	ShapeTimeSeconds Shape = "time-seconds"
	// ShapeTimeMissing leaves created_at out.
	ShapeTimeMissing Shape = "time-missing"
	// ShapeAmountReais writes amounts as JSON numbers in reais (99.9), as
	// PayZu's example does.
	ShapeAmountReais Shape = "amount-reais"
	// ShapeSubscriptionSparse leaves created_at and payment_method out of
	// subscriptions.
	ShapeSubscriptionSparse Shape = "subscription-sparse"
	// ShapeFieldID names identifiers "id" instead of "identifier".
	ShapeFieldID Shape = "field-id"
	// ShapeNoDate sends no Date header.
	ShapeNoDate Shape = "no-date"
	// ShapeSaleFKID gives sales their numeric primary key as "id" beside
	// "identifier", names a refund's sale in list items by that key
	// ("sale_id": 5012) instead of "sale_identifier", and a plan change's
	// subscription in GET /subscriptions/{id} by the subscription's
	// numeric key ("subscription_id": 77).
	ShapeSaleFKID Shape = "sale-fk-id"
	// ShapeListOfferID names the offer in list items by its numeric key
	// ("offer_id": 3), while POST answers echo "offer_identifier".
	ShapeListOfferID Shape = "list-offer-id"
	// ShapeSparseItems leaves payment_method and offer_identifier out of
	// list items.
	ShapeSparseItems Shape = "sparse-items"
	// ShapeDateStepBack runs the API's clock (its Date headers and the
	// created_at it stamps) an hour ahead for the first processing window
	// of the server's life, then steps it back.
	ShapeDateStepBack Shape = "date-step-back"
	// ShapeCacheNoAge serves list answers through a micro-cache that
	// ignores no-cache and sends no Age: a list URL's first answer is
	// served again, with its own Date, for two processing windows plus
	// ten seconds.
	ShapeCacheNoAge Shape = "cache-no-age"
	// ShapeUpgradedBeforeRetry shows subscriptions in list items on the
	// other plan (plan-basic as plan-pro and back) without their plan
	// changes, as if the customer changed plan right after subscribing.
	ShapeUpgradedBeforeRetry Shape = "upgraded-before-retry"
)

// AllShapes lists every shape but ShapeToday, in a stable order.
func AllShapes() []Shape {
	return []Shape{
		ShapeMethodHyphen, ShapeMethodUpper, ShapeMethodCard,
		ShapePlanChangeAsSubscription, ShapeNoPlanChanges, ShapeRefundRequested,
		ShapeErrorMessageOnly, ShapeGatewayJSON,
		ShapePagedCursor, ShapePagedLink, ShapePagedPages,
		ShapeTimeZone, ShapeTimeSeconds, ShapeTimeMissing,
		ShapeAmountReais, ShapeSubscriptionSparse, ShapeFieldID, ShapeNoDate,
		ShapeSaleFKID, ShapeListOfferID, ShapeSparseItems, ShapeDateStepBack, ShapeCacheNoAge, ShapeUpgradedBeforeRetry,
	}
}

// ParseShapes reads a comma-separated list of shape names ("today" and ""
// mean none).
func ParseShapes(s string) ([]Shape, error) {
	var out []Shape
	for part := range strings.SplitSeq(s, ",") {
		name := Shape(strings.TrimSpace(part))
		switch {
		case name == "" || name == ShapeToday:
			continue
		case !slices.Contains(AllShapes(), name):
			return nil, fmt.Errorf("pagpolartest: unknown shape %q (known: today, %s)", name, joinShapes(AllShapes()))
		}
		out = append(out, name)
	}
	return out, nil
}

func joinShapes(s []Shape) string {
	parts := make([]string, len(s))
	for i, x := range s {
		parts[i] = string(x)
	}
	return strings.Join(parts, ", ")
}

// WithShapes makes the server answer in the given shapes (default none:
// the shapes of internal/wire).
func WithShapes(shapes ...Shape) Option {
	return func(cfg *config) {
		for _, s := range shapes {
			if s != ShapeToday && s != "" {
				cfg.shapes = append(cfg.shapes, s)
			}
		}
	}
}

func (s *Server) has(shape Shape) bool { return slices.Contains(s.cfg.shapes, shape) }

// pageSize is how many items a paged shape puts on a page.
const pageSize = 2

// what a JSON body renders.
type bodyKind int

const (
	bodySale bodyKind = iota
	bodyRefund
	bodySubscription
	bodyPlanChange
)

// render rewrites a JSON answer of kind in the server's shapes.
func (s *Server) render(kind bodyKind, body []byte) []byte {
	if len(s.cfg.shapes) == 0 {
		return body
	}
	var v map[string]any
	if json.Unmarshal(body, &v) != nil {
		return body
	}
	s.renderObject(kind, v, false)
	return mustJSON(v)
}

func (s *Server) renderObject(kind bodyKind, v map[string]any, listItem bool) {
	switch kind {
	case bodySale:
		v["payment_method"] = s.methodSpelling(v["payment_method"])
		s.renderAmount(v, "amount")
		s.renderAmount(v, "refunded_amount")
	case bodyRefund:
		s.renderAmount(v, "amount")
		if s.has(ShapeRefundRequested) && v["status"] == "completed" {
			v["status"] = "requested"
		}
	case bodySubscription:
		v["payment_method"] = s.methodSpelling(v["payment_method"])
		s.renderAmount(v, "amount")
		if pcs, ok := v["plan_changes"].([]any); ok {
			for _, pc := range pcs {
				if m, ok := pc.(map[string]any); ok {
					s.renderObject(bodyPlanChange, m, false)
					s.renderNestedPlanChange(m)
				}
			}
		}
		if s.has(ShapeNoPlanChanges) {
			delete(v, "plan_changes")
		}
		if s.has(ShapeSubscriptionSparse) {
			delete(v, "created_at")
			delete(v, "payment_method")
		}
	}
	s.renderFields(kind, v, listItem)
	s.renderTime(v, "created_at")
	if s.has(ShapeFieldID) {
		if id, ok := v["identifier"]; ok {
			delete(v, "identifier")
			v["id"] = id
		}
	}
}

func (s *Server) methodSpelling(m any) any {
	str, ok := m.(string)
	if !ok {
		return m
	}
	switch {
	case s.has(ShapeMethodUpper):
		return strings.ToUpper(str)
	case str == "credit_card" && s.has(ShapeMethodHyphen):
		return "credit-card"
	case str == "credit_card" && s.has(ShapeMethodCard):
		return "card"
	}
	return str
}

func (s *Server) renderAmount(v map[string]any, key string) {
	if !s.has(ShapeAmountReais) {
		return
	}
	if n, ok := v[key].(float64); ok {
		v[key] = math.Round(n) / 100
	}
}

func (s *Server) renderTime(v map[string]any, key string) {
	str, ok := v[key].(string)
	if !ok {
		return
	}
	if s.has(ShapeTimeMissing) {
		delete(v, key)
		return
	}
	t, err := time.Parse(time.RFC3339Nano, str)
	if err != nil {
		return
	}
	t = s.shapeClock(t)
	if s.has(ShapeTimeZone) {
		t = t.In(time.FixedZone("BRT", -3*3600))
	} else {
		t = t.UTC()
	}
	layout := time.RFC3339Nano
	if s.has(ShapeTimeSeconds) {
		layout = time.RFC3339
	}
	v[key] = t.Format(layout)
}

// renderList renders a list answer {"data": [...]} of kind, paging it if
// a paged shape is on: page is read from the request's query.
func (s *Server) renderList(kind bodyKind, body []byte, r *http.Request, h http.Header) []byte {
	if len(s.cfg.shapes) == 0 {
		return body
	}
	var list struct {
		Data []map[string]any `json:"data"`
	}
	if json.Unmarshal(body, &list) != nil {
		return body
	}
	for _, item := range list.Data {
		s.renderObject(kind, item, true)
	}
	out := map[string]any{}
	items := list.Data
	paged := s.has(ShapePagedCursor) || s.has(ShapePagedLink) || s.has(ShapePagedPages)
	if paged {
		from := 0
		q := r.URL.Query()
		if c := q.Get("cursor"); c != "" {
			from, _ = strconv.Atoi(strings.TrimPrefix(c, "c"))
		}
		if p, err := strconv.Atoi(q.Get("page")); err == nil && p > 1 {
			from = (p - 1) * pageSize
		}
		from = min(max(from, 0), len(items))
		to := min(from+pageSize, len(items))
		more := to < len(items)
		page := from/pageSize + 1
		pages := max((len(items)+pageSize-1)/pageSize, 1)
		items = items[from:to]
		switch {
		case s.has(ShapePagedCursor):
			out["has_more"] = more
			if more {
				out["next_cursor"] = "c" + strconv.Itoa(to)
			} else {
				out["next_cursor"] = nil
			}
		case s.has(ShapePagedLink):
			if more {
				u := *r.URL
				q := u.Query()
				q.Set("page", strconv.Itoa(page+1))
				u.RawQuery = q.Encode()
				h.Set("Link", fmt.Sprintf(`<%s>; rel="next"`, (&url.URL{Path: u.Path, RawQuery: u.RawQuery}).String()))
			}
		case s.has(ShapePagedPages):
			out["page"] = page
			out["total_pages"] = pages
		}
	}
	if items == nil {
		items = []map[string]any{}
	}
	out["data"] = items
	return mustJSON(out)
}

// errorBody is an error answer in the server's shapes.
func (s *Server) errorBody(code, msg string) []byte {
	if s.has(ShapeErrorMessageOnly) {
		return mustJSON(map[string]string{"message": msg})
	}
	return mustJSON(map[string]string{"code": code, "message": msg})
}

// reshapeError rewrites a wire.Error body in the server's shapes.
func (s *Server) reshapeError(body []byte) []byte {
	if !s.has(ShapeErrorMessageOnly) {
		return body
	}
	var e struct{ Code, Message string }
	if json.Unmarshal(body, &e) != nil {
		return body
	}
	return s.errorBody(e.Code, e.Message)
}

// gatewayBody is an intermediary's page: HTML, or JSON with a code of its
// own (ShapeGatewayJSON), as API gateways answer.
func (s *Server) gatewayBody(status int) (contentType string, body []byte) {
	text := http.StatusText(status)
	if s.has(ShapeGatewayJSON) {
		switch status {
		case http.StatusGatewayTimeout: // Kong / AWS style: a top-level code of the gateway's own
			return "application/json", mustJSON(map[string]any{"code": "GATEWAY_TIMEOUT", "message": "The upstream server is timing out"})
		case http.StatusServiceUnavailable: // Envoy style
			return "application/json", mustJSON(map[string]any{"code": "SERVICE_UNAVAILABLE", "message": "upstream connect error or disconnect/reset before headers"})
		}
		// Google style: the code nested, as a number.
		return "application/json", mustJSON(map[string]any{"error": map[string]any{"code": status, "message": text, "status": "UNAVAILABLE"}})
	}
	return "text/html; charset=utf-8", fmt.Appendf(nil,
		"<html>\r\n<head><title>%d %s</title></head>\r\n<body>\r\n<center><h1>%d %s</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n",
		status, text, status, text)
}
