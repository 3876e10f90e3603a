package redisstore

import "strconv"

// layout is how the keys of a prefix are named. Every key of a shard
// carries one Cluster hash tag, so that a record, its indexes and its
// shard's marker live in one hash slot.
type layout int

const (
	// layoutTagged (layout 2, every prefix New initialises): the tag holds
	// the prefix and the shard, {<prefix>:<shard>}, so the shards of
	// different prefixes (tenants) fall in different slots.
	layoutTagged layout = iota
	// layoutLegacy (layout 1, written by an earlier version): the tag is
	// the shard number alone, {<shard>}. Only New names it, to refuse a
	// prefix whose markers are there; nothing is read or written in it.
	layoutLegacy
)

func (l layout) String() string {
	if l == layoutLegacy {
		return "1 ({shard})"
	}
	return "2 ({prefix:shard})"
}

// tag returns the start of every key of a shard:
//
//	layout 2: <prefix>:{<prefix>:<shard>}:
//	layout 1: <prefix>:{<shard>}:
func (l layout) tag(prefix string, shard int) string {
	if l == layoutLegacy {
		return prefix + ":{" + strconv.Itoa(shard) + "}:"
	}
	return prefix + ":{" + prefix + ":" + strconv.Itoa(shard) + "}:"
}
