package pagpolar

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pagpolar/pagpolar-go/internal/leaktest"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/redisstore"
	"github.com/pagpolar/pagpolar-go/keystore/sqlstore"
)

// leakStore is a key store under test with a way to read back, raw, all it
// holds: the SQLite files' bytes, PostgreSQL rows as text, Redis values.
type leakStore struct {
	store keystore.Store
	raw   func(t *testing.T) []byte
}

func leakStores(t *testing.T) map[string]func(t *testing.T) leakStore {
	return map[string]func(t *testing.T) leakStore{
		"memory": func(t *testing.T) leakStore {
			m := keystore.NewMemory()
			return leakStore{store: m, raw: func(t *testing.T) []byte {
				recs, err := m.List(context.Background(), keystore.Filter{Limit: 10000})
				if err != nil {
					t.Fatal(err)
				}
				b, _ := json.Marshal(recs)
				return b
			}}
		},
		"sqlite": func(t *testing.T) leakStore {
			dir := t.TempDir()
			s, err := sqlstore.OpenSQLite(filepath.Join(dir, "keys.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			if err := s.Migrate(context.Background()); err != nil {
				t.Fatal(err)
			}
			return leakStore{store: s, raw: func(t *testing.T) []byte {
				// Every byte of the database and its WAL, as `strings` would see them.
				var all []byte
				files, _ := filepath.Glob(filepath.Join(dir, "keys.db*"))
				for _, f := range files {
					b, err := os.ReadFile(f)
					if err != nil {
						t.Fatal(err)
					}
					all = append(all, b...)
				}
				if len(all) == 0 {
					t.Fatal("no SQLite file to read")
				}
				return all
			}}
		},
		"postgres": func(t *testing.T) leakStore {
			dsn := os.Getenv("PAGPOLAR_TEST_POSTGRES_DSN")
			if dsn == "" {
				t.Skip("PAGPOLAR_TEST_POSTGRES_DSN not set")
			}
			table := "leak_" + randHex(t)
			s, err := sqlstore.OpenPostgres(dsn, sqlstore.WithTable(table))
			if err != nil {
				t.Fatal(err)
			}
			db, err := sql.Open("pgx", dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = s.Close()
				_, _ = db.Exec("DROP TABLE IF EXISTS " + table)
				_, _ = db.Exec("DROP TABLE IF EXISTS " + table + "_meta")
				_ = db.Close()
			})
			if err := s.Migrate(context.Background()); err != nil {
				t.Fatal(err)
			}
			return leakStore{store: s, raw: func(t *testing.T) []byte {
				rows, err := db.Query("SELECT t::text FROM " + table + " t")
				if err != nil {
					t.Fatal(err)
				}
				defer rows.Close()
				var all bytes.Buffer
				for rows.Next() {
					var line string
					if err := rows.Scan(&line); err != nil {
						t.Fatal(err)
					}
					all.WriteString(line + "\n")
				}
				if all.Len() == 0 {
					t.Fatal("no PostgreSQL row to read")
				}
				return all.Bytes()
			}}
		},
		"redis": func(t *testing.T) leakStore {
			u := os.Getenv("PAGPOLAR_TEST_REDIS_URL")
			if u == "" {
				t.Skip("PAGPOLAR_TEST_REDIS_URL not set")
			}
			opt, err := redis.ParseURL(u)
			if err != nil {
				t.Fatal(err)
			}
			rc := redis.NewClient(opt)
			prefix := "pagpolar-leak-" + randHex(t)
			s, err := redisstore.New(rc, redisstore.WithPrefix(prefix), redisstore.AllowVolatile(), redisstore.WithLogger(quiet))
			if err != nil {
				t.Fatal(err)
			}
			keys := func(ctx context.Context) []string {
				var ks []string
				iter := rc.Scan(ctx, 0, "*"+prefix+"*", 1000).Iterator()
				for iter.Next(ctx) {
					ks = append(ks, iter.Val())
				}
				return ks
			}
			t.Cleanup(func() {
				ctx := context.Background()
				for _, k := range keys(ctx) {
					rc.Del(ctx, k)
				}
				_ = rc.Close()
			})
			return leakStore{store: s, raw: func(t *testing.T) []byte {
				ctx := context.Background()
				var all bytes.Buffer
				ks := keys(ctx)
				if len(ks) == 0 {
					t.Fatal("no Redis key to read")
				}
				for _, k := range ks {
					switch rc.Type(ctx, k).Val() {
					case "hash":
						for f, v := range rc.HGetAll(ctx, k).Val() {
							fmt.Fprintf(&all, "%s %s=%s\n", k, f, v)
						}
					case "string":
						fmt.Fprintf(&all, "%s %s\n", k, rc.Get(ctx, k).Val())
					case "zset":
						for _, m := range rc.ZRange(ctx, k, 0, -1).Val() {
							fmt.Fprintf(&all, "%s %s\n", k, m)
						}
					case "set":
						for _, m := range rc.SMembers(ctx, k).Val() {
							fmt.Fprintf(&all, "%s %s\n", k, m)
						}
					case "list":
						for _, m := range rc.LRange(ctx, k, 0, -1).Val() {
							fmt.Fprintf(&all, "%s %s\n", k, m)
						}
					}
				}
				return all.Bytes()
			}}
		},
	}
}

