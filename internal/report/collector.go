package report

import (
	"context"
	"sort"
	"sync"

	pagpolar "github.com/pagpolar/pagpolar-go"
)

// Counts is a set of named counters.
type Counts map[string]int

// Add adds every counter of o to c.
func (c Counts) Add(o Counts) {
	for k, v := range o {
		c[k] += v
	}
}

// Total is the sum of every counter.
func (c Counts) Total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// Keys returns the counter names, sorted.
func (c Counts) Keys() []string {
	out := make([]string, 0, len(c))
	for k := range c {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Collector counts what the client's Hook reports: attempts, the resends
// it decided and why, the ambiguous answers it had to settle, the lookups
// and the retries the budget refused. Safe for concurrent use; the zero
// value is not: use NewCollector.
type Collector struct {
	mu        sync.Mutex
	s         Stats
	ambiguous map[string]bool
	// A 503 is a plain retry when the API sent it (the client resends) and
	// ambiguous when an intermediary did (the client looks up): the attempt
	// event alone cannot tell, the event after it can.
	pending503 map[string]bool
}

// Stats is a snapshot of a Collector. It is also what a chaos worker sends
// its parent, so it has JSON tags.
type Stats struct {
	Attempts  int    `json:"attempts"`           // money requests sent
	Retries   Counts `json:"retries_by_cause"`   // resends with the same key, by cause (429, 503, not-sent, trusted-not-found)
	Ambiguous Counts `json:"ambiguous_by_cause"` // answers that had to be settled by lookup (500, 502, 504, transport, 409)
	Lookups   int    `json:"lookups"`            // settle lookups run
	Budget    int    `json:"budget_exhaustions"` // retries refused by the retry budget
	Replays   int    `json:"replays"`            // answers marked Idempotency-Replayed
}

// NewStats returns an empty Stats with its maps allocated.
func NewStats() Stats { return Stats{Retries: Counts{}, Ambiguous: Counts{}} }

// Add adds o to s.
func (s *Stats) Add(o Stats) {
	if s.Retries == nil {
		s.Retries = Counts{}
	}
	if s.Ambiguous == nil {
		s.Ambiguous = Counts{}
	}
	s.Attempts += o.Attempts
	s.Retries.Add(o.Retries)
	s.Ambiguous.Add(o.Ambiguous)
	s.Lookups += o.Lookups
	s.Budget += o.Budget
	s.Replays += o.Replays
}

// NewCollector returns an empty Collector.
func NewCollector() *Collector {
	return &Collector{s: NewStats(), ambiguous: map[string]bool{
		"500": true, "502": true, "504": true, "transport": true, "409": true,
	}, pending503: map[string]bool{}}
}

// Observe records one event; use it as (or from) a pagpolar.Hook.
func (c *Collector) Observe(_ context.Context, e pagpolar.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch e.Kind {
	case pagpolar.EventAttempt:
		c.s.Attempts++
		switch {
		case c.ambiguous[e.Cause]:
			c.s.Ambiguous[e.Cause]++
		case e.Cause == "503":
			c.pending503[e.OperationID] = true
		}
	case pagpolar.EventRetry:
		delete(c.pending503, e.OperationID)
		c.s.Retries[e.Cause]++
	case pagpolar.EventLookup:
		if c.pending503[e.OperationID] {
			delete(c.pending503, e.OperationID)
			c.s.Ambiguous["503"]++
		}
		c.s.Lookups++
	case pagpolar.EventBudget:
		delete(c.pending503, e.OperationID)
		c.s.Budget++
	case pagpolar.EventSaved, pagpolar.EventSettle:
		delete(c.pending503, e.OperationID)
	case pagpolar.EventReplay:
		c.s.Replays++
	}
}

// Snapshot returns a copy of the counts so far.
func (c *Collector) Snapshot() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := NewStats()
	out.Add(c.s)
	return out
}
