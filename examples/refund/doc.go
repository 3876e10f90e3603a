// Command refund charges a card and refunds it in two parts. Each refund's
// operation ID comes from your own records (a sale can have several partial
// refunds); the second refund's answer is lost on purpose against the
// in-process fake, and the SDK tells it from the first by the snapshot it
// took before sending.
//
//	go run ./examples/refund                # an in-process fake
//	go run ./examples/refund -ref PEDIDO-55 # a fixed order code instead of one per run
//
// With the variables `pagpolar sim` prints exported it runs against that
// API instead, and says so (PAGPOLAR_CARD_TOKEN: a card token of that API;
// default the fake's tok_ok).
package main
