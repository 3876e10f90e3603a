package pagpolar

import (
	"context"
	"log/slog"
	"time"
)

// EventKind names what a Hook is told about.
type EventKind string

// Event kinds, in the order an operation meets them.
const (
	EventSaved   EventKind = "saved"   // the record is durable; the request is about to be sent (crash point "after save")
	EventAttempt EventKind = "attempt" // one request sent and answered (Status) or failed (Err)
	EventSent    EventKind = "sent"    // an answer (or transport error) arrived and is not stored yet (crash point "after send")
	EventRetry   EventKind = "retry"   // a resend with the same key was decided (Cause says why)
	EventWait    EventKind = "wait"    // a pause of Wait before the next step
	EventLookup  EventKind = "lookup"  // a settle lookup ran (Found, Err)
	EventSettle  EventKind = "settle"  // the operation reached a state (State, Source)
	EventReplay  EventKind = "replay"  // the API answered with Idempotency-Replayed: true
	EventBudget  EventKind = "budget"  // a retry was refused by the retry budget
	// EventDecision: a succeeded operation's decision moved forward
	// (Decision, Source: a webhook event or a read).
	EventDecision EventKind = "decision"
)

// Event is one observation. Fields not meaningful for a kind are zero.
type Event struct {
	Kind        EventKind
	OperationID string
	Key         string
	Path        string
	Attempt     int
	Status      int
	Cause       string // e.g. "429", "503", "dial", "trusted-not-found", "409"
	Found       bool
	State       string
	Decision    Decision // settle, decision: the effect's decision
	Source      Source
	Wait        time.Duration
	Err         error
}

// Hook observes the client. It is called synchronously on the caller's
// goroutine, so it must be fast and must not call the client.
type Hook func(ctx context.Context, e Event)

func (c *Client) emit(ctx context.Context, e Event) {
	if c.hook != nil {
		c.hook(ctx, e)
	}
	if c.log.Enabled(ctx, slog.LevelDebug) {
		attrs := []any{"op", e.OperationID, "attempt", e.Attempt}
		if e.Status != 0 {
			attrs = append(attrs, "status", e.Status)
		}
		if e.Cause != "" {
			attrs = append(attrs, "cause", e.Cause)
		}
		if e.Wait != 0 {
			attrs = append(attrs, "wait", e.Wait)
		}
		if e.State != "" {
			attrs = append(attrs, "state", e.State, "source", e.Source)
		}
		if e.Decision != "" {
			attrs = append(attrs, "decision", e.Decision)
		}
		if e.Err != nil {
			attrs = append(attrs, "err", e.Err.Error())
		}
		c.log.DebugContext(ctx, "pagpolar: "+string(e.Kind), attrs...)
	}
}
