// Reading an answer's fields for the items: lists, typed fields under their
// names, nested paths.

package apicheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// observeList checks a list answer's shape and returns its items.
func observeList(o *observer, x exchange, where string) []json.RawMessage {
	b := bytes.TrimSpace(x.body)
	var extras []string
	if len(b) > 0 && b[0] == '[' {
		extras = append(extras, "a bare JSON array")
	} else if obj, err := wire.ParseObject(b); err == nil {
		hasData := false
		obj.Range(func(k string, v json.RawMessage) {
			if k == "data" && len(bytes.TrimSpace(v)) > 0 && bytes.TrimSpace(v)[0] == '[' {
				hasData = true
				return
			}
			extras = append(extras, k)
		})
		if !hasData {
			extras = append([]string{"no \"data\" array"}, extras...)
		}
	}
	if l := x.header.Get("Link"); l != "" {
		extras = append(extras, "Link header "+l)
	}
	page, err := wire.ParseList(x.body, x.header)
	switch {
	case err != nil:
		o.add("list.shape", Differs, "unreadable: "+err.Error(), where)
		return nil
	case len(extras) > 0:
		o.add("list.shape", Differs, "with "+strings.Join(extras, ", "), where)
	default:
		o.add("list.shape", Confirmed, "", where)
	}
	return page.Items
}

// A field check: name present as the assumed type → confirmed; under an
// alias the SDK reads → differs (named so); a wrong type → differs; none
// → absent.
type fieldType int

func checkField(o *observer, id string, obj wire.Object, name string, aliases []string, t fieldType, where string) (json.RawMessage, bool) {
	v, ok := obj.Get(name)
	if !ok || isNull(v) {
		for _, a := range aliases {
			if a == name {
				continue
			}
			if av, aok := getPath(obj, a); aok && !isNull(av) {
				o.add(id, Differs, fmt.Sprintf("named %q: %s", a, o.snip(av)), where)
				return nil, false
			}
		}
		o.add(id, Absent, "", where)
		return nil, false
	}
	b := bytes.TrimSpace(v)
	switch t {
	case tString:
		var s string
		if json.Unmarshal(b, &s) != nil || strings.TrimSpace(s) == "" {
			o.add(id, Differs, "not a non-empty string: "+o.snip(b), where)
			return v, false
		}
	case tInt:
		if _, err := strconv.ParseInt(string(b), 10, 64); err != nil {
			o.add(id, Differs, "not an integer: "+o.snip(b), where)
			return v, false
		}
	case tTime:
		var s string
		if json.Unmarshal(b, &s) != nil {
			o.add(id, Differs, "not a string: "+o.snip(b), where)
			return v, false
		}
		tm, err := time.Parse(time.RFC3339Nano, s)
		switch {
		case err != nil:
			o.add(id, Differs, "not RFC 3339: "+s, where)
			return v, false
		case !strings.HasSuffix(s, "Z"):
			o.add(id, Differs, fmt.Sprintf("offset %s, not UTC: %s", tm.Format("-07:00"), s), where)
			return v, false
		case !strings.Contains(s, "."):
			o.add(id, Differs, "whole seconds: "+s, where)
			return v, false
		}
	case tArray:
		if len(b) == 0 || b[0] != '[' {
			o.add(id, Differs, "not an array: "+o.snip(b), where)
			return v, false
		}
	}
	o.add(id, Confirmed, "", where)
	return v, true
}

func isNull(v json.RawMessage) bool {
	b := bytes.TrimSpace(v)
	return len(b) == 0 || string(b) == "null"
}

func getPath(o wire.Object, name string) (json.RawMessage, bool) {
	head, rest, nested := strings.Cut(name, ".")
	v, ok := o.Get(head)
	if !ok || !nested {
		return v, ok
	}
	inner, err := wire.ParseObject(v)
	if err != nil {
		return nil, false
	}
	return getPath(inner, rest)
}

func strOf(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	return strings.TrimSpace(string(v))
}

const (
	tString fieldType = iota
	tInt
	tTime
	tArray
)
