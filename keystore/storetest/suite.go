package storetest

import (
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
)

const (
	// shortTTL is long enough for a few store calls on a loaded machine to
	// happen inside one lease only when a test does not depend on it; tests
	// that need a lease to stay held use longTTL.
	shortTTL = 300 * time.Millisecond
	longTTL  = time.Minute
	// waitBound caps every wait for a lease to expire by the store's clock.
	waitBound = 15 * time.Second
	// clockTolerance bounds the distance between the store's clock and this
	// process's clock (same host or a well-synchronised one). It catches unit
	// and time-zone mistakes (seconds vs milliseconds, local vs UTC).
	clockTolerance = 2 * time.Second
	// precision is the coarsest time precision a store may keep.
	precision = time.Millisecond
)

// Run runs the whole conformance suite against the stores newStore returns,
// each subtest on a fresh store. newStore must return an empty store,
// isolated from every other store the suite asks for (its own file, table,
// key prefix...), and register its clean-up with t.Cleanup. The subtests run
// in parallel, so newStore must be safe to call from several goroutines.
func Run(t *testing.T, newStore func(t *testing.T) keystore.Store) {
	t.Helper()
	cases := []struct {
		name string
		fn   func(t *testing.T, s keystore.Store)
	}{
		{"Create/StoresRecordAndLease", testCreateStores},
		{"Create/DefaultsEmptyStateToPending", testCreateDefaultState},
		{"Create/ExistingReturnsStoredRecordUnchanged", testCreateExists},
		{"Create/EmptyOperationID", testCreateEmptyID},
		{"Create/RoundTripsBytesAndTimes", testRoundTrip},
		{"Create/ReturnedRecordIsACopy", testCopies},
		{"Get/MissingIsNotFound", testGetMissing},
		{"Acquire/HeldByAnotherOwner", testAcquireHeld},
		{"Acquire/AfterRelease", testAcquireAfterRelease},
		{"Acquire/SameOwnerGetsNewTokenAndFencesOld", testAcquireSameOwner},
		{"Acquire/TakeoverAfterExpiryFencesOldHolder", testTakeover},
		{"Acquire/Missing", testAcquireMissing},
		{"Renew/ExtendsCurrentLease", testRenew},
		{"Renew/ExpiredLeaseIsLost", testRenewExpired},
		{"Renew/StaleOrReleasedTokenIsLost", testRenewStale},
		{"Release/StaleTokenIsNoOp", testReleaseStale},
		{"Release/Missing", testReleaseMissing},
		{"Update/WritesMutableFields", testUpdateWrites},
		{"Update/NeverChangesKeyKindOrLease", testUpdateImmutable},
		{"Update/StaleVersionConflicts", testUpdateStale},
		{"Update/WithoutLeaseIsLost", testUpdateNoLease},
		{"Update/ExpiredLeaseIsLost", testUpdateExpired},
		{"Update/TerminalStateIsImmutable", testUpdateTerminal},
		{"Update/NonTerminalTransitions", testUpdateTransitions},
		{"Update/InvalidState", testUpdateInvalid},
		{"Update/Missing", testUpdateMissing},
		{"List/ByState", testListStates},
		{"List/OldestUpdatedFirst", testListOrder},
		{"List/UpdatedBefore", testListUpdatedBefore},
		{"List/Prefix", testListPrefix},
		{"List/Limit", testListLimit},
		{"List/DefaultLimit", testListDefaultLimit},
		{"List/Combined", testListCombined},
		{"DeleteExpired/OnlyOldTerminalRecords", testDeleteExpired},
		{"DeleteExpired/Limit", testDeleteLimit},
		{"CancelledContext", testCancelled},
		{"Race/CreateOneWinner", testRaceCreate},
		{"Race/AcquireOneHolder", testRaceAcquire},
		{"Race/TakeoverOneHolder", testRaceTakeover},
		{"Race/UpdateOneWinner", testRaceUpdate},
		{"Race/LeasedCounter", testRaceCounter},
		{"Race/ManyDistinctCreates", testRaceDistinct},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, newStore(t))
		})
	}
}
