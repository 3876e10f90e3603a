// Package benchpair is a paired benchmark harness: it runs several clients
// ("cases") of the same operation in interleaved rounds, every case once per
// round in a shuffled order, and compares each case with a baseline case
// of the same round only. On a machine shared with other work the load
// changes from second to second; a ratio taken within a round sees the same
// load on both sides, where a sequential benchmark (all of A, then all of B)
// does not.
//
// Per case and round it measures, for a fixed number of operations: wall
// time, the process's CPU time (user + system, getrusage), allocations and
// bytes allocated (runtime.MemStats deltas, so everything in the process
// counts: the client, an in-process fake server and the garbage collector),
// per-operation latencies, and the load average (/proc/loadavg) at the end
// of the measurement. Results are printed as Go benchmark lines, one per
// case and round, which golang.org/x/perf/cmd/benchstat reads (the rounds
// are its samples), and as lines "BenchmarkRatio/..." carrying the per-round
// ratios; a readable summary (median and range over rounds, and the load
// beside every figure) follows in lines starting with "#", which benchstat
// ignores.
package benchpair
