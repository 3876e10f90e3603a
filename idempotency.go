package pagpolar

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/pagpolar/pagpolar-go/keystore"
)

// The engine: one business operation under docs/SAFETY.md, in four files.
// Here run records the operation (rule 1) and leases it (rule 9); send.go
// sends and acts on the classification of each answer (classify.go; rules
// 2–4, 7); settle.go looks an ambiguous attempt up and attributes what it
// finds (lookup.go and attribute.go; rules 5, 11, 12) before anything is
// sent again; outcome.go writes what was proven to the record.

// Source says how a result was obtained.
type Source string

// Sources of a result.
const (
	SourceResponse    Source = "response"     // the API's answer to our request
	SourceReplay      Source = "replay"       // the API replayed the first answer for the key (Idempotency-Replayed: true)
	SourceLookup      Source = "lookup"       // settled by looking the effect up after an ambiguous attempt
	SourceLocalRecord Source = "local_record" // the operation was already settled in the key store; no request was sent
)

// Operation describes the business operation behind a result.
type Operation struct {
	ID        string // the operation ID (derived or given)
	Key       string // the Idempotency-Key sent
	Source    Source // how the result was obtained
	Attempts  int    // requests sent for this operation so far, across calls
	RequestID string // X-Request-Id of the answer, if the result came from one
}

// keyNamespace roots the UUIDv5 idempotency keys (a fixed, random UUID).
var keyNamespace = uuid.MustParse("5d0c6f0e-9a43-4b7e-8f5e-2b7f3f6f0a11")

// idempotencyKey derives the key of an operation: UUIDv5 of the credential
// ID and the operation ID, so two hosts that do not share a store still send
// one key for one operation. With WithRandomKeys, a UUIDv4 (kept only in the
// store).
func (c *Client) idempotencyKey(opID string) string {
	if c.randomKeys {
		return c.randomKey(opID)
	}
	return c.derivedKey(opID)
}

func (c *Client) derivedKey(opID string) string { return DerivedKey(c.credentialID, opID) }

// DerivedKey is the Idempotency-Key a client of credentialID sends for
// operation opID (without WithRandomKeys): the key its records carry, for
// tools that write or check records by hand.
func DerivedKey(credentialID, opID string) string {
	return uuid.NewSHA1(keyNamespace, []byte(credentialID+"\x00"+opID)).String()
}

// randomKey is a UUIDv4 whose first half is random and whose second half
// is a tag of the credential, the operation and that random half: unique
// like any random key, and still checkable (isRandomKey) as this
// credential's key for this operation, so that WithRandomKeys does not
// lose the ownership check (ownsRecord).
func (c *Client) randomKey(opID string) string {
	var u uuid.UUID
	if _, err := rand.Read(u[:8]); err != nil {
		panic("pagpolar: crypto/rand: " + err.Error()) // crypto/rand.Read does not fail on supported platforms
	}
	u[6] = u[6]&0x0f | 0x40 // version 4
	tag := c.keyTag(opID, u[:8])
	copy(u[8:], tag[:8])
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return u.String()
}

// isRandomKey reports whether key is a randomKey of opID under this
// credential.
func (c *Client) isRandomKey(key, opID string) bool {
	u, err := uuid.Parse(key)
	if err != nil || u.Version() != 4 || key != u.String() {
		return false
	}
	tag := c.keyTag(opID, u[:8])
	tag[0] = tag[0]&0x3f | 0x80
	return bytes.Equal(u[8:], tag[:8])
}

