// Command webhook is a PagPolar webhook receiver: it checks the token, stores
// each event (its body sealed with AES-256-GCM) in SQLite before answering
// 200, processes it once afterwards, and never moves an order's status
// backwards.
//
//	PAGPOLAR_WEBHOOK_TOKEN=... PAGPOLAR_WEBHOOK_PAYLOAD_KEYS="k1:$(openssl rand -base64 32)" go run ./examples/webhook
//
// It listens on PAGPOLAR_WEBHOOK_ADDR (default 127.0.0.1:3000: this machine
// only; set :3000 to listen on every interface, e.g. behind your TLS proxy)
// at /webhooks/pagpolar
// and keeps events and orders in the SQLite file PAGPOLAR_WEBHOOK_DB (default
// pagpolar-webhooks.db); with PAGPOLAR_WEBHOOK_REDIS_URL the events go to
// that Redis instead (the orders stay in SQLite). While rotating the webhook
// token, put the new one in PAGPOLAR_WEBHOOK_TOKEN_NEXT: both are accepted.
// With PAGPOLAR_BASE_URL, PAGPOLAR_CREDENTIAL_ID and PAGPOLAR_TOKEN set,
// doubtful statuses are checked with GET /sales/{identifier}; without them
// they are left as stored. That client's key store is PAGPOLAR_STORE (a
// store URL, e.g. sqlite:/var/lib/shop/pagpolar.db; default a temporary
// SQLite file), and every event first settles the operations of that
// store it carries the effect of (webhook.Config.Settle): a charge whose
// answer was lost, left "outcome unknown", is settled by its event.
//
// -charge shows that against `pagpolar sim -webhook-url ... -hold 1`: it
// charges one PIX order whose answer never comes, and waits for the
// event to settle it (README.md has the commands).
//
// PAGPOLAR_WEBHOOK_PAYLOAD_KEYS holds the keys that seal stored bodies
// (id:base64, the sealing key first, old keys after it while rotating);
// PAGPOLAR_WEBHOOK_PLAINTEXT=yes stores them in clear instead. One of the
// two is required. A Redis without an append-only file (a development
// Redis) is refused unless PAGPOLAR_WEBHOOK_REDIS_VOLATILE=yes accepts
// losing acknowledged events on its restart.
//
// An operator lists and retries events:
//
//	go run ./examples/webhook -list dead
//	go run ./examples/webhook -retry 'TRANSACTION_PAID:sale_123'
package main
