// Package cases holds the clients that the paired benchmarks compare: a
// hand-written net/http PIX client (the baseline), the SDK with each key
// store, the store's own writes alone (the floor under the SDK's added
// latency), and ResumeAll's recovery. Each is a benchpair.Case that builds a
// fresh fake server, store and client per round.
package cases
