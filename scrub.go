package pagpolar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"unicode/utf8"
)

// What an answer says leaves the SDK only scrubbed. An error
// body may echo the bearer token (gateways and WAFs do: "invalid token
// <tok>") and whatever the request carried (a name, an e-mail, a CPF).
//
//   - scrubAnswer removes the token that was sent with the request (the one
//     the caller's request carried, never a token fetched again), in its
//     plain, JSON-escaped and URL-escaped forms; the operation's private
//     field values; anything shaped like an e-mail address; and every run
//     of six or more digits. APIError.Message and APIError.Raw are built
//     with it, so Error(), logs and Hook events never see the raw text.
//   - Stored reasons (Record.Error) are the SDK's own words with a status
//     and a code (storedReason, describeErr); the only API text a record
//     keeps is the refusal message of a failed operation, through
//     storedMessage.
//   - scrubStored is the last filter on every reason before it is written.

// The API's own error message is kept in the record (rule 8's "reason"),
// so that `ops show` and a repeated call say why an operation failed. It
// may echo what the request carried, so before it is stored every value of
// the operation's private fields (the customer's name, e-mail, document,
// phone; the card token), anything shaped like an e-mail address and every
// run of six or more digits (documents, card numbers, phones) is removed,
// and it is cut to maxStoredMessage bytes.

const maxStoredMessage = 200

var (
	emailLike  = regexp.MustCompile(`[^\s@"'<>()]+@[^\s@"'<>()]+\.[^\s@"'<>()]+`)
	digitsLike = regexp.MustCompile(`\d[\d.\-/ ]{4,}\d`)
)

// storedMessage is msg fit for the key store: scrubbed first, cut last (a
// cut must not leave half an e-mail that no longer looks like one).
func storedMessage(msg string, private []string) string {
	return truncate(scrubPersonal(joinLines(msg), private), maxStoredMessage)
}

// joinLines is s on one line, whitespace runs made one space; not cut.
func joinLines(s string) string { return strings.Join(strings.Fields(s), " ") }

// scrubAnswer is an answer's text (an error body or the message parsed
// from it) with the sent token and personal data removed.
func scrubAnswer(s, token string, private []string) string {
	return scrubPersonal(redactSecret(s, token), private)
}

// scrubPersonal removes the private values, e-mail-like strings and runs
// of six or more digits (documents, card numbers, phones) from s.
func scrubPersonal(s string, private []string) string {
	for _, v := range private {
		for _, f := range privateForms(v) {
			s = replaceFold(s, f, "[redacted]")
		}
	}
	s = emailLike.ReplaceAllString(s, "[e-mail]")
	locs := digitsLike.FindAllStringIndex(s, -1)
	if locs == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, l := range locs {
		m := s[l[0]:l[1]]
		n := 0
		for _, r := range m {
			if r >= '0' && r <= '9' {
				n++
			}
		}
		// A run inside a word (an identifier such as sale_5b47861039ae or
		// req_1234567) is kept: documents, cards and phones stand apart.
		inWord := l[0] > 0 && wordChar(s[l[0]-1]) || l[1] < len(s) && wordChar(s[l[1]])
		if n < 6 || inWord {
			continue
		}
		b.WriteString(s[last:l[0]])
		b.WriteString("[number]")
		last = l[1]
	}
	b.WriteString(s[last:])
	return b.String()
}

// wordChar: a letter, a digit or an underscore (ASCII).
func wordChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// privateForms are the spellings of a private value an answer may echo: as
// is, JSON-escaped to ASCII ("\u00e3", Python's default), HTML-escaped,
// and for a name each of its words of four letters or more.
func privateForms(v string) []string {
	v = strings.TrimSpace(v)
	if len(v) < 3 {
		return nil
	}
	forms := []string{v}
	add := func(f string) {
		for _, g := range forms {
			if g == f {
				return
			}
		}
		forms = append(forms, f)
	}
	add(jsonASCII(v))
	add(html.EscapeString(v))
	if strings.ContainsRune(v, ' ') {
		for _, w := range strings.Fields(v) {
			if utf8.RuneCountInString(w) >= 4 {
				add(w)
				add(jsonASCII(w))
			}
		}
	}
	return forms
}

// jsonASCII is s with every non-ASCII rune as a JSON \uXXXX escape.
func jsonASCII(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r < utf8.RuneSelf:
			b.WriteRune(r)
		case r > 0xFFFF:
			r1, r2 := utf16Pair(r)
			fmt.Fprintf(&b, "\\u%04x\\u%04x", r1, r2)
		default:
			fmt.Fprintf(&b, "\\u%04x", r)
		}
	}
	return b.String()
}

func utf16Pair(r rune) (rune, rune) {
	r -= 0x10000
	return 0xD800 + (r>>10)&0x3FF, 0xDC00 + r&0x3FF
}

