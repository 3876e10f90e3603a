package pagpolar

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// Paging the SDK does not see.
//
// A Laravel + league/fractal API pages every list as
//
//	{"data": [...], "meta": {"pagination": {"total", "count", "per_page",
//	 "current_page", "total_pages", "links": {"next": ...}}}}
//
// wire.markers looks one level into "meta" only; the member "pagination"
// is neither a known marker nor looksLikePaging ("pagination" does not
// contain "page"), so the first page is read as the whole list. The
// operation's own sale, on page 2, is "not found"; the not-found is
// trusted and the charge resent: two sales.
//
// The same happens with a bare JSON array whose paging is only in
// headers (X-Total-Count), and with Portuguese markers ("paginacao",
// "proxima_pagina") that contain none of pagingWords.
func TestLookup_UnreadPagingNeverProvesNotFound(t *testing.T) {
	t.Parallel()
	styles := []string{"fractal-meta-pagination", "bare-array-x-total-count", "portuguese-markers"}
	for _, style := range styles {
		t.Run(style, func(t *testing.T) {
			f := newFixture(t, nil)
			proxy := bodyProxy(t, f, func(r *http.Request, status int, h http.Header, body []byte) []byte {
				if status != 200 || !isGet(r, "/sales") {
					return body
				}
				return pageSales(r, h, body, style)
			})
			c := f.client(t, WithStore(f.store), WithBaseURL(proxy))
			ref := "order-fractal"
			// Three earlier boleto sales of the order: the PIX sale lands on page 2.
			for i := range 3 {
				if _, err := c.Payments.Boleto(f.ctx, BoletoParams{OperationID: fmt.Sprintf("b%d", i), OfferID: "offer-basic", ExternalReference: ref, Customer: goodCustomer}); err != nil {
					t.Fatal(err)
				}
			}
			f.srv.Clock.Advance(5 * time.Second)
			f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThen500, Times: 1})
			ch, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: ref, Customer: goodCustomer})
			id := ""
			if ch != nil {
				id = ch.Sale.ID
			}
			report(t, f, c, "pix:"+ref, id, err)
		})
	}
}

// pageSales re-pages the fake's full sale list, two items a page, in style.
func pageSales(r *http.Request, h http.Header, body []byte, style string) []byte {
	var list struct {
		Data []json.RawMessage `json:"data"`
	}
	if json.Unmarshal(body, &list) != nil {
		return body
	}
	const per = 2
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	if page < 1 {
		page = 1
	}
	total := len(list.Data)
	pages := max((total+per-1)/per, 1)
	from := min((page-1)*per, total)
	to := min(from+per, total)
	items := list.Data[from:to]
	if items == nil {
		items = []json.RawMessage{}
	}
	q := r.URL.Query()
	q.Set("page", strconv.Itoa(page+1))
	next := any(nil)
	if page < pages {
		next = r.URL.Path + "?" + q.Encode()
	}
	var out any
	switch style {
	case "fractal-meta-pagination":
		out = map[string]any{"data": items, "meta": map[string]any{"pagination": map[string]any{
			"total": total, "count": len(items), "per_page": per, "current_page": page, "total_pages": pages,
			"links": map[string]any{"next": next},
		}}}
	case "bare-array-x-total-count":
		h.Set("X-Total-Count", strconv.Itoa(total))
		h.Set("X-Per-Page", strconv.Itoa(per))
		out = items
	case "portuguese-markers":
		out = map[string]any{"data": items, "paginacao": map[string]any{"pagina_atual": page, "ultima_pagina": pages, "proxima_pagina": next}}
	}
	b, _ := json.Marshal(out)
	return b
}

