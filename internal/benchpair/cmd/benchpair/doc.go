// Command benchpair runs the SDK's paired benchmarks (see package
// internal/benchpair) and prints Go benchmark lines that benchstat reads,
// a "#" summary with medians, ranges and the load average, and, with -md,
// the Markdown tables of BENCHMARKS.md.
//
//	go run ./internal/benchpair/cmd/benchpair -suite overhead -rounds 15
//	go run ./internal/benchpair/cmd/benchpair -suite stores -rounds 10   # PostgreSQL from PAGPOLAR_TEST_POSTGRES_DSN, a private Redis (AOF always)
//	go run ./internal/benchpair/cmd/benchpair -suite resume -rounds 5
//
// Suites:
//
//	overhead  hand-written net/http vs the SDK (memory store), no API latency, at each -p
//	stores    the SDK with memory, SQLite, PostgreSQL and Redis stores, API latency -latency (20 ms),
//	          at p64 (ratio of throughput to memory in the same round) and p1 (added p50 latency
//	          vs the floor: the store's two writes alone, measured in the same rounds)
//	resume    ResumeAll settling 1,000 unknown operations, 20 ms per lookup
package main
