package wire

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// This file reads the API's answers leniently: by the aliases and tables of
// wire.go, and saying, for every field, whether it was absent, read, or
// present but unreadable. The callers decide what an absent or unreadable
// field means; nothing here guesses.

// FieldState says how a field was found.
type FieldState int

// Field states.
const (
	Absent     FieldState = iota // no alias present, or null / ""
	Read                         // present and read
	Unreadable                   // present in a form the SDK does not read (an object where a string was expected, a time without a zone, ...)
)

// Object is a JSON object, read by alias: its members in order, each value
// a sub-slice of the parsed bytes (nothing is copied).
type Object struct{ members []member }

type member struct {
	key []byte
	val json.RawMessage
}

// Get returns the value of member name (the last one, as encoding/json).
func (o Object) Get(name string) (json.RawMessage, bool) {
	var v json.RawMessage
	ok := false
	for _, m := range o.members {
		if string(m.key) == name {
			v, ok = m.val, true
		}
	}
	return v, ok
}

// Len is the number of members.
func (o Object) Len() int { return len(o.members) }

// Range calls fn for every member, in order.
func (o Object) Range(fn func(key string, v json.RawMessage)) {
	for _, m := range o.members {
		fn(string(m.key), m.val)
	}
}

func (o *Object) set(key string, v json.RawMessage) {
	for i, m := range o.members {
		if string(m.key) == key {
			o.members[i].val = v
			return
		}
	}
	o.members = append(o.members, member{key: []byte(key), val: v})
}

// ParseObject parses b as a JSON object.
func ParseObject(b []byte) (Object, error) { return scanObject(b) }

// raw returns the value of the first alias present and not null. A dotted
// alias descends into nested objects.
func (o Object) raw(names []string) (json.RawMessage, bool) {
	for _, n := range names {
		if v, ok := o.path(n); ok && !isNull(v) {
			return v, true
		}
	}
	return nil, false
}

func (o Object) path(name string) (json.RawMessage, bool) {
	head, rest, nested := strings.Cut(name, ".")
	v, ok := o.Get(head)
	if !ok || !nested {
		return v, ok
	}
	inner, err := ParseObject(v)
	if err != nil {
		return nil, false
	}
	return inner.path(rest)
}

func isNull(v json.RawMessage) bool {
	return len(bytes.TrimSpace(v)) == 0 || string(bytes.TrimSpace(v)) == "null"
}

// Str reads a string field (a JSON number is read as its text: some servers
// send identifiers as numbers). An alias holding an object is skipped, so
// that "offer" as an object falls through to "offer.identifier".
func (o Object) Str(names []string) (string, FieldState) {
	s, _, st := o.StrNamed(names)
	return s, st
}

// StrNamed is Str, also returning the name the value was read under (the
// name that made it Unreadable, when it is).
func (o Object) StrNamed(names []string) (value, name string, st FieldState) {
	state, at := Absent, ""
	for _, n := range names {
		v, ok := o.path(n)
		if !ok || isNull(v) {
			continue
		}
		s, st := scalarString(v)
		switch st {
		case Read:
			if s == "" {
				continue
			}
			return s, n, Read
		case Unreadable:
			if b := bytes.TrimSpace(v); len(b) > 0 && b[0] == '{' {
				continue // an object: a dotted alias may read inside it
			}
			if state != Unreadable {
				state, at = Unreadable, n
			}
		}
	}
	return "", at, state
}

func scalarString(v json.RawMessage) (string, FieldState) {
	b := bytes.TrimSpace(v)
	if len(b) == 0 {
		return "", Absent
	}
	switch b[0] {
	case '"':
		if len(b) >= 2 && b[len(b)-1] == '"' && !containsByte(b[1:len(b)-1], '\\') && utf8.Valid(b[1:len(b)-1]) {
			return strings.TrimSpace(string(b[1 : len(b)-1])), Read // no escapes: the bytes are the string
		}
		var s string
		if json.Unmarshal(b, &s) != nil {
			return "", Unreadable
		}
		return strings.TrimSpace(s), Read
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return string(b), Read
	}
	return "", Unreadable
}

