package pagpolartest

import (
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// Event is a business event (the future webhook sender turns them into
// deliveries). Name is a wire.Event* constant: TRANSACTION_CREATED,
// TRANSACTION_PAID, TRANSACTION_DECLINED, TRANSACTION_REFUNDED,
// SUBSCRIPTION_CREATED, SUBSCRIPTION_RENEWED, SUBSCRIPTION_PLAN_CHANGED.
// Transaction or Subscription is a snapshot of the object right after the
// change.
type Event struct {
	Name         string
	At           time.Time // on the server's Clock
	Transaction  *wire.Sale
	Subscription *wire.Subscription
	CredentialID string
}

// emitSale records an event about sl. Called with s.mu held; delivered by
// deliverEvents once the lock is released.
func (s *Server) emitSale(name string, sl *sale, now time.Time) {
	v := sl.view()
	s.events = append(s.events, Event{Name: name, At: now, Transaction: &v, CredentialID: sl.cred})
}

// emitSub records an event about sub. Called with s.mu held.
func (s *Server) emitSub(name string, sub *subscription, now time.Time) {
	v := sub.view(now, false)
	s.events = append(s.events, Event{Name: name, At: now, Subscription: &v, CredentialID: sub.cred})
}

// deliverEvents hands the events not yet delivered to the OnEvent functions,
// in order and one at a time, without holding s.mu (so that they may call
// the Server). If another goroutine is delivering, it delivers ours too.
func (s *Server) deliverEvents() {
	s.mu.Lock()
	if s.delivering {
		s.mu.Unlock()
		return
	}
	s.delivering = true
	done := false
	defer func() {
		if !done { // an OnEvent function panicked: let the next commit deliver
			s.mu.Lock()
			s.delivering = false
			s.mu.Unlock()
		}
	}()
	for s.delivered < len(s.events) {
		ev, fns := s.events[s.delivered], s.eventFns
		s.delivered++
		s.mu.Unlock()
		for _, fn := range fns {
			fn(ev)
		}
		s.mu.Lock()
	}
	// Cleared under the same lock as the last check, so that an event added
	// meanwhile is delivered by the goroutine that added it.
	s.delivering = false
	done = true
	s.mu.Unlock()
}
