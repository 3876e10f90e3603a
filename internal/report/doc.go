// Package report is the bookkeeping of `pagpolar demo` and `pagpolar chaos`:
// it counts what the SDK did (through its Hook), summarises latencies, checks
// the key store's final records against the fake server's ledger, and prints
// the result for people (text) or scripts (JSON).
package report