// A sale list that pages: only page 1 was read, so the operation's sale
// on page 2 was "not found". Two sales.
func TestLookup_ReadsEveryPage(t *testing.T) {
	for _, shape := range []pagpolartest.Shape{pagpolartest.ShapePagedCursor, pagpolartest.ShapePagedLink, pagpolartest.ShapePagedPages} {
		t.Run(string(shape), func(t *testing.T) {
			f := newFixture(t, []pagpolartest.Option{pagpolartest.WithShapes(shape)})
			// Three earlier boleto sales under the order put ours on page 2.
			for _, op := range []string{"b1", "b2", "b3"} {
				if _, err := f.c.Payments.Boleto(f.ctx, BoletoParams{OperationID: op, OfferID: "offer-basic", ExternalReference: "order-page", Customer: goodCustomer}); err != nil {
					t.Fatal(err)
				}
			}
			f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThen500, Times: 1})
			if _, err := f.c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-page", Customer: goodCustomer}); err != nil {
				t.Fatal(err)
			}
			for g, effs := range f.srv.Ledger().Duplicates(pagpolartest.DefaultGroup) {
				if len(effs) > 1 && effs[0].Method == "pix" {
					t.Fatalf("%s: %d PIX sales", g, len(effs))
				}
			}
		})
	}
}

// A lookup observes the API when it is sent. One sent before the moment a
// not-found becomes conclusive, and answered after it (a slow read), was
// taken for conclusive: the sale, still lagging when the list was read,
// was "not found" and charged again.
func TestLookup_SentBeforeTheTrustMomentIsNotConclusive(t *testing.T) {
	f := newFixture(t, nil)
	u, _ := url.Parse(f.srv.URL)
	rp := httputil.NewSingleHostReverseProxy(u)
	var slow atomic.Bool
	slow.Store(true)
	rp.ModifyResponse = func(r *http.Response) error {
		if r.Request.Method == http.MethodGet && strings.HasSuffix(r.Request.URL.Path, "/sales") && slow.CompareAndSwap(true, false) {
			time.Sleep(3 * testPolicy().SettleDelay) // the list was read already; its answer is late
		}
		return nil
	}
	ps := httptest.NewServer(rp)
	t.Cleanup(ps.Close)
	c := f.client(t, WithStore(f.store), WithBaseURL(ps.URL))
	// Warm the client's view of the API's clock, so no snapshot precedes the send.
	if _, err := c.Payments.SalesByExternalReference(f.ctx, "warm-up"); err != nil {
		t.Fatal(err)
	}
	slow.Store(true)
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThen500, LookupLag: 2 * testPolicy().SettleDelay / 3, Times: 1})
	if _, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-slowread", Customer: goodCustomer}); err != nil {
		t.Fatal(err)
	}
	if n := f.successful("sale"); n != 1 {
		t.Fatalf("%d sales, want 1", n)
	}
}

// A cache between the SDK and the API (a CDN rule caching GETs) answers
// the lookup with the list as it was before the charge: "not found" on a
// stale read. A cache that honours the request's no-cache must be told to
// revalidate; one that does not, but says it served the answer (Age),
// must not be read as the API's current list.
func TestLookup_CachedListIsNotCurrent(t *testing.T) {
	for _, honours := range []bool{true, false} {
		for _, warm := range []bool{false, true} {
			t.Run(fmt.Sprintf("honours-no-cache=%v/warm=%v", honours, warm), func(t *testing.T) {
				t.Parallel()
				f := newFixture(t, nil)
				u, _ := url.Parse(f.srv.URL)
				rp := httputil.NewSingleHostReverseProxy(u)
				rp.ErrorLog = log.New(io.Discard, "", 0)
				type entry struct {
					status int
					h      http.Header
					body   []byte
					at     time.Time
				}
				var mu sync.Mutex
				cache := map[string]entry{}
				gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Method != http.MethodGet || honours && strings.Contains(r.Header.Get("Cache-Control"), "no-cache") {
						rp.ServeHTTP(w, r)
						return
					}
					mu.Lock()
					e, hit := cache[r.URL.String()]
					mu.Unlock()
					if !hit {
						rec := httptest.NewRecorder()
						rp.ServeHTTP(rec, r)
						e = entry{rec.Code, rec.Header().Clone(), rec.Body.Bytes(), time.Now()}
						mu.Lock()
						cache[r.URL.String()] = e
						mu.Unlock()
						maps.Copy(w.Header(), e.h)
						w.WriteHeader(e.status)
						_, _ = w.Write(e.body)
						return
					}
					maps.Copy(w.Header(), e.h)
					w.Header().Set("Age", strconv.Itoa(int(time.Since(e.at)/time.Second)))
					w.WriteHeader(e.status)
					_, _ = w.Write(e.body)
				}))
				t.Cleanup(gw.Close)
				c := proxiedClient(t, f, gw.URL)
				if warm {
					warmClock(f, c)
				}
				// The application checks whether the order was paid already.
				if sales, err := c.Payments.SalesByExternalReference(f.ctx, "order-cached"); err != nil || len(sales) != 0 {
					t.Fatalf("setup read: %v %v", sales, err)
				}
				f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitDropRelease, Times: 1})
				ch, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-cached", Customer: goodCustomer})
				id := ""
				if err == nil {
					id = ch.Sale.ID
				}
				report(t, f, c, "pix:order-cached", id, err)
			})
		}
	}
}

