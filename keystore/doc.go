// Package keystore defines where the SDK keeps its idempotency records: the
// Idempotency-Key of each business operation, a fingerprint of its parameters,
// its state and its lease. A record is written, and the write has returned,
// before the first byte of the request is sent (SAFETY rule 1).
//
// Implementations: Memory (tests only: a restart forgets every key), and the
// durable stores in the sqlstore and redisstore sub-packages. Every
// implementation passes the conformance suite in keystore/storetest unchanged,
// and, since each implements AmnesiaGuard (SAFETY rule 13: a store that
// lost what it acknowledged fails closed), its amnesia suite too.
package keystore
