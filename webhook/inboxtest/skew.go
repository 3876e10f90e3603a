// Conformance cases for clock skew between inbox processes: a process whose
// clock runs ahead never steals a live lease, and a lease still expires; with
// the spy store and inbox helpers they use.

package inboxtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/webhook"
)

// offsetClock is a process clock off by d; its waits are real.
type offsetClock struct{ d time.Duration }

func (c offsetClock) Now() time.Time                         { return time.Now().Add(c.d) }
func (c offsetClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// spyStore counts Due calls and can go down (every call fails) as the store
// of a process that crashed or was cut off.
type spyStore struct {
	webhook.Store
	down atomic.Bool
	dues atomic.Int64
}

func (s *spyStore) Insert(ctx context.Context, rec webhook.Record) (webhook.Record, bool, error) {
	if s.down.Load() {
		return webhook.Record{}, false, errDown
	}
	return s.Store.Insert(ctx, rec)
}

func (s *spyStore) Claim(ctx context.Context, key, owner string, ttl time.Duration) (webhook.Record, error) {
	if s.down.Load() {
		return webhook.Record{}, errDown
	}
	return s.Store.Claim(ctx, key, owner, ttl)
}

func (s *spyStore) Renew(ctx context.Context, key string, token int64, ttl time.Duration) (webhook.Record, error) {
	if s.down.Load() {
		return webhook.Record{}, errDown
	}
	return s.Store.Renew(ctx, key, token, ttl)
}

func (s *spyStore) Complete(ctx context.Context, key string, token int64, out webhook.Outcome) (webhook.Record, error) {
	if s.down.Load() {
		return webhook.Record{}, errDown
	}
	return s.Store.Complete(ctx, key, token, out)
}

func (s *spyStore) Due(ctx context.Context, limit int) ([]webhook.Record, error) {
	if s.down.Load() {
		return nil, errDown
	}
	defer s.dues.Add(1)
	return s.Store.Due(ctx, limit)
}

func (s *spyStore) DeleteExpired(ctx context.Context, before time.Time, limit int) (int, error) {
	if s.down.Load() {
		return 0, errDown
	}
	return s.Store.DeleteExpired(ctx, before, limit)
}

var errDown = fmt.Errorf("%w: inboxtest: this process is cut off", webhook.ErrUnavailable)

// deliver posts body to in as PagPolar would, and wants 200.
func deliver(t *testing.T, in *webhook.Inbox, body string) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/webhooks/pagpolar", strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+inboxToken)
	w := httptest.NewRecorder()
	in.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("delivery: %d %s", w.Code, w.Body.String())
	}
}

const inboxToken = "whk_inboxtest"

// startInbox starts an Inbox on s whose clock is off by offset.
func startInbox(t *testing.T, s webhook.Store, owner string, offset time.Duration, edit func(*webhook.Config)) *webhook.Inbox {
	t.Helper()
	cfg := webhook.Config{
		Store: s, Tokens: []string{inboxToken}, PlaintextPayloads: true,
		Default:      func(context.Context, *webhook.Event) error { return nil },
		PollInterval: 20 * time.Millisecond, Owner: owner, Clock: offsetClock{offset},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	edit(&cfg)
	in, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), waitBound)
		defer cancel()
		if err := in.Shutdown(c); err != nil {
			t.Errorf("Shutdown %s: %v", owner, err)
		}
	})
	return in
}

func waitChan[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitBound):
		t.Fatalf("timed out after %v waiting for %s", waitBound, what)
	}
	var zero T
	return zero
}

