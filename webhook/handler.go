package webhook

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// ServeHTTP receives one delivery: 401 (nothing read, nothing stored) unless
// the Authorization header carries a configured token; 405 unless POST; 413
// for a body over MaxBodyBytes; 400 for a body that is not an envelope; 200
// for a test event that is not accepted and for an event with empty data,
// both dropped; otherwise 200 once the event is stored (or found stored
// under its key), and 503 if it cannot be stored, so that PagPolar resends.
// The body is stored sealed when Config.PayloadKeys is set.
// It never waits for processing.
func (in *Inbox) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !in.authorized(r.Header.Get(wire.HeaderAuthorization)) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="pagpolar-webhook"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		in.log.WarnContext(r.Context(), "webhook: delivery rejected: wrong or missing token", slog.String("remote", r.RemoteAddr))
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, in.cfg.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			in.log.WarnContext(r.Context(), "webhook: delivery rejected: body too large", slog.Int64("limit", in.cfg.MaxBodyBytes))
			return
		}
		http.Error(w, "cannot read body", http.StatusBadRequest)
		return
	}
	env, err := ParseEnvelope(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		in.log.WarnContext(r.Context(), "webhook: delivery rejected", slog.Any("error", err))
		return
	}
	test := env.Test || strings.EqualFold(strings.TrimSpace(r.Header.Get(wire.HeaderTestEvent)), "true")
	if test && !in.cfg.AcceptTestEvents {
		in.log.InfoContext(r.Context(), "webhook: test event dropped", slog.String("event", env.Event))
		w.WriteHeader(http.StatusOK)
		return
	}
	if Empty(env) {
		in.log.DebugContext(r.Context(), "webhook: event with empty data ignored", slog.String("event", env.Event))
		w.WriteHeader(http.StatusOK)
		return
	}
	key, dedupe, err := in.cfg.Key(env)
	if errors.Is(err, ErrUseFallbackKey) {
		key, dedupe, err = "", true, nil
		if key, err = FallbackKey(env, body); err == nil {
			in.log.InfoContext(r.Context(), "webhook: event stored under the fallback key", slog.String("event", env.Event), slog.String("key", key))
		}
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		in.log.WarnContext(r.Context(), "webhook: delivery rejected: no dedupe key", slog.String("event", env.Event), slog.Any("error", err))
		return
	}
	entity := entityOf(env)
	if !dedupe {
		// Every delivery is its own event; the random part keeps two
		// deliveries apart even when PagPolar sends no envelope id.
		key = "nodedupe:" + env.Event + ":" + entity + ":" + randomHex(12)
	}
	if test {
		key = "test:" + key
	}
	payload := body
	if in.sealer != nil {
		if payload, err = in.sealer.sealBody(key, body); err != nil {
			http.Error(w, "cannot store the event, send it again", http.StatusServiceUnavailable)
			in.log.ErrorContext(r.Context(), "webhook: cannot seal delivery; answered 503", slog.String("key", key), slog.Any("error", err))
			return
		}
	}
	// A delivery PagPolar gave up on meanwhile is still worth storing: finish
	// the write even if the request is cancelled, within PersistTimeout.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), in.cfg.PersistTimeout)
	defer cancel()
	// The answer must not wait on a store that ignores its context (a
	// go-redis client without ContextTimeoutEnabled waits its own
	// ReadTimeout): after PersistTimeout the answer is 503 and PagPolar
	// resends; an insert that lands later only makes the resend a duplicate.
	type insertResult struct {
		rec Record
		ok  bool
		err error
	}
	done := make(chan insertResult, 1)
	go func() {
		rec, ok, err := in.cfg.Store.Insert(ctx, Record{
			Key: key, Event: env.Event, Entity: entity, EnvelopeID: env.ID, Payload: payload,
		})
		done <- insertResult{rec, ok, err}
	}()
	var res insertResult
	select {
	case res = <-done:
	case <-ctx.Done():
		res.err = fmt.Errorf("store did not answer within PersistTimeout: %w", ctx.Err())
	}
	rec, inserted, err := res.rec, res.ok, res.err
	if err != nil {
		http.Error(w, "cannot store the event, send it again", http.StatusServiceUnavailable)
		in.log.ErrorContext(r.Context(), "webhook: cannot store delivery; answered 503 so that PagPolar resends",
			slog.String("key", key), slog.String("envelope_id", env.ID), slog.Any("error", err))
		return
	}
	w.WriteHeader(http.StatusOK)
	switch {
	case inserted:
		in.enqueue(rec)
	case Claimable(rec, in.cfg.Clock.Now()):
		// A duplicate of an event not yet processed resumes it: received,
		// failed (without waiting for its backoff) or left by a crash. This
		// clock only decides whether to try: Claim decides by the store's.
		in.log.InfoContext(r.Context(), "webhook: duplicate delivery resumes event", slog.String("key", key), slog.String("state", string(rec.State)))
		in.enqueue(rec)
	default:
		in.log.DebugContext(r.Context(), "webhook: duplicate delivery acknowledged", slog.String("key", key), slog.String("state", string(rec.State)))
	}
}

// authorized compares the header with every configured token in constant
// time: the hashes have one length whatever was sent, and every token is
// compared, so neither the length nor which token matched leaks.
func (in *Inbox) authorized(header string) bool {
	const scheme = "Bearer "
	if len(header) < len(scheme) || !strings.EqualFold(header[:len(scheme)], scheme) {
		return false
	}
	got := sha256.Sum256([]byte(header[len(scheme):]))
	ok := 0
	for i := range in.tokens {
		ok |= subtle.ConstantTimeCompare(got[:], in.tokens[i][:])
	}
	return ok == 1
}
