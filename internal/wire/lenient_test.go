package wire

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"
)

func TestStrAliasesAndStates(t *testing.T) {
	cases := []struct {
		name, body string
		names      []string
		want       string
		st         FieldState
	}{
		{"first alias", `{"identifier":"s1","id":"x"}`, namesID, "s1", Read},
		{"second alias", `{"id":"s1"}`, namesID, "s1", Read},
		{"number id", `{"id":123}`, namesID, "123", Read},
		{"absent", `{}`, namesID, "", Absent},
		{"null", `{"identifier":null}`, namesID, "", Absent},
		{"empty string", `{"identifier":""}`, namesID, "", Absent},
		{"object falls through to dotted alias", `{"offer":{"identifier":"o1"}}`, namesOffer, "o1", Read},
		{"object without a dotted match", `{"offer":{"name":"x"}}`, namesOffer, "", Absent},
		{"bool is unreadable", `{"status":true}`, namesStatus, "", Unreadable},
		{"array is unreadable", `{"payment_method":["pix"]}`, namesPaymentMethod, "", Unreadable},
		{"camelCase", `{"externalReference":"r"}`, namesExternalReference, "r", Read},
		{"reference is not an alias", `{"reference":"API-123"}`, namesExternalReference, "", Absent},
	}
	for _, c := range cases {
		o, err := ParseObject([]byte(c.body))
		if err != nil {
			t.Fatal(err)
		}
		v, st := o.Str(c.names)
		if v != c.want || st != c.st {
			t.Errorf("%s: got %q %v, want %q %v", c.name, v, st, c.want, c.st)
		}
	}
}

func TestAmountReadings(t *testing.T) {
	cases := []struct {
		body   string
		st     FieldState
		has    []int64 // readings that must be present
		hasNot []int64
	}{
		{`{"amount":1500}`, Read, []int64{1500, 150000}, nil},
		{`{"amount":15.5}`, Read, []int64{1550}, []int64{15}},
		{`{"amount":99.90}`, Read, []int64{9990}, nil},
		{`{"amount":1500.0}`, Read, []int64{1500, 150000}, nil}, // a float column of centavos
		{`{"amount":"99,90"}`, Read, []int64{9990}, nil},
		{`{"amount":"R$ 1.234,56"}`, Read, []int64{123456}, nil},
		{`{"amount":"15.000"}`, Read, []int64{1500, 1500000}, nil}, // fifteen, or fifteen thousand
		{`{"amount":"abc"}`, Unreadable, nil, nil},
		{`{"amount":-5}`, Unreadable, nil, nil},
		{`{"amount":0.001}`, Unreadable, nil, nil},
		{`{}`, Absent, nil, nil},
		{`{"value":700}`, Read, []int64{700}, nil},
		{`{"total":700}`, Absent, nil, nil}, // a sale's total is not a refund's amount
	}
	for _, c := range cases {
		o, _ := ParseObject([]byte(c.body))
		a := o.Amount(namesAmount)
		if a.State != c.st {
			t.Errorf("%s: state %v, want %v", c.body, a.State, c.st)
		}
		for _, h := range c.has {
			if !a.Matches(h) {
				t.Errorf("%s: readings %v lack %d", c.body, a.Readings(), h)
			}
		}
		for _, h := range c.hasNot {
			if a.Matches(h) {
				t.Errorf("%s: readings %v must not include %d", c.body, a.Readings(), h)
			}
		}
	}
}

func TestParseTime(t *testing.T) {
	base := time.Date(2026, 12, 1, 12, 30, 45, 0, time.UTC)
	cases := []struct {
		v   string
		st  FieldState
		at  time.Time
		res time.Duration
	}{
		{`"2026-12-01T12:30:45.123456789Z"`, Read, base.Add(123456789), time.Nanosecond},
		{`"2026-12-01T12:30:45.123Z"`, Read, base.Add(123 * time.Millisecond), time.Millisecond},
		{`"2026-12-01T12:30:45Z"`, Read, base, time.Second},
		{`"2026-12-01T09:30:45-03:00"`, Read, base, time.Second},
		{`"2026-12-01T09:30:45.5-0300"`, Read, base.Add(500 * time.Millisecond), 100 * time.Millisecond},
		{`"2026-12-01 12:30:45Z"`, Read, base, time.Second},
		{`"Tue, 01 Dec 2026 12:30:45 GMT"`, Read, base, time.Second},
		{`1796128245`, Read, base, time.Second},
		{`1796128245000`, Read, base, time.Millisecond},
		{`"2026-12-01T12:30:45"`, Unreadable, time.Time{}, 0}, // no zone: UTC or São Paulo?
		{`"yesterday"`, Unreadable, time.Time{}, 0},
		{`null`, Absent, time.Time{}, 0},
		{`""`, Absent, time.Time{}, 0},
	}
	for _, c := range cases {
		at, res, st := ParseTime(json.RawMessage(c.v))
		if st != c.st || (st == Read && (!at.Equal(c.at) || res != c.res)) {
			t.Errorf("%s: got %v %v %v, want %v %v %v", c.v, at, res, st, c.at, c.res, c.st)
		}
	}
}

