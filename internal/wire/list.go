package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// The list shape is ASSUMED ({"data": [...]}, no paging). A real list may
// page. ParseList reads one page and says how to read the next one, or that
// there may be more that it cannot tell how to read: a list is never taken
// for complete on a guess.

// ListPage is one page of a list answer.
type ListPage struct {
	Items []json.RawMessage
	Next  NextPage
}

// NextPage says what follows a page.
type NextPage struct {
	Done    bool       // nothing follows
	URL     string     // the next page's URL (absolute, or relative to the page's)
	Query   url.Values // or: the same route with these query parameters set
	Problem string     // or: more may follow and the SDK cannot tell how to read it
}

// Paging markers the SDK follows, by role. ASSUMED spellings.
var (
	pagingHasMore    = []string{"has_more", "hasMore", "more", "has_next", "hasNext", "has_next_page", "hasNextPage"}
	pagingNextURL    = []string{"next", "next_page_url", "nextPageUrl", "next_url", "nextUrl", "next_link", "nextLink", "next_page"}
	pagingTotalPages = []string{"total_pages", "totalPages", "last_page", "lastPage", "pages", "page_count", "pageCount"}
	pagingPage       = []string{"page", "current_page", "currentPage", "page_number", "pageNumber"}
	pagingTotal      = []string{"total", "total_count", "totalCount", "count", "total_items", "totalItems", "total_results"}
	pagingLimit      = []string{"limit", "per_page", "perPage", "page_size", "pageSize"}
	pagingOffset     = []string{"offset", "skip", "start"}
	// cursor marker → the query parameter that carries it back.
	pagingCursor = []struct{ marker, param string }{
		{"next_cursor", "cursor"}, {"nextCursor", "cursor"}, {"cursor_next", "cursor"},
		{"next_page_token", "page_token"}, {"nextPageToken", "pageToken"},
		{"continuation_token", "continuation_token"}, {"continuationToken", "continuationToken"},
		{"end_cursor", "after"}, {"endCursor", "after"},
	}
	// words that make an unknown member (at any depth, or an X- response
	// header) look like a paging marker: English and Portuguese.
	pagingWords = []string{"page", "pagin", "pagina", "página", "cursor", "next", "more", "offset", "continu", "total",
		"limit", "token", "after", "skip", "proxim", "próxim", "mais", "count"}
	// words that make an X- response header look like paging (narrower:
	// X-RateLimit-Limit or X-Total-Time are not).
	headerWords = []string{"page", "pagin", "pagina", "cursor", "next", "more", "offset", "continu", "total-count", "totalcount", "proxim"}
	// response headers that carry paging, by role.
	headerTotal   = []string{"X-Total-Count", "X-Total"}
	headerNextURL = []string{"X-Next-Page-Url", "X-Next"}
	headerHasMore = []string{"X-Has-More"}
)

// ParseList reads one page of a list answer: a JSON array, or an object
// holding the items under one of ListItems, with paging markers at its top
// level, in one of pagingHolders, or in a Link header (rel="next").
func ParseList(body []byte, header http.Header) (ListPage, error) {
	b := bytes.TrimSpace(body)
	var page ListPage
	if len(b) > 0 && b[0] == '[' {
		if err := json.Unmarshal(b, &page.Items); err != nil {
			return ListPage{}, fmt.Errorf("wire: list: %w", err)
		}
		page.Next = decideNext(Object{}, nil, len(page.Items), header)
		return page, nil
	}
	o, err := ParseObject(b)
	if err != nil {
		return ListPage{}, fmt.Errorf("wire: list: %w", err)
	}
	itemsKey := ""
	for _, k := range ListItems {
		if v, ok := o.Get(k); ok && len(bytes.TrimSpace(v)) > 0 && bytes.TrimSpace(v)[0] == '[' {
			if err := json.Unmarshal(v, &page.Items); err != nil {
				return ListPage{}, fmt.Errorf("wire: list member %q: %w", k, err)
			}
			itemsKey = k
			break
		}
	}
	if itemsKey == "" {
		return ListPage{}, errors.New("wire: list answer holds no array under a known member; refusing to read it as empty")
	}
	page.Next = nextOf(o, itemsKey, len(page.Items), header)
	return page, nil
}