func randHex(t *testing.T) string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// leakTokenSources are the token sources a client may be given: a static token, a
// source that returns a new token on every call (as a refreshing source
// does after a 401), and one that has nothing more to give after its first
// token (a ctx that ended: a token fetched again would be none at all).
func leakTokenSources() map[string]func() TokenSource {
	secret := func(n int64) string { return fmt.Sprintf("sk_live+%04d/Zx9QpL7mWv3Rt8Ky2Hn5=", n) }
	return map[string]func() TokenSource{
		"static": func() TokenSource { return StaticToken(secret(0)) },
		"rotating": func() TokenSource {
			var n atomic.Int64
			return TokenFunc(func(context.Context) (string, error) { return secret(n.Add(1)), nil })
		},
		"ended": func() TokenSource {
			var n atomic.Int64
			return TokenFunc(func(ctx context.Context) (string, error) {
				if n.Add(1) > 1 {
					return "", context.Canceled
				}
				return secret(1), nil
			})
		},
	}
}

// syncBuffer is a log sink for a handler shared by goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.b.Bytes()...)
}

// TestSecrets_NoSecretOrPersonalDataLeavesThroughErrorText drives every
// error status, as the API's JSON and as a gateway's HTML page, each
// echoing the bearer token it received, the request's personal data and a
// foreign e-mail and CPF, through a money request (PIX, credit card) and a
// read (GetSale), with a static, a rotating and an exhausted token source,
// on every key store. Nothing it echoes may appear in the error strings,
// the APIError's fields, a debug slog handler's output, Hook events or the
// store's raw bytes.
func TestSecrets_NoSecretOrPersonalDataLeavesThroughErrorText(t *testing.T) {
	customer := Customer{Name: "Maria Aparecida Silva", Email: "maria.silva@example.com", Document: "123.456.789-09", Phone: "+55 11 91234-5678"}
	const cardToken = "card_tok_9f8e7d6c5b4a"
	pol := testPolicy()
	pol.MaxSettleWait = 400 * time.Millisecond
	pol.MaxAttempts = 3

	stores := leakStores(t)
	for _, storeName := range []string{"memory", "sqlite", "postgres", "redis"} {
		t.Run(storeName, func(t *testing.T) {
			t.Parallel()
			ls := stores[storeName](t)
			if hp, ok := ls.store.(keystore.HistoryProver); ok {
				// A store this test just created: what it proves is not about a lost history.
				if err := hp.DeclareNew(context.Background(), "test: a new store"); err != nil {
					t.Fatal(err)
				}
			}
			sources := leakTokenSources()
			names := []string{"static", "rotating", "ended"}
			if storeName != "memory" {
				names = []string{"rotating"} // the token sources are the client's business, not the store's
			}
			var everything []string // all secrets met in this store
			for _, srcName := range names {
				for _, status := range leaktest.Statuses {
					for _, mode := range []int{0, 1, 2, 3} {
						asHTML, pass := mode&1 == 1, mode&2 == 2
						format := "json"
						if asHTML {
							format = "html"
						}
						if pass {
							format += "+lookups"
						}
						name := fmt.Sprintf("%s/%d/%s", srcName, status, format)
						gw := &leaktest.Gateway{Status: status, HTML: asHTML, PassLookups: pass}
						srv := httptest.NewServer(gw)
						logs := &syncBuffer{}
						var evMu sync.Mutex
						var events bytes.Buffer
						hook := func(_ context.Context, e Event) {
							evMu.Lock()
							defer evMu.Unlock()
							fmt.Fprintf(&events, "%+v\n", e)
							if e.Err != nil {
								fmt.Fprintf(&events, "%s\n", e.Err.Error())
							}
						}
						c, err := NewClient("cred_leak", sources[srcName](), WithBaseURL(srv.URL+"/v1"), WithStore(ls.store), WithRetryPolicy(pol),
							WithLogger(slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))), WithHook(hook))
						if err != nil {
							t.Fatal(err)
						}
						ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
						var errText bytes.Buffer
						record := func(err error) {
							if err == nil {
								t.Errorf("%s: a call against an error gateway succeeded", name)
								return
							}
							fmt.Fprintf(&errText, "%s\n%+v\n%#v\n", err.Error(), err, err)
							var apiErr *APIError
							if errors.As(err, &apiErr) {
								fmt.Fprintf(&errText, "%s\n%s\n%s\n", apiErr.Message, apiErr.Raw, apiErr.Code)
							}
							var ou *OutcomeUnknownError
							if errors.As(err, &ou) {
								fmt.Fprintf(&errText, "%s\n", ou.Reason)
							}
						}
						ref := "leak-" + strings.ReplaceAll(name, "/", "-")
						_, err = c.Payments.Pix(ctx, PixParams{OperationID: ref + "-pix", OfferID: "offer-basic", ExternalReference: ref + "-pix", Customer: customer})
						record(err)
						_, err = c.Payments.CreditCard(ctx, CreditCardParams{OperationID: ref + "-card", OfferID: "offer-basic", ExternalReference: ref + "-card", Customer: customer, CardToken: cardToken, Installments: 1})
						record(err)
						_, err = c.Payments.GetSale(ctx, "sale_"+strings.ReplaceAll(ref, "-", "_"))
						record(err)
						cancel()
						srv.Close()

						tokens, personal := gw.Sent()
						if len(tokens) == 0 {
							t.Fatalf("%s: the gateway received no token: the test proves nothing", name)
						}
						secrets := append(append(tokens, personal...), customer.Name, customer.Email, customer.Document, customer.Phone, cardToken,
							leaktest.ForeignEmail, leaktest.ForeignCPF)
						everything = append(everything, secrets...)
						for what, b := range map[string][]byte{"error text": errText.Bytes(), "debug log": logs.Bytes(), "Hook events": events.Bytes()} {
							if len(b) == 0 && (what == "error text" || what == "Hook events" && pass) {
								t.Errorf("%s: no %s to check", name, what)
							}
							if found := leaktest.Find(b, secrets...); len(found) > 0 {
								t.Errorf("%s: %s holds %q:\n%s", name, what, found, clip(b))
							}
						}
					}
				}
			}
			raw := ls.raw(t)
			if found := leaktest.Find(raw, everything...); len(found) > 0 {
				t.Errorf("the %s store holds %q", storeName, found)
			}
		})
	}
}

