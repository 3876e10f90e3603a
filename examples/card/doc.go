// Command card charges an order by card on an API that decides later: the
// sale is answered pending while antifraud decides, the checkout waits for
// the decision (AwaitDecision), and a card declined after it was answered
// pending is replaced by a new card under a new operation ID — the one
// moment a new operation ID is safe.
//
//	go run ./examples/card               # an in-process fake that decides cards 300 ms later
//	go run ./examples/card -ref PEDIDO-7 # a fixed order code
//
// With the variables `pagpolar sim -async` prints exported it runs against
// that API instead, and says so.
package main
