package keystore

import (
	"context"
	"time"
)

// ProofAge is how long a store must have existed, unbroken, before its
// history is proven by age alone: the API's memory of an Idempotency-Key
// (24 h), plus its in-processing window and a margin. An operation whose
// record a store lost more than ProofAge ago can no longer be told from a
// new one by any means, and its effect, if any, is older than every
// window the SDK measures; within ProofAge, it may be anywhere in the
// API's records while the store holds nothing about it.
const ProofAge = 25 * time.Hour

// HistoryProver is implemented by stores that can tell whether they hold
// every record they ever acknowledged (SAFETY rule 13). AmnesiaGuard
// detects a loss that a Store which knew the data is there to see; it
// cannot tell a store that was created fresh from one that was emptied
// while nobody was watching (a Redis restarted without persistence and
// then opened by a new process, a SQLite file deleted between two runs).
// A HistoryProver says "unproven" in both cases, and the engine then
// treats every operation's first send as a resend: it looks the effect up
// first and sends only on a trusted not-found (one lookup per first send;
// none once the history is proven).
//
// A store's history is unproven from the moment its part markers were
// written (first use, or an accepted loss) until an operator declares it
// new (DeclareNew, pagpolar ops init, or the store's option at first
// creation), or until it has existed for ProofAge. Stores that do not
// implement HistoryProver are taken as proven.
type HistoryProver interface {
	// History reports whether the store's history is proven. It may answer
	// from what the Store read recently (a Store re-reads an unproven
	// status at least every few seconds, so that DeclareNew in another
	// process takes effect soon); an unreachable store → an error wrapping
	// ErrUnavailable (the caller then treats the history as unproven).
	History(ctx context.Context) (History, error)

	// DeclareNew records the operator's statement that this store never
	// held a record of an operation that may have been sent and is not in
	// it now: it was created for a credential that has sent nothing, or
	// every operation sent before its loss has been settled by hand. note
	// says who declared it and why, and must not be empty. It does not end
	// a detected loss (AmnesiaGuard.AcceptLoss does).
	DeclareNew(ctx context.Context, note string) error
}

// History is what HistoryProver.History reports.
type History struct {
	// UnprovenSince is zero when the history is proven. Otherwise it is
	// the store's clock when the history it cannot prove began: any record
	// it lost was lost before then, so any send whose record was lost was
	// made before then.
	UnprovenSince time.Time
	// ProvenAt is when the history becomes proven by age (UnprovenSince +
	// ProofAge), by the store's clock; zero when proven.
	ProvenAt time.Time
	// Reason says why it is unproven ("" when proven).
	Reason string
	// Declared is the operator's note when DeclareNew proved it.
	Declared string
}

// Proven reports whether the store holds every record it acknowledged as
// far as can be known.
func (h History) Proven() bool { return h.UnprovenSince.IsZero() }

// UnprovenHistory returns the History of a part whose markers were written
// at since (store clock) and not declared new, as seen at now.
func UnprovenHistory(since, now time.Time, reason string) History {
	if since.IsZero() || !now.Before(since.Add(ProofAge)) {
		return History{}
	}
	return History{UnprovenSince: since, ProvenAt: since.Add(ProofAge), Reason: reason}
}