// Has reports whether any alias is present (even as null or empty).
func (o Object) Has(names []string) bool {
	for _, n := range names {
		if _, ok := o.path(n); ok {
			return true
		}
	}
	return false
}

// Array returns the items of the first alias that holds a JSON array.
func (o Object) Array(names []string) ([]json.RawMessage, FieldState) {
	v, ok := o.raw(names)
	if !ok {
		return nil, Absent
	}
	var items []json.RawMessage
	if json.Unmarshal(v, &items) != nil {
		return nil, Unreadable
	}
	return items, Read
}

// Amount is a money field with every plausible reading of it in centavos:
// an integer is centavos as the SDK assumes, or whole reais; a number with
// a fraction (99.90) or a decimal string ("99,90") is reais.
type Amount struct {
	State FieldState
	r     [4]int64
	n     int
}

// Readings are the plausible readings in centavos, first the one the SDK
// reports.
func (a Amount) Readings() []int64 { return a.r[:a.n] }

func (a *Amount) add(c int64) {
	for _, x := range a.r[:a.n] {
		if x == c {
			return
		}
	}
	if a.n < len(a.r) {
		a.r[a.n] = c
		a.n++
	}
}

// Matches reports whether some reading of a is want centavos.
func (a Amount) Matches(want int64) bool {
	for _, c := range a.r[:a.n] {
		if c == want {
			return true
		}
	}
	return false
}

// Best is the reading the SDK reports (centavos as assumed, or reais
// converted), or 0.
func (a Amount) Best() int64 {
	if a.n == 0 {
		return 0
	}
	return a.r[0]
}

// Amount reads a money field: a JSON number or a string. Every reading a
// plausible server could mean is kept: an integer is centavos (as the SDK
// assumes) or whole reais; a number with a fraction is reais, and also
// centavos when the fraction is zero (1500.0: a float column of centavos);
// a string is read with "." and then "," as the decimal separator
// ("15.000" is fifteen thousand, or fifteen).
func (o Object) Amount(names []string) Amount {
	v, ok := o.raw(names)
	if !ok {
		return Amount{}
	}
	b := bytes.TrimSpace(v)
	var texts []string
	if len(b) > 0 && b[0] != '"' {
		out := Amount{}
		readingsOf(string(b), &out)
		if out.n == 0 {
			return Amount{State: Unreadable}
		}
		out.State = Read
		return out
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if json.Unmarshal(b, &s) != nil {
			return Amount{State: Unreadable}
		}
		s = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(s), "R$"))
		s = strings.ReplaceAll(s, " ", "")
		texts = append(texts, strings.ReplaceAll(s, ",", ""))                               // "." decimal, "," thousands
		texts = append(texts, strings.ReplaceAll(strings.ReplaceAll(s, ".", ""), ",", ".")) // "," decimal, "." thousands
	} else {
		texts = []string{string(b)}
	}
	out := Amount{}
	for _, t := range texts {
		readingsOf(t, &out)
	}
	if out.n == 0 {
		return Amount{State: Unreadable}
	}
	out.State = Read
	return out
}

// readingsOf adds what a decimal number written as t can mean, in
// centavos, to a.
func readingsOf(t string, a *Amount) {
	if t == "" || strings.Count(t, ".") > 1 {
		return
	}
	if !strings.ContainsAny(t, ".eE") {
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil || n < 0 {
			return
		}
		a.add(n)
		if n <= math.MaxInt64/100 {
			a.add(n * 100)
		}
		return
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) || f > 1e15 {
		return
	}
	if c := math.Round(f * 100); math.Abs(c-f*100) <= 1e-6*math.Max(1, f*100) {
		a.add(int64(c)) // reais
	}
	if f == math.Trunc(f) {
		a.add(int64(f)) // centavos written as a float
	}
}

// Time reads a time field. A time without a zone is Unreadable (its zone
// could be UTC or São Paulo: three hours apart). res is the precision the
// value carries: a time in whole seconds may be up to a second early.
func (o Object) Time(names []string) (t time.Time, res time.Duration, st FieldState) {
	v, ok := o.raw(names)
	if !ok {
		return time.Time{}, 0, Absent
	}
	return ParseTime(v)
}

var timeLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05.999999999Z0700",
	"2006-01-02 15:04:05.999999999Z07:00",
	"2006-01-02 15:04:05.999999999Z0700",
	"2006-01-02 15:04:05.999999999 -0700",
	"2006-01-02 15:04:05.999999999 -07:00",
	time.RFC1123Z,
	time.RFC1123,
	http.TimeFormat,
}

// ParseTime reads a JSON time value: a string in one of the zoned layouts,
// or a number of Unix seconds (or milliseconds).
func ParseTime(v json.RawMessage) (time.Time, time.Duration, FieldState) {
	b := bytes.TrimSpace(v)
	if isNull(b) {
		return time.Time{}, 0, Absent
	}
	if b[0] != '"' {
		f, err := strconv.ParseFloat(string(b), 64)
		if err != nil || f <= 0 {
			return time.Time{}, 0, Unreadable
		}
		switch {
		case f < 1e11: // seconds (until the year 5138)
			res := time.Second
			if f != math.Trunc(f) {
				res = time.Millisecond
			}
			return time.Unix(0, int64(f*1e9)).UTC(), res, Read
		case f < 1e14: // milliseconds
			return time.UnixMilli(int64(f)).UTC(), time.Millisecond, Read
		}
		return time.Time{}, 0, Unreadable
	}
	s, st := scalarString(b)
	if st != Read {
		return time.Time{}, 0, Unreadable
	}
	if s == "" {
		return time.Time{}, 0, Absent
	}
	for _, layout := range timeLayouts {
		t, err := time.Parse(layout, s)
		if err != nil {
			continue
		}
		if (layout == time.RFC1123 || layout == http.TimeFormat) && !strings.HasSuffix(s, "GMT") && !strings.HasSuffix(s, "UTC") {
			continue // a zone abbreviation Go cannot place
		}
		return t, resolution(s), Read
	}
	return time.Time{}, 0, Unreadable
}

// resolution is the precision of a time written as s: 1 s without a
// fraction, else 10^-digits s.
func resolution(s string) time.Duration {
	i := strings.IndexByte(s, '.')
	if i < 0 {
		return time.Second
	}
	n := 0
	for _, r := range s[i+1:] {
		if r < '0' || r > '9' {
			break
		}
		n++
	}
	res := time.Second
	for ; n > 0 && res > time.Nanosecond; n-- {
		res /= 10
	}
	return res
}

// Normalize is how methods and statuses are compared: lower case, with
// "-" and " " read as "_".
func Normalize(s string) string {
	s = strings.TrimSpace(s)
	simple := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' || c == '-' || c == ' ' || c >= 0x80 {
			simple = false
			break
		}
	}
	if simple {
		return s // the common case: already the canonical form, no allocation
	}
	return strings.Map(func(r rune) rune {
		if r == '-' || r == ' ' {
			return '_'
		}
		return r
	}, strings.ToLower(s))
}

// CanonicalMethod returns the method a spelling means, or known false.
func CanonicalMethod(raw string) (string, bool) {
	m, ok := MethodSpellings[Normalize(raw)]
	return m, ok
}

// ClassifyStatus looks a status up in a table.
func ClassifyStatus(table map[string]StatusClass, raw string) StatusClass {
	return table[Normalize(raw)]
}

// APIError reads an error body: the API's own only if it is JSON with a
// code the SDK knows (KnownErrorCodes) or is the documented 409 message.
// The message is read from "message", "error", "error.message" or
// "detail" either way.
func APIError(contentType string, body []byte) (code, message string, own bool) {
	o, err := ParseObject(body)
	if err != nil {
		return "", "", false
	}
	code, cst := o.Str([]string{"code", "error.code", "error_code"})
	if cst == Read {
		if _, numeric := strconv.Atoi(code); numeric == nil {
			code = "" // an HTTP status echoed by a gateway, not an API code
		}
	}
	message, _ = o.Str([]string{"message", "error.message", "error", "detail", "error_description"})
	json := strings.Contains(strings.ToLower(contentType), "json") || contentType == ""
	own = json && (KnownErrorCodes[code] || message == MsgInProgress)
	return code, message, own
}
