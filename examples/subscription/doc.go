// Command subscription subscribes a customer to a plan and changes the plan
// twice. Plan changes take operation IDs from your records: a subscription
// can change plans many times.
//
//	go run ./examples/subscription                    # an in-process fake
//	go run ./examples/subscription -ref ASSINATURA-42 # a fixed reference instead of one per run
//
// With the variables `pagpolar sim` prints exported (PAGPOLAR_PLAN_ID and
// PAGPOLAR_OTHER_PLAN_ID among them) it runs against that API instead, and
// says so.
package main