// A sale list that ignores its filter (or matches it by prefix) and sales
// that carry no external reference: while an order's charge is ambiguous
// (a gateway's 502 in front of the API: never processed), another order's
// sale for the same offer appears in its lookup. Nothing shows it is under
// this order's reference: it must not be taken for this charge's success.
func TestLookup_SaleWithoutReferenceIsNotOurs(t *testing.T) {
	f := newFixture(t, nil)
	refs := []string{"order-fa", "order-fb"}
	base := answerProxy(t, f, func(req *http.Request, resp *http.Response, body []byte) []byte {
		strip := func(b []byte) []byte {
			return editObjects(b, func(m map[string]any) { delete(m, "external_reference") })
		}
		if isPost(req, "/payments/pix") && resp.StatusCode < 300 {
			return strip(body)
		}
		if !isGet(req, "/sales") || resp.StatusCode != 200 {
			return body
		}
		var all []json.RawMessage
		for _, ref := range refs {
			u := f.srv.URL + "/sales?" + url.Values{"external_reference": {ref}}.Encode()
			r2, _ := http.NewRequest(http.MethodGet, u, nil)
			r2.Header = req.Header.Clone()
			resp2, err := http.DefaultClient.Do(r2)
			if err != nil {
				continue
			}
			var l struct{ Data []json.RawMessage }
			_ = json.NewDecoder(resp2.Body).Decode(&l)
			resp2.Body.Close()
			all = append(all, l.Data...)
		}
		return strip(mustMarshal(map[string]any{"data": all}))
	})
	c := proxiedClient(t, f, base)
	warmClock(f, c)
	f.srv.Inject(pagpolartest.Fault{Route: "pix", ExternalReference: "order-fa", Action: pagpolartest.FaultGateway, Status: 502, Times: 1})
	type out struct {
		id  string
		err error
	}
	done := make(chan out, 1)
	go func() {
		ch, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-fa", Customer: goodCustomer})
		if err != nil {
			done <- out{"", err}
			return
		}
		done <- out{ch.Sale.ID, nil}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for f.posts("pix") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first charge was never sent")
		}
		time.Sleep(time.Millisecond)
	}
	other := f.client(t, WithStore(f.store))
	if _, err := other.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-fb", Customer: goodCustomer}); err != nil {
		t.Fatal(err)
	}
	a := <-done
	report(t, f, c, "pix:order-fa", a.id, a.err)
}

// A CDN that writes Age on every answer (Varnish, Fastly: "Age: 0" on a
// miss or pass).
func TestLookup_AgeZeroOnEveryAnswerIsNotACachedCopy(t *testing.T) {
	f := newFixture(t, nil)
	base := answerProxy(t, f, func(req *http.Request, resp *http.Response, body []byte) []byte {
		resp.Header.Set("Age", "0")
		return body
	})
	c := proxiedClient(t, f, base)
	sale, err := c.Payments.CreditCard(f.ctx, CreditCardParams{OfferID: "offer-premium", ExternalReference: "order-age", Customer: goodCustomer, CardToken: "tok_ok"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Refunds.Create(f.ctx, RefundParams{OperationID: "rf-age", SaleID: sale.Sale.ID, Amount: 500})
	t.Logf("refund behind Age: 0: %v", err)
	if err != nil {
		t.Errorf("refund refused behind a CDN writing Age: 0: %v", err)
	}
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThenDrop, Times: 1})
	_, err = c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-age-2", Customer: goodCustomer})
	t.Logf("lost answer behind Age: 0: %v", err)
	if err != nil {
		t.Errorf("lost answer not settled behind Age: 0: %v", err)
	}
}

