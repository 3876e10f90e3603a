// Command outbox-demo proves charging from a transaction under crashes:
// it commits orders with their charge intents in one transaction each
// (and rolls some back after the insert), runs two River worker processes
// against a fake PagPolar API that loses answers and fails after
// committing, SIGKILLs the workers at seeded moments in the middle of
// operations (right after the SDK saved its record, or right after an
// answer arrived and before it was stored), restarts them, lets River
// rescue the stuck jobs, and checks the fake's ledger: every committed
// order charged exactly once, no rolled-back order charged.
//
//	cd river && go run ./cmd/outbox-demo                       # SQLite files in a temporary directory
//	cd river && go run ./cmd/outbox-demo -store postgres://... # a schema of its own, dropped at the end
//
// Exit codes: 0 every check passed; 1 a check failed; 2 bad usage; 3 the
// jobs did not drain within -timeout.
package main