func clip(b []byte) string {
	if len(b) > 3000 {
		return string(b[:3000]) + "…"
	}
	return string(b)
}

// TestSecrets_RedactsTheSentTokenNotARefetchedOne: the token is removed by
// the value that was sent. A source that rotates (every call another
// token) or that has nothing more to give must not leave the sent one in
// Raw or Message. Without the fix (redacting whatever Token returns when
// the error is built) the sent token stays in both.
func TestSecrets_RedactsTheSentTokenNotARefetchedOne(t *testing.T) {
	for name, src := range leakTokenSources() {
		t.Run(name, func(t *testing.T) {
			gw := &leaktest.Gateway{Status: 401}
			srv := httptest.NewServer(gw)
			defer srv.Close()
			c, err := NewClient("cred_leak", src(), WithBaseURL(srv.URL+"/v1"), WithStore(keystore.NewMemory()), WithRetryPolicy(testPolicy()), WithLogger(quiet))
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Payments.GetSale(context.Background(), "sale_x")
			var apiErr *APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("want an APIError, got %v", err)
			}
			tokens, _ := gw.Sent()
			for _, tok := range tokens {
				for field, v := range map[string]string{"Raw": apiErr.Raw, "Message": apiErr.Message, "Error()": apiErr.Error()} {
					if strings.Contains(v, tok) || strings.Contains(v, strings.ReplaceAll(tok, "/", `\/`)) {
						t.Errorf("%s holds the sent token: %s", field, v)
					}
				}
			}
			if !strings.Contains(apiErr.Raw, "[redacted]") {
				t.Errorf("Raw shows no redaction (did the gateway echo?): %s", apiErr.Raw)
			}
		})
	}
}

