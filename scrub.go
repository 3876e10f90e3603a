package pagpolar

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

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

// storedMessage is msg fit for the key store.
func storedMessage(msg string, private []string) string {
	msg = oneLine(msg)
	for _, v := range private {
		if len(v) < 3 {
			continue
		}
		msg = replaceFold(msg, v, "[redacted]")
	}
	msg = emailLike.ReplaceAllString(msg, "[e-mail]")
	msg = digitsLike.ReplaceAllStringFunc(msg, func(s string) string {
		n := 0
		for _, r := range s {
			if r >= '0' && r <= '9' {
				n++
			}
		}
		if n >= 6 {
			return "[number]"
		}
		return s
	})
	if len(msg) > maxStoredMessage {
		cut := maxStoredMessage
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	return msg
}

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
