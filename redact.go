// Redacting the bearer token from what a call lets out: errors that keep
// their kind (timeout, net.Error) with the token removed, and a request ID
// header that may echo it; a token is removed only as a whole value.

package pagpolar

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
)

// redact is err with the token removed from its text. The text is that of
// a transport error, which can quote what the server sent (net/http's
// "malformed HTTP response \"…\""), so personal data goes too.
func redact(err error, token string) error {
	msg := err.Error()
	clean := redactSecret(msg, token)
	if strings.Contains(clean, "malformed HTTP") {
		clean = scrubPersonal(clean, nil) // the server's bytes, quoted
	}
	if clean == msg {
		return err // the original, with its types (*url.Error, *net.OpError)
	}
	r := &redactedError{msg: clean}
	for _, k := range []error{context.DeadlineExceeded, context.Canceled, io.EOF, io.ErrUnexpectedEOF, syscall.ECONNREFUSED, syscall.ECONNRESET} {
		if errors.Is(err, k) {
			r.kinds = append(r.kinds, k)
		}
	}
	var ne net.Error
	r.timeout = errors.As(err, &ne) && ne.Timeout()
	return r
}

// redactedError is a transport error's scrubbed text. It keeps the
// failure's kind for errors.Is (the standard sentinels it matched) and
// Timeout, but not the original error, whose text still holds the secret.
type redactedError struct {
	msg     string
	kinds   []error
	timeout bool
}

func (e *redactedError) Error() string   { return e.msg }
func (e *redactedError) Unwrap() []error { return e.kinds }
func (e *redactedError) Timeout() bool   { return e.timeout }
func (e *redactedError) Temporary() bool { return false }

// redactToken replaces token in s where it stands as a whole value (not
// inside a longer run of token characters): a short token must not blot
// out letters of the words around it.
func redactToken(s, token string) string {
	if token == "" {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, token)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		end := i + len(token)
		// A token of longToken bytes or more is a secret wherever it
		// stands; a shorter one only as a whole value, so that it does not
		// blot out words around it (a full stop after it ends it too).
		whole := len(token) >= longToken || (i == 0 || !tokenChar(s[i-1]) || s[i-1] == '=') &&
			(end == len(s) || !tokenChar(s[end]) || s[end] == '.' && (end+1 == len(s) || !tokenChar(s[end+1])))
		b.WriteString(s[:i])
		if whole {
			b.WriteString("[redacted]")
		} else {
			b.WriteString(token)
		}
		s = s[end:]
	}
}

// longToken is the length from which a token is redacted even inside a
// longer run of token characters (an echo like "Bearer<tok>" or "tok=<tok>x").
const longToken = 8

// requestID is the X-Request-Id header kept for errors and records: the
// sent token removed, and only if it still looks like an ID (at most 128
// bytes of letters, digits and ._:-), since a gateway may echo anything.
func requestID(h, token string) string {
	h = redactSecret(strings.TrimSpace(h), token)
	if len(h) > 128 {
		return ""
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._:-", c) >= 0) {
			return ""
		}
	}
	return h
}

// tokenChar: the characters a bearer token is made of (RFC 6750 b64token).
func tokenChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~+/=", c) >= 0
}
