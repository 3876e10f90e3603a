package pagpolar

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// opMeta is what the engine keeps in Record.Meta: enough to look the
// operation's effect up after a crash, what earlier calls learned about its
// key, and nothing personal.
type opMeta struct {
	Path              string `json:"path"`
	ExternalReference string `json:"external_reference,omitempty"`
	OfferID           string `json:"offer_id,omitempty"`
	Method            string `json:"method,omitempty"`
	Amount            int64  `json:"amount,omitempty"`
	SaleID            string `json:"sale_id,omitempty"`
	SubscriptionID    string `json:"subscription_id,omitempty"`

	// Snapshot lists the effect IDs that existed before the first send
	// (refunds of the sale, plan changes of the subscription, sales or
	// subscriptions under the reference); Snapshotted says a complete
	// snapshot was taken, so an effect absent from it is new.
	Snapshot    []string `json:"snapshot,omitempty"`
	Snapshotted bool     `json:"snapshotted,omitempty"`
	// SnapshotOffer: a plan change's subscription's offer before the first
	// send (an API that lists no plan changes is read by the offer).
	SnapshotOffer string `json:"snapshot_offer,omitempty"`
	// SnapshotNextOffer: the offer a change already scheduled before the
	// first send moves that subscription to ("" for none).
	SnapshotNextOffer string `json:"snapshot_next_offer,omitempty"`

	// Floor is a lower bound of the API's clock at the first send
	// (servertime.go), SharedFloor the earliest the API may have started
	// processing our key for another sender (after a 409). Both are server
	// time; zero means unknown (then time excludes nothing).
	Floor       time.Time `json:"floor,omitzero"`
	SharedFloor time.Time `json:"shared_floor,omitzero"`
	// FloorOK: the client that fixed Floor had validated its estimate of the
	// API's clock (servertime.go); only then may Floor exclude effects.
	FloorOK bool `json:"floor_ok,omitempty"`

	// TrustAfter is when a "not found" becomes conclusive, on the clock of
	// the client that set it; TrustAfterStore is the same moment on the key
	// store's clock, which every host shares. Both must have passed: a host
	// whose clock runs ahead would otherwise trust a not-found early.
	TrustAfter      time.Time `json:"trust_after,omitzero"`
	TrustAfterStore time.Time `json:"trust_after_store,omitzero"`
	// ProveBy is the earliest Date a list must carry to prove it was made
	// after the trust moment, on the API's clock as the client that set
	// TrustAfter knew it (its upper bound then, plus ServerClockTolerance):
	// what tells a stored copy for a process that has no reading of the
	// API's clock of its own (lookup_fresh.go). Zero when that client knew
	// no upper bound.
	ProveBy time.Time `json:"prove_by,omitzero"`

	// Saw2xx: a 2xx the SDK could not verify answered this key, or a 4xx
	// said the key was already used (vKeyUsed), so the effect may well
	// exist: never "not found", never resent. Unclear lists
	// effects a lookup saw and could not attribute: if one vanishes from a
	// later lookup, that is no proof of absence.
	Saw2xx  bool     `json:"saw_2xx,omitempty"`
	Unclear []string `json:"unclear,omitempty"`
}

func (m opMeta) equal(o opMeta) bool {
	return m.Path == o.Path && m.ExternalReference == o.ExternalReference && m.OfferID == o.OfferID && m.Method == o.Method &&
		m.Amount == o.Amount && m.SaleID == o.SaleID && m.SubscriptionID == o.SubscriptionID &&
		slices.Equal(m.Snapshot, o.Snapshot) && m.Snapshotted == o.Snapshotted && m.SnapshotOffer == o.SnapshotOffer && m.SnapshotNextOffer == o.SnapshotNextOffer &&
		m.Floor.Equal(o.Floor) && m.SharedFloor.Equal(o.SharedFloor) && m.FloorOK == o.FloorOK &&
		m.TrustAfter.Equal(o.TrustAfter) && m.TrustAfterStore.Equal(o.TrustAfterStore) && m.ProveBy.Equal(o.ProveBy) &&
		m.Saw2xx == o.Saw2xx && slices.Equal(m.Unclear, o.Unclear)
}

// exclusionFloor is the earliest server time an effect of this operation
// can carry: the first send, or earlier if a 409 showed another sender of
// our key at work.
func (m opMeta) exclusionFloor() time.Time {
	if m.Floor.IsZero() {
		return time.Time{} // unknown first send: time excludes nothing
	}
	if !m.SharedFloor.IsZero() && m.SharedFloor.Before(m.Floor) {
		return m.SharedFloor
	}
	return m.Floor
}

// fillStoreTrust gives a record read from the store a trust moment on the
// store's clock when it has none (saved before the lease told the writing
// client the store's clock): counted from the
// record's last write, which came after the send (unknown), or just before
// it (pending: allow for the token fetch too).
func (m *opMeta) fillStoreTrust(rec keystore.Record, p RetryPolicy) {
	if !m.TrustAfterStore.IsZero() || rec.UpdatedAt.IsZero() {
		return
	}
	d := p.trustDelay()
	if rec.State == keystore.StatePending {
		d += p.AttemptTimeout
	}
	m.TrustAfterStore = rec.UpdatedAt.Add(d)
}

// resetAttempts forgets what a series of attempts learned, when the record
// is proven not executed (every earlier attempt unprocessed): the next send
// starts a new series with its own snapshot and floor (SAFETY rule 11).
func (m *opMeta) resetAttempts() {
	m.Snapshot, m.Snapshotted, m.SnapshotOffer, m.SnapshotNextOffer = nil, false, "", ""
	m.Floor, m.SharedFloor, m.FloorOK = time.Time{}, time.Time{}, false
	m.TrustAfter, m.TrustAfterStore, m.ProveBy = time.Time{}, time.Time{}, time.Time{}
	m.Saw2xx, m.Unclear = false, nil
}

// settled is the meta a succeeded or failed record keeps: what identifies
// the operation (for operators and for the contested-claim checks). What
// its attempts learned (snapshot, clock bounds, trust moments, unclear
// effects) matters only while it is unsettled: a settled record is answered
// from its result and never looked up again. Without them a record is about
// 120 bytes smaller.
func (m opMeta) settled() opMeta {
	m.resetAttempts()
	return m
}

func (m *opMeta) noteUnclear(refs []string) {
	for _, r := range refs {
		if !slices.Contains(m.Unclear, r) {
			m.Unclear = append(m.Unclear, r)
		}
	}
}

// storedFailure is the Result of a failed record.
type storedFailure struct {
	Status    int    `json:"status,omitempty"`
	Code      string `json:"code,omitempty"`
	Message   string `json:"message,omitempty"` // why: the API's message scrubbed of personal data (scrub.go), or the SDK's
	RequestID string `json:"request_id,omitempty"`
	// Why: "api" (the API's refusal, Status set), "declined" or "refused"
	// (an effect the API recorded as refused), "collision" (a replay proved
	// another request used the key).
	Why string `json:"why,omitempty"`
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("pagpolar: marshal %T: %v", v, err)) // only our own plain structs reach here
	}
	return b
}