func (c *Client) keyTag(opID string, random []byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write(keyNamespace[:])
	h.Write([]byte(c.credentialID + "\x00" + opID + "\x00"))
	h.Write(random)
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// opSpec is one call's operation.
type opSpec struct {
	kind string
	id   string // caller-facing operation ID
	path string
	body []byte
	fpIn fields // what the fingerprint covers (rule 10)
	fp   string // its fingerprint under the current secret (set by run)
	meta opMeta
}

// settled is what run returns: the final record and how it was obtained.
type settled struct {
	rec   keystore.Record
	op    Operation
	value any // the typed result when this call obtained it (nil: decode rec.Result)
}

// exec carries one call's state through the send and settle loops.
type exec struct {
	c       *Client
	s       *opSpec
	rec     keystore.Record
	meta    opMeta
	retries int // resends this call decided
	lastReq string
	owner   string    // this call's lease owner
	leaseAt time.Time // when this call last obtained or extended its lease (client clock)
	// floorMine: this call recorded the floor, from this process's
	// estimator (dropBrokenFloor).
	floorMine bool

	// storedTerminal: the record as last written is terminal. A terminal
	// record's lease is left to expire, unless undecided: the record of an
	// effect whose decision may still move (a pending sale) is written again
	// by a webhook event or a read (refresh.go), which takes the lease.
	storedTerminal bool
	undecided      bool
	// stored: the record's state as the store last acknowledged it (""
	// before the record was created or read): what an error of this call
	// reports as OperationError.State.
	stored keystore.State

	// historyChecked: the lookup that precedes a first send while the
	// store's history is unproven found nothing, conclusively (unproven.go).
	historyChecked bool

	// storeBase is the key store's clock when the lease was last obtained
	// or extended (its LeaseExpiresAt less the TTL), read at client time
	// storeAt: the store's clock now is storeBase + (now - storeAt).
	storeBase, storeAt time.Time

	// metaJSON is e.meta as last written; savedMeta the value it encodes.
	metaJSON  []byte
	savedMeta opMeta
}

// runOp executes one operation (run, in observe.go, is it observed). It returns the settled record (State
// succeeded, with Result) or an error:
//   - *ValidationError / ErrParamsMismatch (nothing sent),
//   - ErrStoreUnavailable (nothing sent),
//   - *APIError, ErrDeclined, ErrRefused for definite failures,
//   - *OutcomeUnknownError (record left unknown),
//   - ErrInProgress / ErrLeaseLost (another worker holds the operation),
//   - ErrBudgetExhausted, ErrRateLimited, ErrUnavailable (not executed).
func (c *Client) runOp(ctx context.Context, s *opSpec) (res *settled, err error) {
	var e *exec
	defer func() {
		// Every error after validation names its operation, so that
		// errors.Is places it in one of the three branches (OutcomeOf),
		// with the record's state as the store last acknowledged it.
		if oe := (*OperationError)(nil); err != nil && !errors.As(err, &oe) {
			oe = &OperationError{OperationID: s.id, Err: err}
			if e != nil && e.stored != "" {
				oe.Key, oe.State = e.rec.Key, e.stored
			}
			err = oe
		}
	}()
	p := c.policy
	now := c.clock.Now()
	s.fp = c.fingerprint(s.fpIn)
	e = &exec{c: c, s: s, meta: s.meta, owner: c.callOwner()}
	e.meta.Path = s.path
	rec := keystore.Record{
		OperationID: c.storeID(s.id),
		Key:         c.idempotencyKey(s.id),
		Kind:        s.kind,
		Fingerprint: s.fp,
		State:       keystore.StatePending,
	}
	// A charge whose first send can be placed on the API's clock is saved
	// as "about to be sent" at once (one write before the send; a crash
	// before the send leaves an ambiguous-looking record that a lookup
	// settles). Otherwise a snapshot comes first.
	_, unproven := c.unprovenHistory(ctx)
	snapFirst := unproven || e.wantsSnapshot() // unproven: a lookup precedes the send (firstSend)
	var floor time.Time
	if !snapFirst {
		// Read once more under the estimator's lock: a clock self-test may
		// have switched it off since wantsSnapshot looked, and a send with
		// neither a usable floor nor a snapshot could never be told from an
		// earlier effect after a lost answer.
		var usable bool
		floor, usable = c.srvClock.usableFloor(now)
		snapFirst = !usable
	}
	if !snapFirst {
		rec.Attempts, rec.FirstSentAt, rec.LastSentAt = 1, now, now
		e.meta.Floor, e.meta.FloorOK, e.floorMine = floor, true, true
		// Counted from the save, before the token fetch that precedes the
		// send: a process that picks this record up after a crash must
		// allow for that fetch too.
		// (trustFrom: the record carries the Date a list made after that
		// moment must show, for a process that picks it up knowing nothing
		// of the API's clock.)
		e.trustFrom(now, p.trustDelay()+p.AttemptTimeout)
	}
	rec.Meta = e.encodeMeta()
	created, err := c.store.Create(ctx, rec, e.owner, p.LeaseTTL)
	switch {
	case err == nil:
		e.rec, e.leaseAt, e.stored = created, now, created.State
		e.noteLease(created)
		defer e.release(ctx)
		if snapFirst {
			return e.firstSend(ctx)
		}
		return e.sendLoop(ctx, false)
	case errors.Is(err, keystore.ErrExists):
		if !c.ownsRecord(created, s.id) {
			return nil, &OperationError{OperationID: s.id, Key: rec.Key, State: "foreign", Err: fmt.Errorf("%w; nothing was sent", foreignRecord(created))}
		}
		return e.existing(ctx, created)
	}
	return nil, e.createFailed(ctx, rec, err, unproven)
}

// wantsSnapshot: refunds and plan changes always take a snapshot before a
// series of attempts; other kinds unless their first send can be placed on
// the API's clock by a validated bound (servertime.go) and the API's
// effects carry usable creation times, so that earlier effects are
// excluded by ID otherwise.
func (e *exec) wantsSnapshot() bool {
	if needsSnapshot(e.s.kind) || e.c.shapes.timesUnusable() || !e.c.srvClock.usable() {
		return true
	}
	_, ok := e.c.srvClock.floor(e.c.clock.Now())
	return !ok
}

// createFailed handles a Create that did not say "created" or "exists".
// Its reply may have been lost after the record was written: then the
// record holds this call's lease for a whole TTL although nothing was
// sent. Re-read it; if it is ours, release it (nothing was sent, and its
// durability was not confirmed); if the store cannot be read either,
// remember the lease so that the next call of this client can take it back.
//
// The store's answer proves no earlier call recorded the operation only
// while its history is proven: a store that may have lost records (unproven)
// answers "absent", or "the record this call created", for an operation an
// earlier call sent.
func (e *exec) createFailed(ctx context.Context, rec keystore.Record, err error, unproven bool) error {
	c := e.c
	if errors.Is(err, keystore.ErrAmnesia) {
		// The store detected that it lost records it had acknowledged and
		// wrote nothing (SAFETY rule 13): this operation's record may be
		// one of those lost, so nothing may be sent until an operator has
		// settled what survived and accepted the loss (pagpolar ops
		// recover). No re-read: there is no lease to take back.
		return &OperationError{OperationID: e.s.id, Key: rec.Key,
			Err: fmt.Errorf("%w: the store lost records it had acknowledged, so this operation may have been sent before; nothing was sent (run pagpolar ops recover): %w", ErrStoreUnavailable, err)}
	}
	gctx, cancel := c.graceCtx(ctx, 5*time.Second)
	defer cancel()
	got, gerr := c.store.Get(gctx, rec.OperationID)
	out := fmt.Errorf("%w: nothing was sent: %w", ErrStoreUnavailable, err)
	switch {
	case gerr == nil && got.LeaseOwner == e.owner:
		// The record is the one this call created: no earlier call had one.
		_ = c.store.Release(gctx, got.OperationID, got.LeaseToken)
		if !unproven {
			out = notExecutedError{out}
		}
	case errors.Is(gerr, keystore.ErrNotFound):
		if !unproven {
			out = notExecutedError{out}
		}
	case gerr != nil:
		c.orphans.add(rec.OperationID, e.owner)
	}
	// Otherwise an earlier call's record may exist (the store could not be
	// read, or holds another call's record): the outcome is unknown.
	return &OperationError{OperationID: e.s.id, Key: rec.Key, Err: out}
}

// existing continues an operation already in the store.
func (e *exec) existing(ctx context.Context, cur keystore.Record) (*settled, error) {
	c, s := e.c, e.s
	if !fingerprintForm(cur.Fingerprint) {
		return nil, &OperationError{OperationID: s.id, Key: cur.Key, State: "foreign", Err: fmt.Errorf("%w; nothing was sent", foreignFingerprint(cur))}
	}
	match, rekey := c.fingerprintMatch(cur.Fingerprint, s.fpIn)
	if !match {
		return nil, paramsMismatch(s.id, cur)
	}
	if cur.State.Terminal() {
		return c.fromRecord(s.id, cur)
	}
	got, done, err := c.acquire(ctx, cur.OperationID, s.id, e.owner)
	if err != nil {
		return nil, err
	}
	if done {
		return c.fromRecord(s.id, got)
	}
	e.rec, e.leaseAt, e.stored = got, c.clock.Now(), got.State
	e.noteLease(got)
	if rekey {
		e.rec.Fingerprint = s.fp // re-fingerprinted under the current secret at the next write
	}
	defer e.release(ctx)
	if res, err, ok := e.applyUnrecorded(ctx); ok && (err != nil || e.rec.State != keystore.StateNotExecuted) {
		return res, err
	}
	var m opMeta
	if err := json.Unmarshal(got.Meta, &m); err != nil {
		return nil, fmt.Errorf("pagpolar: operation %q: corrupt record meta: %w", s.id, err)
	}
	e.meta = m
	e.metaJSON, e.savedMeta = append([]byte(nil), got.Meta...), m
	e.meta.fillStoreTrust(got, c.policy)
	switch {
	case e.rec.State == keystore.StateNotExecuted:
		// Proven not executed: every earlier attempt was unprocessed, so
		// what they learned (snapshot, first send) is void.
		e.meta.resetAttempts()
		return e.firstSend(ctx)
	case e.rec.State == keystore.StatePending && e.rec.Attempts == 0:
		return e.firstSend(ctx)
	case e.rec.State == keystore.StatePending && e.meta.TrustAfter.IsZero():
		// Left by a crash or a worker that lost its lease mid-flight.
		e.meta.TrustAfter = e.rec.LastSentAt.Add(c.policy.trustDelay())
	}
	return e.settle(ctx, true, true)
}

// firstSend starts a series of attempts: the snapshot first where one is
// wanted (rule 11: never a refund or plan change without one), then the
// send. An optional snapshot (a charge's, for want of a clock reference)
// gets one attempt: it only makes a later lookup sharper, and even its
// failed answer usually places the send on the API's clock.
func (e *exec) firstSend(ctx context.Context) (*settled, error) {
	if res, err, done := e.lookBeforeFirstSend(ctx); done {
		return res, err
	}
	e.rec.FirstSentAt = time.Time{}
	if e.wantsSnapshot() {
		required := needsSnapshot(e.s.kind)
		err := e.c.snapshot(ctx, e.s.kind, &e.meta, e.c.policy.MaxAttempts)
		if ae := (*APIError)(nil); e.s.kind == kindSubscribe && errors.As(err, &ae) && (ae.StatusCode == 404 || ae.StatusCode == 405 || ae.StatusCode == 501) {
			// The API has no subscription lookup (an ASSUMED route): there is
			// nothing to snapshot, and an ambiguous subscribe will end
			// unknown whatever is done here.
			err = nil
		}
		switch {
		case err != nil:
			// Nothing sent: without the snapshot (and without a validated
			// clock) a lost answer could never be told from an earlier
			// effect. The record stays pending with 0 attempts (or not
			// executed) and a later call takes the snapshot again.
			return nil, e.unsentBeforeFirstSend(ctx, fmt.Errorf("the lookup before the first send failed, so nothing was sent (call again): %w", err))
		case required && !e.meta.Snapshotted:
			return nil, e.unsentBeforeFirstSend(ctx, fmt.Errorf("%w: the pre-send snapshot could not be read whole, so a lost answer could not be told from earlier effects; nothing was sent", ErrIncompleteList))
		}
		if err := e.holdLease(ctx); err != nil {
			return nil, err
		}
	}
	return e.sendLoop(ctx, true)
}

// unsentBeforeFirstSend is the error of a first send that stopped before
// sending. The operation is not executed if this call still holds it: its
// record has no attempt (or says not_executed) in a store whose history is
// proven, or whose lookup before the first send concluded (firstSend runs
// lookBeforeFirstSend first), and nobody else may send without the lease.
// A lease this call cannot show it holds is "in progress elsewhere".
//
// The answer is written (not_executed) before it is given: a worker that
// held the operation before this call and stalled past its lease takes it
// back only while the record is unchanged (holdLease), and would send
// after this call said nothing was. The write changes the record, so that
// worker stops; a write the store did not take is unknown (notExecuted).
func (e *exec) unsentBeforeFirstSend(ctx context.Context, cause error) error {
	if err := e.holdLease(ctx); err != nil {
		return err
	}
	return e.notExecuted(ctx, "nothing sent: "+describeErr(cause), cause)
}

func (e *exec) encodeMeta() []byte {
	if e.metaJSON == nil || !e.meta.equal(e.savedMeta) {
		e.metaJSON = metaJSON(&e.meta)
		e.savedMeta = e.meta
		e.savedMeta.Snapshot = append([]string(nil), e.meta.Snapshot...)
		e.savedMeta.Unclear = append([]string(nil), e.meta.Unclear...)
	}
	return e.metaJSON
}

func (e *exec) op(src Source) Operation {
	return Operation{ID: e.s.id, Key: e.rec.Key, Source: src, Attempts: e.rec.Attempts, RequestID: e.lastReq}
}

func (e *exec) opErr(err error) error {
	return &OperationError{OperationID: e.s.id, Key: e.rec.Key, State: e.rec.State, Err: err}
}

// dropBrokenFloor stops the record calling its floor usable once this
// process has read the API's clock below it in an answer no cache serves
// again (a step back since it was recorded; a GET's copy only has an old
// Date) or, for a floor this call recorded from this process's
// estimator, once that estimator has switched itself off (the API's clock
// out of line with it). A floor's validity is a fact recorded with it
// (SAFETY rule 12): a process that reads the record after the clock has
// stepped forward again re-checks the floor against a clock that no longer
// shows the step, and would exclude the operation's own effect by it. An
// estimator switched off says nothing of another process's floor (it may
// have gone off over a stored copy an hour before that floor was taken):
// only a reading below a floor strips it from a record another wrote.
func (e *exec) dropBrokenFloor() {
	if !e.meta.FloorOK {
		return
	}
	c := e.c
	if c.srvClock.off() {
		if e.floorMine {
			e.meta.FloorOK = false
		}
		return
	}
	if ceiling, ok := c.srvClock.freshCeilingNow(c.clock.Now); ok && !floorHolds(e.meta.exclusionFloor(), ceiling, ok, c.policy.ServerClockTolerance) {
		e.meta.FloorOK = false
	}
}

// save writes the record with the lease token it holds (fencing). The
// write outlives the caller's cancellation (bounded by 10 s, and by the
// caller's end plus DeadlineGrace: deadline.go): an answer that arrived
// must be recorded even if the caller stopped waiting for it.
func (e *exec) save(ctx context.Context) error {
	if e.rec.Error != "" {
		// The last filter: whatever a reason quotes (a status the API
		// spelled, an event's field) goes without personal data (rule 8).
		e.rec.Error = scrubStored(e.c.sent.redact(e.rec.Error), e.s.fpIn.privateFields())
	}
	if e.rec.State == keystore.StateSucceeded || e.rec.State == keystore.StateFailed {
		m := e.meta.settled()
		e.rec.Meta = metaJSON(&m)
	} else {
		e.dropBrokenFloor()
		e.rec.Meta = e.encodeMeta()
	}
	sctx, cancel := e.c.graceCtx(ctx, 10*time.Second)
	defer cancel()
	got, err := e.c.store.Update(sctx, e.rec)
	if err != nil {
		if errors.Is(err, keystore.ErrLeaseLost) || errors.Is(err, keystore.ErrConflict) {
			return e.opErr(fmt.Errorf("%w: %w", ErrLeaseLost, err))
		}
		return e.opErr(fmt.Errorf("%w: %w", ErrStoreUnavailable, err))
	}
	e.rec, e.stored = got, got.State
	e.storedTerminal = got.State.Terminal()
	return nil
}
