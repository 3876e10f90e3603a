// Command outbox charges orders from their checkout transaction: each
// order and its PIX intent commit together (one order's transaction is
// rolled back after the intent was written, and is never charged), and a
// River worker charges the committed one and writes its sale into the
// order in the transaction that completes the job.
//
//	pagpolar sim &                 # prints the variables to export
//	export PAGPOLAR_BASE_URL=... PAGPOLAR_CREDENTIAL_ID=... PAGPOLAR_TOKEN=...
//	cd river && go run ./examples/outbox
//
// Without those variables it runs against an in-process fake and says so.
package main
