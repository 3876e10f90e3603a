// Package storetest is the conformance suite every keystore.Store runs with
// one call:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) keystore.Store { return newIsolatedStore(t) })
//	}
//
// The suite checks every sentence of the Store contract in keystore/store.go,
// including race tests (run it with -race). Durable stores keep time by their
// own clock (database now, Redis TIME), so lease-expiry tests use short real
// TTLs and wait, with a bound, until the store itself says a lease expired;
// timestamps set by the store are compared with a tolerance, and stores must
// keep at least millisecond precision.
//
// RunAmnesia checks the keystore.AmnesiaGuard contract with store-specific
// hooks that empty the backend or make it forget single records
// (AmnesiaBackend), including, through the SDK's public API against the
// fake PagPolar, that a store emptied between a commit-then-500 and the next
// call gives no second charge (AmnesiaEngineRun).
//
// Bench measures the store operations of one charge, for benchmarks that
// compare stores as ratios within one run.
package storetest