// A process whose clock is behind holds a lease (and renews it); a process
// whose clock is far ahead scans the store again and again. Judged by the
// ahead clock the lease expired long ago; by the store's it is live, so the
// event is never claimed or run a second time.
func testSkewAheadNoSteal(t *testing.T, s webhook.Store) {
	const key = "TRANSACTION_PAID:skew1"
	entered, release := make(chan struct{}), make(chan struct{})
	holderDone := make(chan webhook.Record, 1)
	behind := startInbox(t, s, "behind", -skew, func(c *webhook.Config) {
		c.LeaseTTL = 3 * time.Second
		c.Default = func(ctx context.Context, ev *webhook.Event) error {
			close(entered)
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		c.OnOutcome = func(r webhook.Record) { holderDone <- r }
	})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce) // runs before the Shutdown startInbox registered
	deliver(t, behind, `{"id":"evt_1","event":"TRANSACTION_PAID","data":{"transaction":{"id":"skew1"}}}`)
	waitChan(t, "the event to run on the process whose clock is behind", entered)
	var stolen atomic.Int64
	spy := &spyStore{Store: s}
	startInbox(t, spy, "ahead", skew, func(c *webhook.Config) {
		c.Default = func(context.Context, *webhook.Event) error { stolen.Add(1); return nil }
	})
	deadline := time.Now().Add(waitBound)
	for spy.dues.Load() < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("the process whose clock is ahead scanned %d times in %v", spy.dues.Load(), waitBound)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := stolen.Load(); n != 0 {
		t.Fatalf("a process whose clock is %v ahead ran an event leased by one %v behind (%d runs)", skew, skew, n)
	}
	if r := mustGet(t, s, key); r.LeaseOwner != "behind" || r.LeaseToken != 1 || r.Attempts != 1 {
		t.Fatalf("after 5 scans by the ahead process: owner %q token %d attempts %d; want behind 1 1", r.LeaseOwner, r.LeaseToken, r.Attempts)
	}
	releaseOnce()
	if r := waitChan(t, "the holder's outcome", holderDone); r.State != webhook.StateProcessed || r.Attempts != 1 {
		t.Errorf("holder's outcome %s attempts %d, want processed 1", r.State, r.Attempts)
	}
	if n := stolen.Load(); n != 0 {
		t.Errorf("the event ran %d more times", n)
	}
}

// A process whose clock is far ahead claims an event and is cut off (a
// crash): its lease must expire after its TTL by the store's clock, so a
// process whose clock is behind takes the event over in about a TTL, not
// in the twenty minutes the two clocks are apart.
func testSkewLeaseExpires(t *testing.T, s webhook.Store) {
	const key = "TRANSACTION_PAID:skew2"
	const ttl = 600 * time.Millisecond
	entered, release := make(chan struct{}), make(chan struct{})
	cut := &spyStore{Store: s}
	ahead := startInbox(t, cut, "ahead", skew, func(c *webhook.Config) {
		c.LeaseTTL = ttl
		c.HandlerTimeout = -1
		c.Default = func(ctx context.Context, ev *webhook.Event) error {
			if ev.Attempt == 1 {
				close(entered)
				<-release // the crashed process: never completes
			}
			return errors.New("the crashed run")
		}
	})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce) // runs before the Shutdown startInbox registered
	deliver(t, ahead, `{"id":"evt_2","event":"TRANSACTION_PAID","data":{"transaction":{"id":"skew2"}}}`)
	waitChan(t, "the event to run on the process whose clock is ahead", entered)
	cut.down.Store(true) // from now on it neither renews nor completes
	claimedAt := time.Now()
	taken := make(chan webhook.Record, 4)
	startInbox(t, s, "behind", -skew, func(c *webhook.Config) {
		c.LeaseTTL = longTTL
		c.Default = func(context.Context, *webhook.Event) error { return nil }
		c.OnOutcome = func(r webhook.Record) { taken <- r }
	})
	r := waitChan(t, "the process whose clock is behind to take the event over", taken)
	if r.Key != key || r.State != webhook.StateProcessed || r.Attempts != 2 || r.LeaseToken != 2 {
		t.Errorf("taken over: %s %s attempts %d token %d; want %s processed 2 2", r.Key, r.State, r.Attempts, r.LeaseToken, key)
	}
	if d := time.Since(claimedAt); d > skew/2 {
		t.Errorf("taken over after %v: the lease lasted by the claimer's clock", d)
	}
	// The crashed process comes back: its outcome is fenced off.
	cut.down.Store(false)
	releaseOnce()
	c, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	if err := ahead.Shutdown(c); err != nil {
		t.Fatalf("Shutdown of the process that came back: %v", err)
	}
	if g := mustGet(t, s, key); g.State != webhook.StateProcessed || g.LeaseToken != 2 || g.Attempts != 2 {
		t.Errorf("after the crashed process returned: %s token %d attempts %d; want processed 2 2", g.State, g.LeaseToken, g.Attempts)
	}
}
