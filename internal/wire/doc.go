// Package wire holds every JSON shape and header name of the PagPolar API
// that the SDK and the fake server share.
//
// This file is THE one place for the API's shapes. Only the PIX request body,
// the routes, the Idempotency-Key / Idempotency-Replayed headers, the 409
// message and the webhook envelope are documented (see docs/CONTRACT.md);
// everything marked ASSUMED below is our best guess, to be corrected here after
// a run against staging. Neither the client nor the fake declares its own copy.
package wire
