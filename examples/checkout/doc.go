// Command checkout charges an order by PIX and survives a crash between
// sending the charge and storing its answer: the next run settles the order
// from the SQLite key store and a lookup, without charging it twice.
//
//	go run ./examples/checkout               # an in-process fake
//	go run ./examples/checkout -ref PEDIDO-1 # a fixed order code instead of one per run
//
// With the variables `pagpolar sim` prints exported (PAGPOLAR_BASE_URL,
// PAGPOLAR_CREDENTIAL_ID, PAGPOLAR_TOKEN, PAGPOLAR_OFFER_ID, ...) it runs
// against that API instead, and says so.
package main