func TestMethodsAndFamilies(t *testing.T) {
	for raw, want := range map[string]string{"pix": MethodPix, "PIX": MethodPix, "credit-card": MethodCreditCard, "CREDIT_CARD": MethodCreditCard,
		"card": MethodCreditCard, "Cartão de Crédito": MethodCreditCard, "bank slip": MethodBoleto, "debit_card": "debit_card"} {
		if m, ok := CanonicalMethod(raw); !ok || m != want {
			t.Errorf("%q: %q %v, want %q", raw, m, ok, want)
		}
	}
	if _, ok := CanonicalMethod("online"); ok {
		t.Error("an unknown spelling must not be recognised")
	}
	if MethodFamily("debit_card") != MethodFamily(MethodCreditCard) || MethodFamily(MethodPix) == MethodFamily(MethodBoleto) {
		t.Error("families")
	}
}

func TestStatusTables(t *testing.T) {
	cases := []struct {
		table map[string]StatusClass
		s     string
		want  StatusClass
	}{
		{SaleStatuses, "paid", StatusCreated}, {SaleStatuses, "PENDING", StatusCreated}, {SaleStatuses, "declined", StatusRefused},
		{SaleStatuses, "in_analysis", StatusUnknown}, {SaleStatuses, "processing", StatusUnknown},
		{RefundStatuses, "completed", StatusCreated}, {RefundStatuses, "failed", StatusRefused}, {RefundStatuses, "requested", StatusUnknown},
		{PlanChangeStatuses, "applied", StatusCreated}, {PlanChangeStatuses, "rejected", StatusRefused}, {PlanChangeStatuses, "scheduled", StatusUnknown},
		{SubscriptionStatuses, "active", StatusCreated}, {SubscriptionStatuses, "failed", StatusUnknown}, // may still be retrying
	}
	for _, c := range cases {
		if got := ClassifyStatus(c.table, c.s); got != c.want {
			t.Errorf("%q: %v, want %v", c.s, got, c.want)
		}
	}
}

func TestAPIErrorRecognisesOnlyTheAPIsOwnBody(t *testing.T) {
	cases := []struct {
		ct, body string
		own      bool
		code     string
	}{
		{"application/json", `{"code":"internal_error","message":"x"}`, true, "internal_error"},
		{"application/json", `{"code":"GATEWAY_TIMEOUT","message":"x"}`, false, "GATEWAY_TIMEOUT"},
		{"application/json", `{"code":504,"message":"Gateway Timeout"}`, false, ""},
		{"application/json", `{"error":{"code":502,"message":"Bad Gateway"}}`, false, ""},
		{"application/json", `{"message":"Internal server error"}`, false, ""},
		{"application/json", `{"message":"` + MsgInProgress + `"}`, true, ""},
		{"text/html", `<html>502</html>`, false, ""},
		{"text/html", `{"code":"internal_error"}`, false, "internal_error"}, // not served as JSON
	}
	for _, c := range cases {
		code, _, own := APIError(c.ct, []byte(c.body))
		if own != c.own || code != c.code {
			t.Errorf("%s %s: code %q own %v, want %q %v", c.ct, c.body, code, own, c.code, c.own)
		}
	}
}

