package apicheck

import (
	"encoding/json"
	"html"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// redactor removes from text built from answers (Item.Observed, Path.Detail,
// Created, Notes, progress lines) what the run sent that must not leave it:
// every bearer token sent (read from the requests themselves, so a token
// source that rotates is covered), the card token, and the check's
// customer values; and anything shaped like an e-mail address. Each secret
// is removed as sent, JSON-escaped ("\/" too), URL-escaped (query and path)
// and HTML-escaped; customer values also case-insensitively.
//
// Runs of digits are removed (scrubDigits, six digits or more) only from
// snippets of error answers: in a 2xx answer amounts, epoch times and
// identifiers are the shape evidence the report exists to show. The only
// personal number the check sends is its placeholder document, removed
// everywhere as a customer value (digits alone and in the CPF layout).
type redactor struct {
	mu      sync.Mutex
	secrets map[string]bool // tokens: case-sensitive
	private map[string]bool // customer values: case-insensitive
}

func newRedactor() *redactor {
	return &redactor{secrets: map[string]bool{}, private: map[string]bool{}}
}

// digitsLike are digit runs, with the separators documents and phones are
// written with; scrubDigits removes those of six digits or more.
var digitsLike = regexp.MustCompile(`\d[\d.\-/ ]{4,}\d`)

func scrubDigits(s string) string {
	return digitsLike.ReplaceAllStringFunc(s, func(m string) string {
		n := 0
		for _, c := range m {
			if c >= '0' && c <= '9' {
				n++
			}
		}
		if n >= 6 {
			return "[number]"
		}
		return m
	})
}

var emailLike = regexp.MustCompile(`[^\s@"'<>()\\,;:\[\]]+@[^\s@"'<>()\\,;:\[\]]+\.[^\s@"'<>()\\,;:\[\]]+`)

// addSecret registers a token sent (empty: nothing).
func (rd *redactor) addSecret(tok string) {
	if strings.TrimSpace(tok) == "" {
		return
	}
	rd.mu.Lock()
	defer rd.mu.Unlock()
	for _, f := range forms(tok) {
		rd.secrets[f] = true
	}
}

// addPrivate registers a customer value sent (shorter than 3: nothing).
func (rd *redactor) addPrivate(v string) {
	v = strings.TrimSpace(v)
	if len(v) < 3 {
		return
	}
	rd.mu.Lock()
	defer rd.mu.Unlock()
	for _, f := range forms(v) {
		rd.private[asciiLower(f)] = true
	}
}

// forms are the spellings an echo of v takes.
func forms(v string) []string {
	out := []string{v}
	add := func(f string) {
		for _, g := range out {
			if g == f {
				return
			}
		}
		out = append(out, f)
	}
	if b, err := json.Marshal(v); err == nil {
		add(string(b[1 : len(b)-1]))
	}
	add(strings.ReplaceAll(v, "/", `\/`))
	add(url.QueryEscape(v))
	add(url.PathEscape(v))
	add(html.EscapeString(v))
	return out
}

// longestFirst sorts so that a longer form is replaced before a form it
// contains.
func longestFirst(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) || len(out[i]) == len(out[j]) && out[i] < out[j] })
	return out
}

// scrub is s with every registered secret and customer value, and every
// e-mail-like string, replaced.
func (rd *redactor) scrub(s string) string {
	if s == "" {
		return s
	}
	rd.mu.Lock()
	secrets, private := longestFirst(rd.secrets), longestFirst(rd.private)
	rd.mu.Unlock()
	for _, t := range secrets {
		s = replaceToken(s, t)
	}
	for _, v := range private {
		s = replaceFold(s, v, "[redacted]")
	}
	return emailLike.ReplaceAllString(s, "[e-mail]")
}

// replaceToken replaces tok in s. A token of longToken bytes or more is
// replaced wherever it stands; a shorter one only where it is not part of
// a longer run of token characters (so that a short test token does not
// blot out words like "token" around it).
func replaceToken(s, tok string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, tok)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		end := i + len(tok)
		whole := len(tok) >= longToken || (i == 0 || !tokenChar(s[i-1])) && (end == len(s) || !tokenChar(s[end]) || s[end] == '.')
		b.WriteString(s[:i])
		if whole {
			b.WriteString("[redacted]")
		} else {
			b.WriteString(tok)
		}
		s = s[end:]
	}
}

const longToken = 8

func tokenChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~+/=", c) >= 0
}

// replaceFold replaces every ASCII-case-insensitive occurrence of old
// (ASCII lower case) in s.
func replaceFold(s, old, repl string) string {
	if old == "" {
		return s
	}
	lower := asciiLower(s)
	var b strings.Builder
	for {
		i := strings.Index(lower, old)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		b.WriteString(repl)
		s, lower = s[i+len(old):], lower[i+len(old):]
	}
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