// markers gathers the paging members of a list answer, at any depth
// outside the items: known ones by name (the first of each name found),
// and the names of unknown members that look like paging. An object is a
// container and is searched; only scalars and arrays are judged. A known
// next-link member holding an object ({"href": ...}) is kept whole, and so
// is an array of link objects with rel "next".
func markers(o Object, itemsKey string) (Object, []string) {
	m := Object{}
	var unknown []string
	var walk func(src Object, prefix string, depth int)
	walk = func(src Object, prefix string, depth int) {
		src.Range(func(k string, v json.RawMessage) {
			if depth == 0 && k == itemsKey {
				return
			}
			b := bytes.TrimSpace(v)
			switch {
			case known(k):
				if _, dup := m.Get(k); !dup {
					m.set(k, v)
				}
			case len(b) > 0 && b[0] == '{' && depth < 6:
				if inner, err := ParseObject(v); err == nil {
					walk(inner, prefix+k+".", depth+1)
				}
			case len(b) > 0 && b[0] == '[':
				if next, ok := relNext(v); ok {
					if _, dup := m.Get("next"); !dup {
						nv, _ := json.Marshal(next)
						m.set("next", nv)
					}
				} else if looksLikePaging(k) {
					unknown = append(unknown, prefix+k)
				}
			case looksLikePaging(k):
				unknown = append(unknown, prefix+k)
			}
		})
	}
	walk(o, "", 0)
	return m, unknown
}

// relNext reads an array of link objects ({"rel": "next", "href": ...}).
func relNext(v json.RawMessage) (string, bool) {
	var links []struct {
		Rel  string `json:"rel"`
		Href string `json:"href"`
		URL  string `json:"url"`
	}
	if json.Unmarshal(v, &links) != nil {
		return "", false
	}
	for _, l := range links {
		if strings.EqualFold(l.Rel, "next") && l.Href+l.URL != "" {
			return l.Href + l.URL, true
		}
	}
	return "", false
}

func known(k string) bool {
	for _, set := range [][]string{pagingHasMore, pagingNextURL, pagingTotalPages, pagingPage, pagingTotal, pagingLimit, pagingOffset} {
		if slices.Contains(set, k) {
			return true
		}
	}
	for _, c := range pagingCursor {
		if k == c.marker {
			return true
		}
	}
	return false
}

func looksLikePaging(k string) bool {
	l := strings.ToLower(k)
	for _, w := range pagingWords {
		if strings.Contains(l, w) {
			return true
		}
	}
	return false
}

// headerPaging reads the paging a page's response headers carry: what
// the SDK follows or checks, and the names of X- headers that look like
// paging it does not know.
type headerPaging struct {
	total         int
	hasTotal      bool
	next          string
	more, hasMore bool
	unknown       []string
}

func readHeaderPaging(h http.Header) headerPaging {
	var p headerPaging
	for name := range h {
		canon := http.CanonicalHeaderKey(name)
		switch {
		case slices.Contains(headerTotal, canon):
			n, err := strconv.Atoi(strings.TrimSpace(h.Get(canon)))
			if err != nil || n < 0 {
				p.unknown = append(p.unknown, canon)
				continue
			}
			p.total, p.hasTotal = n, true
		case slices.Contains(headerNextURL, canon):
			p.next = strings.TrimSpace(h.Get(canon))
		case slices.Contains(headerHasMore, canon):
			v := strings.ToLower(strings.TrimSpace(h.Get(canon)))
			p.more, p.hasMore = v == "true" || v == "1", true
		case strings.HasPrefix(canon, "X-") && headerLooksLikePaging(canon):
			p.unknown = append(p.unknown, canon)
		}
	}
	slices.Sort(p.unknown)
	return p
}

func headerLooksLikePaging(name string) bool {
	l := strings.ToLower(name)
	if strings.Contains(l, "ratelimit") || strings.Contains(l, "rate-limit") {
		return false
	}
	for _, w := range headerWords {
		if strings.Contains(l, w) {
			return true
		}
	}
	return false
}

func nextOf(o Object, itemsKey string, n int, header http.Header) NextPage {
	m, unknown := markers(o, itemsKey)
	return decideNext(m, unknown, n, header)
}

