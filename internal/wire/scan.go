package wire

import (
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// scanObject indexes the members of a JSON object without copying them:
// each value is a sub-slice of b (b must not be changed afterwards). It
// validates b as JSON first (json.Valid), so what it reads is what
// encoding/json would; a key with escapes is decoded by encoding/json. It
// returns the same members json.Unmarshal into a map[string]RawMessage
// would, the last of duplicate keys winning.
func scanObject(b []byte) (Object, error) {
	if !json.Valid(b) {
		var o map[string]json.RawMessage
		return Object{}, json.Unmarshal(b, &o) // the same error encoding/json gives
	}
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		if i+4 <= len(b) && string(b[i:i+4]) == "null" {
			return Object{}, errors.New("wire: null is not an object")
		}
		return Object{}, errors.New("wire: not a JSON object")
	}
	o := Object{members: make([]member, 0, 16)}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return o, nil
	}
	for i < len(b) {
		// key
		ks := i
		ke := endOfString(b, i)
		key := b[ks+1 : ke-1]
		if containsByte(key, '\\') || !utf8.Valid(key) {
			var k string
			if err := json.Unmarshal(b[ks:ke], &k); err != nil {
				return Object{}, err
			}
			key = []byte(k)
		}
		i = skipSpace(b, ke)
		i = skipSpace(b, i+1) // ':'
		vs := i
		ve := endOfValue(b, i)
		o.setScanned(key, json.RawMessage(b[vs:ve:ve]))
		i = skipSpace(b, ve)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
			continue
		}
		break // '}'
	}
	return o, nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func containsByte(b []byte, c byte) bool {
	for _, x := range b {
		if x == c {
			return true
		}
	}
	return false
}

// endOfString returns the index just past the string starting at b[i]
// (a '"'); b is valid JSON.
func endOfString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// endOfValue returns the index just past the value starting at b[i]; b is
// valid JSON.
func endOfValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return endOfString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = endOfString(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	return j
}

// setScanned adds a member read by scanObject (a duplicate key replaces
// the earlier value, as encoding/json does).
func (o *Object) setScanned(key []byte, v json.RawMessage) {
	for i := range o.members {
		if string(o.members[i].key) == string(key) {
			o.members[i].val = v
			return
		}
	}
	o.members = append(o.members, member{key: key, val: v})
}