// sentTokens remembers the last tokens a client sent, so that text built
// from an answer away from its send (a lookup's reason, an attribution
// note, an event) has them removed too. They are in memory already.
type sentTokens struct {
	mu   sync.Mutex
	toks [4]string
	next int
}

func (st *sentTokens) add(tok string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, t := range st.toks {
		if t == tok {
			return
		}
	}
	st.toks[st.next%len(st.toks)] = tok
	st.next++
}

func (st *sentTokens) redact(s string) string {
	st.mu.Lock()
	toks := st.toks
	st.mu.Unlock()
	for _, t := range toks {
		s = redactSecret(s, t)
	}
	return s
}

// scrub is s with every token the client sent lately and the personal
// data removed: for text made from answers (reasons, notes).
func (c *Client) scrub(s string, private []string) string {
	return scrubPersonal(c.sent.redact(s), private)
}

// scrubbedErr shows a scrubbed text over an error (a lookup's, in an
// outcome-unknown error or an event) and unwraps to it, so errors.Is/As
// still match the API error or the sentinel. The original's own text is
// scrubbed of the token and of patterns already (apiError); only a private
// value a plain read could not know is left in it.
type scrubbedErr struct {
	msg string
	err error
}

func (e *scrubbedErr) Error() string { return e.msg }
func (e *scrubbedErr) Unwrap() error { return e.err }

// scrubErr wraps err when its text needs scrubbing.
func (e *exec) scrubErr(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if clean := e.c.scrub(msg, e.s.fpIn.privateFields()); clean != msg {
		return &scrubbedErr{msg: clean, err: err}
	}
	return err
}

// scrubStored is the last filter on a reason about to be stored: one line,
// no personal data, bounded.
func scrubStored(s string, private []string) string {
	return truncate(scrubPersonal(joinLines(s), private), maxStoredReason)
}

// maxStoredReason bounds Record.Error.
const maxStoredReason = 400

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// redactSecret removes token from s in the forms an echo takes: as sent,
// JSON-escaped (Go's escapes, and "/" as "\/") and URL-escaped.
func redactSecret(s, token string) string {
	if token == "" || s == "" {
		return s
	}
	// Fast path (every answer passes here): each form of the token holds
	// its longest run of letters and digits unchanged, so text without
	// that run holds no form of it.
	if run := alnumRun(token); len(run) >= 4 && !strings.Contains(s, run) {
		return s
	}
	forms := []string{token}
	if b, err := json.Marshal(token); err == nil {
		if j := string(b[1 : len(b)-1]); j != token {
			forms = append(forms, j)
		}
	}
	if j := strings.ReplaceAll(token, "/", `\/`); j != token {
		forms = append(forms, j)
	}
	if q := url.QueryEscape(token); q != token {
		forms = append(forms, q)
	}
	if q := url.PathEscape(token); q != token {
		forms = append(forms, q)
	}
	for _, f := range forms {
		s = redactToken(s, f)
	}
	return s
}

// alnumRun is the longest run of ASCII letters and digits in s.
func alnumRun(s string) string {
	best, start := "", -1
	for i := 0; i <= len(s); i++ {
		if i < len(s) && (s[i] >= 'a' && s[i] <= 'z' || s[i] >= 'A' && s[i] <= 'Z' || s[i] >= '0' && s[i] <= '9') {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 && i-start > len(best) {
			best = s[start:i]
		}
		start = -1
	}
	return best
}

// describeErr says what kind of failure err is, in the SDK's own words: a
// status and a code for an API answer, a kind for a transport failure,
// never the text of an answer or of an error built from one.
func describeErr(err error) string {
	var apiErr *APIError
	var ne net.Error
	var te *tokenError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &apiErr):
		return storedReason(apiErr)
	case errors.As(err, &te):
		return "the token source failed"
	case errors.Is(err, ErrBudgetExhausted):
		return "retry budget exhausted"
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &ne) && ne.Timeout():
		return "transport error: timed out"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "transport error: connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "transport error: connection reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "transport error: connection closed before a complete answer"
	}
	var se *sendError
	if errors.As(err, &se) {
		return "transport error"
	}
	return "error"
}

// tokenError is a failure of the caller's TokenSource.
type tokenError struct{ err error }

func (e *tokenError) Error() string { return fmt.Sprintf("pagpolar: token source: %v", e.err) }
func (e *tokenError) Unwrap() error { return e.err }

// replaceFold replaces every case-insensitive occurrence of old.
func replaceFold(s, old, repl string) string {
	lo, lold := strings.ToLower(s), strings.ToLower(old)
	if len(lo) != len(s) || !strings.Contains(lo, lold) {
		return strings.ReplaceAll(s, old, repl)
	}
	var b strings.Builder
	for {
		i := strings.Index(lo, lold)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		b.WriteString(repl)
		s, lo = s[i+len(old):], lo[i+len(old):]
	}
}