// TestSecrets_StoredReasonsAreOurOwnWords: after 429 or an API 503 until
// the retries run out, and after the retry budget is spent, the record's
// reason is a status, a code and the SDK's words: none of the API's free
// text (before the fix, notExecuted stored cause.Error(), the API's
// message included).
func TestSecrets_StoredReasonsAreOurOwnWords(t *testing.T) {
	for _, status := range []int{429, 503, 401} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			gw := &leaktest.Gateway{Status: status, PassLookups: true}
			srv := httptest.NewServer(gw)
			defer srv.Close()
			store := keystore.NewMemory()
			pol := testPolicy()
			pol.MaxAttempts = 2
			c, err := NewClient("cred_leak", StaticToken("tok_0123456789abcdef"), WithBaseURL(srv.URL+"/v1"), WithStore(store), WithRetryPolicy(pol), WithLogger(quiet))
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Payments.Pix(context.Background(), PixParams{OperationID: "op-reason", OfferID: "offer-basic", ExternalReference: "ref-reason", Customer: goodCustomer})
			if err == nil {
				t.Fatal("succeeded against an error gateway")
			}
			rec, gerr := store.Get(context.Background(), RecordID("cred_leak", "op-reason"))
			if gerr != nil {
				t.Fatal(gerr)
			}
			if rec.State != keystore.StateNotExecuted {
				t.Fatalf("state %s, want not_executed", rec.State)
			}
			if strings.Contains(rec.Error, "invalid token") || strings.Contains(rec.Error, "customer") || !strings.Contains(rec.Error, fmt.Sprint(status)) {
				t.Errorf("stored reason %q: want the status and our words, no API text", rec.Error)
			}
		})
	}
}

// TestScrubAnswer is scrubAnswer's table: the token in every form an echo
// takes, the private values, e-mails and documents go; words stay.
func TestScrubAnswer(t *testing.T) {
	const tok = "sk+live/Zx9QpL7mWv3Rt8Ky="
	for _, c := range []struct{ in, want string }{
		{"invalid token " + tok, "invalid token [redacted]"},
		{`{"t":"sk+live\/Zx9QpL7mWv3Rt8Ky="}`, `{"t":"[redacted]"}`},
		{"token=sk%2Blive%2FZx9QpL7mWv3Rt8Ky%3D", "token=[redacted]"},
		{"Bearer" + tok + "x", "Bearer[redacted]x"},
		{"for Maria Silva <maria@example.com>", "for [redacted] <[e-mail]>"},
		{"cpf 123.456.789-09 and 12345678909", "cpf [number] and [number]"},
		{"offer offer-basic not found", "offer offer-basic not found"},
		// Digit runs inside identifiers are kept (an outcome-unknown reason
		// names the sale it found); documents and phones stand apart.
		{"found sale sale_5b4786fbb8ef510309ae (request req_1234567)", "found sale sale_5b4786fbb8ef510309ae (request req_1234567)"},
		{"phone +55 11 91234-5678, cpf:52998224725", "phone +[number], cpf:[number]"},
	} {
		if got := scrubAnswer(c.in, tok, []string{"Maria Silva"}); got != c.want {
			t.Errorf("scrubAnswer(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestDescribeErr: the stored description of a failure names its kind,
// never the text it carries.
func TestDescribeErr(t *testing.T) {
	apiErr := &APIError{StatusCode: 429, Code: "rate_limited", Message: "slow down maria@example.com", FromAPI: true}
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{apiErr, "API answered 429 rate_limited"},
		{fmt.Errorf("gave up: %w", apiErr), "API answered 429 rate_limited"},
		{&APIError{StatusCode: 502, Message: "tok"}, "API answered 502 (not the API's body)"},
		{&tokenError{err: errors.New("vault said tok_x")}, "the token source failed"},
		{fmt.Errorf("%w (last: x)", ErrBudgetExhausted), "retry budget exhausted"},
		{context.DeadlineExceeded, "timed out"},
		{&sendError{err: redact(errors.New(`malformed HTTP response "tok_secret_0123456789"`), "tok_secret_0123456789")}, "transport error"},
	} {
		if got := describeErr(c.err); got != c.want {
			t.Errorf("describeErr(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
