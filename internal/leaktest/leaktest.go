package leaktest

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"strings"
	"sync"
)

// Foreign personal data the gateway adds to every answer, beside what the
// request carried: an e-mail and a CPF the request never held, so that
// only pattern-based scrubbing can remove them.
const (
	ForeignEmail = "joana.prado@example.org"
	ForeignCPF   = "529.982.247-25"
)

// Statuses every error body is tried with.
var Statuses = []int{400, 401, 402, 404, 409, 429, 500, 502, 503}

// Gateway answers every request with Status, echoing the bearer token it
// received (plain, JSON-escaped and URL-escaped), the request's e-mail,
// document and name values, and the foreign e-mail and CPF, in an HTML page
// or in the API's JSON error shape.
type Gateway struct {
	Status int
	HTML   bool
	// PassLookups answers list lookups (a GET with a query) with an empty
	// list, so that money requests get past the SDK's snapshot lookup and
	// meet Status on the send itself. Other GETs still get Status.
	PassLookups bool

	mu     sync.Mutex
	tokens []string // every token received, in order
	seen   []string // every personal value received
}

// Sent returns the tokens and the personal values the gateway received:
// what must never come out again.
func (g *Gateway) Sent() (tokens, personal []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.tokens...), append([]string(nil), g.seen...)
}

// codes is an API error code the SDK knows for each status, so the JSON
// body reads as the API's own.
var codes = map[int]string{400: "validation_error", 401: "unauthorized", 402: "declined", 404: "not_found",
	409: "idempotency_in_progress", 429: "rate_limited", 500: "internal_error", 502: "internal_error", 503: "service_unavailable"}

func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tok := strings.TrimSpace(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var personal []string
	collect(body, &personal)
	g.mu.Lock()
	if tok != "" {
		g.tokens = append(g.tokens, tok)
	}
	g.seen = append(g.seen, personal...)
	g.mu.Unlock()

	if g.PassLookups && r.Method == http.MethodGet && r.URL.RawQuery != "" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"data":[]}`))
		return
	}
	echo := fmt.Sprintf("invalid token %s (Bearer%s) token=%s; customer %s; also %s cpf %s digits %s",
		tok, tok, urlEscape(tok), strings.Join(personal, ", "), ForeignEmail, ForeignCPF, digitsOnly(ForeignCPF))
	if g.Status == 429 || g.Status == 503 {
		w.Header().Set("Retry-After", "0")
	}
	if g.HTML {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(g.Status)
		fmt.Fprintf(w, "<html><body><h1>%d</h1><p>%s</p><!-- %s --></body></html>", g.Status, html.EscapeString(echo), echo)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(g.Status)
	code := codes[g.Status]
	msg := echo
	if g.Status == 409 {
		// The documented 409 message is matched by equality; the echo goes
		// into another member, which a lenient reader may still pick up.
		msg = "Uma requisição com essa chave de idempotência ainda está em processamento."
	}
	b, _ := json.Marshal(map[string]any{"code": code, "message": msg, "detail": echo, "token": tok,
		"error": map[string]any{"code": code, "message": echo}})
	// Also "/" escaped the way some encoders do.
	_, _ = w.Write([]byte(strings.ReplaceAll(string(b), "/", `\/`)))
}

// collect gathers every string under a key naming personal data.
func collect(body []byte, out *[]string) {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				if s, ok := c.(string); ok && personalKey(k) && s != "" {
					*out = append(*out, s)
					continue
				}
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(v)
}

func personalKey(k string) bool {
	switch strings.ToLower(k) {
	case "email", "document", "name", "phone", "card_token", "token":
		return true
	}
	return false
}

func urlEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func digitsOnly(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Find reports which of secrets appear in b, in any of the forms an echo
// takes (as is, JSON-escaped, URL-escaped, HTML-escaped; a document also
// as its digits alone). A secret shorter than 6 bytes is not looked for.
func Find(b []byte, secrets ...string) []string {
	s := string(b)
	var found []string
	for _, sec := range secrets {
		if len(sec) < 6 {
			continue
		}
		forms := []string{sec, urlEscape(sec), html.EscapeString(sec), strings.ReplaceAll(sec, "/", `\/`)}
		if j, err := json.Marshal(sec); err == nil {
			forms = append(forms, string(j[1:len(j)-1]))
		}
		if d := digitsOnly(sec); len(d) >= 11 && len(strings.Map(keepDocChars, sec)) == len(sec) {
			forms = append(forms, d)
		}
		for _, f := range forms {
			if strings.Contains(s, f) {
				found = append(found, sec)
				break
			}
		}
	}
	return found
}

// keepDocChars keeps the characters a formatted document is made of.
func keepDocChars(r rune) rune {
	if r >= '0' && r <= '9' || r == '.' || r == '-' || r == '/' {
		return r
	}
	return -1
}
