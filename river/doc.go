// Package pagpolarriver charges from the order's transaction: a checkout
// writes its order and a charge intent in one database transaction, and
// River (github.com/riverqueue/river) runs the intent through a
// pagpolar.Client after the commit.
//
// The gap it closes is the one before the SDK: the order commits and the
// process dies before Payments.Pix is called (an order never charged), or
// the charge is made inside the order's transaction and the transaction
// rolls back (a sale for an order that does not exist). With an intent
// inserted by InsertTx in the order's own transaction, both commit or
// neither does. River runs each job at least once across a fleet — again
// after a worker is killed mid-job (RescueStuckJobsAfter) — and the SDK
// makes each run of one operation ID one charge: at-least-once jobs plus
// exactly-once operations are exactly-once charging from the moment the
// order commits.
//
// A checkout:
//
//	tx, _ := db.BeginTx(ctx, nil)
//	_, _ = tx.ExecContext(ctx, `INSERT INTO orders ...`, orderID, ...)
//	_, err := pagpolarriver.InsertTx(ctx, riverClient, tx, pagpolarriver.PixIntent{
//		OperationID: "pix:" + orderID, OrderID: orderID, OfferID: "offer-basic", ExternalReference: orderID}, nil)
//	if err != nil { return err } // tx rolls back: no order, no intent
//	return tx.Commit()
//
// Workers, registered with one call (AddWorkers), map each result:
//
//   - succeeded, whatever the decision (a pending PIX, a card in
//     analysis): the job is completed, and Config.OnSettled runs in the
//     transaction that completes it (river.JobCompleteTx), so the order's
//     row learns its sale in the same commit;
//   - declined or failed (pagpolar.ErrFailed): the job is cancelled with
//     the reason; a new attempt needs a new intent with a new operation ID;
//   - outcome unknown, another worker holding the operation, the key store
//     away, rate limits, shed load: the job is snoozed — until the SDK's
//     OutcomeUnknownError.SettleAfter at least — and runs again under the
//     same operation ID, which settles before it sends; never a new
//     operation, and never discarded for it;
//   - a params mismatch, invalid params, a payer the Resolver reports gone,
//     a foreign record: cancelled, logged at level Error (the API's 400 or
//     an operation too old to send, while the key store has not recorded
//     it, is unknown and snoozes: the next run records it, then cancels);
//   - what the SDK proved not processed (a 401), or a first run whose
//     Resolver failed before the SDK was called: River's retry policy. A
//     Resolver failure after a snooze or an earlier attempt (a job River
//     rescued from a worker that died mid-call) is snoozed instead: an
//     earlier run may have left the operation unsettled. An error whose
//     outcome the SDK does not place is unknown, and snoozes.
//
// Intents hold what the SDK's own record may hold — the operation ID,
// offer, external reference, installments, sale and subscription IDs,
// amounts — and the order's ID. The payer's name, e-mail, document, phone
// and card token are never in the job row: the application's Resolver
// loads them by order ID when the job runs.
//
// Each intent's operation ID is the job's identity (River's UniqueOpts by
// that one field, across kinds and every job state): inserting one intent
// twice is one job, and inserting its operation ID with other params is
// ErrIntentMismatch. Derive the ID from your records ("pix:" + order
// code), never from River's job ID.
//
// The SDK client's key store must be durable and shared by every worker
// process (PostgreSQL; a SQLite file for the processes of one host):
// River may run a job on another process after a crash, and only a shared
// record makes that run the same operation.
//
// River's own settings matter too: JobTimeout should outlast the SDK's
// longest call (its RetryPolicy's MaxSettleWait plus the attempts before
// it), and RescueStuckJobsAfter must exceed JobTimeout. A job River
// rescues while its first run is still alive meets that run's lease
// (ErrInProgress) and snoozes; one whose worker died is settled by lookup
// once the dead worker's lease has expired.
//
// InsertTx and AddWorkers are generic in River's transaction type: *sql.Tx
// with riverdatabasesql (PostgreSQL through pgx's stdlib) or riversqlite,
// and pgx.Tx with riverpgxv5.
//
// This package is a module of its own (github.com/pagpolar/pagpolar-go/river)
// so that the SDK's module never requires River.
package pagpolarriver