// decideNext turns a page's markers (body and headers) into what follows
// it.
func decideNext(m Object, unknown []string, n int, header http.Header) NextPage {
	hp := readHeaderPaging(header)
	unknown = append(unknown, hp.unknown...)
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return NextPage{Problem: fmt.Sprintf("the list carries paging the SDK does not know (%s)", strings.Join(unknown, ", "))}
	}
	if l := linkNext(header); l.URL != "" {
		return l
	}
	if hp.next != "" {
		return NextPage{URL: hp.next}
	}
	if hp.hasMore && hp.more {
		return NextPage{Problem: "the list's X-Has-More says there is more, with no link the SDK can follow"}
	}
	if hp.hasTotal && hp.total > n && m.Len() == 0 {
		return NextPage{Problem: fmt.Sprintf("the list's %s header counts %d items and it returned %d", headerTotal[0], hp.total, n)}
	}
	// A link to the next page, as a URL, a link object or a bare cursor.
	if raw, ok := m.raw(pagingNextURL); ok && len(bytes.TrimSpace(raw)) > 0 && bytes.TrimSpace(raw)[0] == '{' {
		var h struct {
			Href string `json:"href"`
			URL  string `json:"url"`
		}
		if json.Unmarshal(raw, &h) == nil && h.Href+h.URL != "" {
			return NextPage{URL: h.Href + h.URL}
		}
		return NextPage{Problem: "the list's next-page member is an object the SDK does not read"}
	}
	if v, st := m.Str(pagingNextURL); st == Read {
		if strings.ContainsAny(v, "/?") || strings.HasPrefix(v, "http") {
			return NextPage{URL: v}
		}
		return NextPage{Query: url.Values{"cursor": {v}}}
	} else if st == Unreadable {
		// e.g. "next": {"href": "..."}
		var h struct {
			Href string `json:"href"`
			URL  string `json:"url"`
		}
		if raw, ok := m.raw(pagingNextURL); ok && json.Unmarshal(raw, &h) == nil && (h.Href != "" || h.URL != "") {
			return NextPage{URL: h.Href + h.URL}
		}
		return NextPage{Problem: "the list's next-page member is in a form the SDK does not read"}
	}
	for _, c := range pagingCursor {
		if v, st := m.Str([]string{c.marker}); st == Read {
			return NextPage{Query: url.Values{c.param: {v}}}
		} else if st == Unreadable {
			return NextPage{Problem: "the list's cursor " + c.marker + " is in a form the SDK does not read"}
		}
	}
	explicitDone := false
	if v, ok := m.raw(pagingHasMore); ok {
		var more bool
		if json.Unmarshal(v, &more) != nil {
			return NextPage{Problem: "the list's has_more is not a boolean"}
		}
		if more {
			return NextPage{Problem: "the list says it has more, with no cursor or link the SDK can follow"}
		}
		explicitDone = true
	} else if m.Has(pagingNextURL) {
		explicitDone = true // "next": null
	}
	if p, ok := intMember(m, pagingPage); ok {
		if tp, ok := intMember(m, pagingTotalPages); ok {
			if p < tp {
				return NextPage{Query: url.Values{"page": {strconv.Itoa(p + 1)}}}
			}
			explicitDone = true
		}
	}
	if total, ok := intMember(m, pagingTotal); ok {
		off, _ := intMember(m, pagingOffset)
		if total > off+n {
			if explicitDone {
				return NextPage{Problem: fmt.Sprintf("the list says it is complete but counts %d items and returned %d", total, off+n)}
			}
			return NextPage{Problem: fmt.Sprintf("the list counts %d items and returned %d, with no way the SDK knows to read the rest", total, off+n)}
		}
		explicitDone = true
	}
	if m.Has(pagingPage) && !explicitDone && !m.Has(pagingLimit) {
		return NextPage{Problem: "the list is numbered in pages with no page count, limit or has_more"}
	}
	if limit, ok := intMember(m, pagingLimit); ok && !explicitDone && n >= limit {
		return NextPage{Problem: fmt.Sprintf("a full page (%d items, limit %d) with no marker saying it is the last", n, limit)}
	}
	if m.Has(pagingOffset) && !explicitDone && !m.Has(pagingLimit) {
		return NextPage{Problem: "the list has an offset and no total or limit"}
	}
	return NextPage{Done: true}
}

func intMember(o Object, names []string) (int, bool) {
	v, st := o.Str(names)
	if st != Read {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// linkNext reads a Link header's rel="next" target.
func linkNext(h http.Header) NextPage {
	for _, line := range h.Values("Link") {
		for part := range strings.SplitSeq(line, ",") {
			target, params, ok := strings.Cut(strings.TrimSpace(part), ";")
			if !ok {
				continue
			}
			target = strings.TrimSpace(target)
			if !strings.HasPrefix(target, "<") || !strings.HasSuffix(target, ">") {
				continue
			}
			for p := range strings.SplitSeq(params, ";") {
				k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
				if strings.EqualFold(strings.TrimSpace(k), "rel") {
					for rel := range strings.FieldsSeq(strings.Trim(strings.TrimSpace(v), `"`)) {
						if strings.EqualFold(rel, "next") {
							return NextPage{URL: target[1 : len(target)-1]}
						}
					}
				}
			}
		}
	}
	return NextPage{Done: true}
}