func TestParseList(t *testing.T) {
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Set(kv[i], kv[i+1])
		}
		return out
	}
	type want struct {
		n       int
		done    bool
		url     string
		query   string // k=v
		problem bool
	}
	cases := []struct {
		name   string
		body   string
		header http.Header
		want   want
	}{
		{"today", `{"data":[{"identifier":"a"}]}`, nil, want{n: 1, done: true}},
		{"bare array", `[{"id":"a"},{"id":"b"}]`, nil, want{n: 2, done: true}},
		{"items", `{"items":[{"id":"a"}]}`, nil, want{n: 1, done: true}},
		{"no list member", `{"sale":{"id":"a"}}`, nil, want{}},
		{"cursor", `{"data":[{"id":"a"}],"has_more":true,"next_cursor":"c2"}`, nil, want{n: 1, query: "cursor=c2"}},
		{"cursor done", `{"data":[{"id":"a"}],"has_more":false,"next_cursor":null}`, nil, want{n: 1, done: true}},
		{"has_more without cursor", `{"data":[{"id":"a"}],"has_more":true}`, nil, want{n: 1, problem: true}},
		{"pages", `{"data":[{"id":"a"}],"page":1,"total_pages":3}`, nil, want{n: 1, query: "page=2"}},
		{"last page", `{"data":[{"id":"a"}],"page":3,"total_pages":3}`, nil, want{n: 1, done: true}},
		{"page alone", `{"data":[{"id":"a"}],"page":1}`, nil, want{n: 1, problem: true}},
		{"next url", `{"data":[{"id":"a"}],"next":"/v1/sales?after=a"}`, nil, want{n: 1, url: "/v1/sales?after=a"}},
		{"next href object", `{"data":[{"id":"a"}],"_links":{"next":{"href":"/v1/sales?p=2"}}}`, nil, want{n: 1, url: "/v1/sales?p=2"}},
		{"rel next array", `{"data":[{"id":"a"}],"links":[{"rel":"self","href":"/x"},{"rel":"next","href":"/v1/sales?p=2"}]}`, nil, want{n: 1, url: "/v1/sales?p=2"}},
		{"link header", `{"data":[{"id":"a"}]}`, h("Link", `</v1/sales?page=2>; rel="next"`), want{n: 1, url: "/v1/sales?page=2"}},
		{"total more than returned", `{"data":[{"id":"a"}],"total":5}`, nil, want{n: 1, problem: true}},
		{"total matches", `{"data":[{"id":"a"}],"total":1}`, nil, want{n: 1, done: true}},
		{"full page with limit", `{"data":[{"id":"a"},{"id":"b"}],"limit":2}`, nil, want{n: 2, problem: true}},
		{"short page with limit", `{"data":[{"id":"a"}],"limit":2}`, nil, want{n: 1, done: true}},
		{"nested fractal pagination", `{"data":[{"id":"a"}],"meta":{"pagination":{"total":4,"count":1,"links":{"next":"/v1/sales?page=2"}}}}`, nil, want{n: 1, url: "/v1/sales?page=2"}},
		{"portuguese markers", `{"data":[{"id":"a"}],"paginacao":{"pagina_atual":1,"proxima_pagina":2}}`, nil, want{n: 1, problem: true}},
		{"unknown member", `{"data":[{"id":"a"}],"continuation":"xyz"}`, nil, want{n: 1, problem: true}},
		{"x-total-count", `[{"id":"a"}]`, h("X-Total-Count", "3"), want{n: 1, problem: true}},
		{"x-total-count matches", `[{"id":"a"}]`, h("X-Total-Count", "1"), want{n: 1, done: true}},
		{"x-per-page unknown", `{"data":[{"id":"a"}]}`, h("X-Per-Page", "20"), want{n: 1, problem: true}},
		{"rate-limit headers are not paging", `{"data":[{"id":"a"}]}`, h("X-RateLimit-Limit", "100", "X-RateLimit-Remaining", "99"), want{n: 1, done: true}},
		{"stripe-like", `{"object":"list","url":"/v1/sales","has_more":false,"data":[{"id":"a"}]}`, nil, want{n: 1, done: true}},
	}
	for _, c := range cases {
		page, err := ParseList([]byte(c.body), c.header)
		if c.want == (want{}) {
			if err == nil {
				t.Errorf("%s: want an error, got %+v", c.name, page)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		n := page.Next
		q := ""
		for k, v := range n.Query {
			q = k + "=" + v[0]
		}
		got := want{n: len(page.Items), done: n.Done, url: n.URL, query: q, problem: n.Problem != ""}
		if got != c.want {
			t.Errorf("%s: got %+v (problem %q), want %+v", c.name, got, n.Problem, c.want)
		}
		if got.done && (got.problem || got.url != "" || got.query != "") || !slices.Contains([]bool{true}, got.done || got.problem || got.url != "" || got.query != "") {
			t.Errorf("%s: a page must say exactly one thing about what follows: %+v", c.name, got)
		}
	}
}