// An honest shared cache in front of the API: it stores the first answer
// to the sale lookup (made right after the API's 500, while a read replica
// still lags) and serves it with its true Age (0, then 1) over a slow link
// (1.5 s per body). servedByCache measures the copy's age from when the
// answer was *read*, not from when the lookup was *sent*, so the copy, made
// before the trust moment and missing the sale, passes as fresh: a trusted
// not-found, and the resend charges again (the key was released).
func TestLookup_CachedCopyAgeCountsFromTheSend(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	u, _ := url.Parse(f.srv.URL)
	rp := httputil.NewSingleHostReverseProxy(u)
	var (
		mu     sync.Mutex
		have   bool
		copyAt time.Time
		hdr    http.Header
		body   []byte
		status int
		posted bool
	)
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			rp.ServeHTTP(w, r)
			mu.Lock()
			posted = true
			mu.Unlock()
			return
		}
		mu.Lock()
		armed := posted
		mu.Unlock()
		if !armed || r.Method != http.MethodGet || r.URL.Path != "/sales" || r.URL.Query().Get("external_reference") != "order-rev4" {
			rp.ServeHTTP(w, r)
			return
		}
		mu.Lock()
		if !have {
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r)
			have, copyAt, hdr, body, status = true, time.Now(), rec.Header().Clone(), rec.Body.Bytes(), rec.Code
		}
		h, b, st, age := hdr, body, status, time.Since(copyAt)
		mu.Unlock()
		for k, v := range h {
			w.Header()[k] = v
		}
		w.Header().Set("Age", strconv.Itoa(int(age/time.Second)))
		w.WriteHeader(st)
		w.(http.Flusher).Flush()
		time.Sleep(1500 * time.Millisecond) // slow link
		_, _ = w.Write(b)
	}))
	t.Cleanup(gw.Close)
	c := proxiedClient(t, f, gw.URL)
	f.srv.Inject(pagpolartest.Fault{Route: "pix", ExternalReference: "order-rev4", Action: pagpolartest.FaultCommitThen500, LookupLag: 40 * time.Millisecond, Times: 1})
	ch, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-rev4", Customer: goodCustomer})
	id := ""
	if err == nil {
		id = ch.Sale.ID
	}
	t.Logf("err=%v posts=%d", err, f.posts("pix"))
	f.assertNoDuplicates(t)
	_ = id
}

// Two Age fields (a CDN in front of a shield cache, each adding its own):
// only the first is read.
func TestLookup_EveryAgeFieldIsRead(t *testing.T) {
	now := time.Now()
	h := http.Header{"Age": {"0", "600"}}
	if _, cached := servedByCache(h, now, now.Add(-time.Hour)); !cached {
		t.Errorf("Age: 0, Age: 600 passes as a fresh read")
	}
}

// An API that ignores the page asked for (and echoes it) answers page 1
// again for page 2; an item with a field that changes on every read (a
// countdown, a signed link) makes the repeat differ in bytes. A page of
// nothing but identifiers already seen is no news of the list, whatever
// changed: the read is not complete, so it never proves a sale absent that
// the page asked for would have held.
func TestLookup_IgnoredPagingWithChangingItemsIsNotComplete(t *testing.T) {
	var reads atomic.Int64
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page := r.URL.Query().Get("page")
		if page == "" {
			page = "1"
		}
		n := reads.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Date", time.Now().UTC().Format(http.TimeFormat))
		fmt.Fprintf(w, `{"data":[{"identifier":"sale_other","external_reference":"order-ign","status":"paid","expires_in":%d}],"page":%s,"total_pages":3}`, 1000-n, page)
	}))
	t.Cleanup(api.Close)
	c, err := NewClient("cred_1", StaticToken("tok"), WithBaseURL(api.URL), WithStore(keystore.NewMemory()), WithRetryPolicy(testPolicy()), WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	items, complete, why, _, err := c.readListAt(context.Background(), wire.RouteSales, url.Values{"external_reference": {"order-ign"}}, 1, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if complete {
		t.Fatalf("read %d items over %d reads as the whole list; want incomplete (the page asked for was never answered)", len(items), reads.Load())
	}
	t.Logf("incomplete: %s", why)
}
