package pagpolar

import (
	"sync"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// shapes is what a client has learned about the API's answers from the
// API's own fresh answers to its own requests: a response to a request the
// client just sent is about that request, so its fields say how this API
// spells what the client sent. Only fresh (not replayed) 2xx answers teach;
// what is learned only ever widens what the SDK recognises, and a lesson
// the API contradicts is forgotten (the spelling becomes unrecognised
// again). Nothing is persisted: a new process starts from the tables in
// internal/wire.
type shapes struct {
	mu sync.Mutex
	// methods maps a normalised spelling the tables do not know to the
	// method it answered; "" marks a spelling seen for two methods.
	methods map[string]string
	// offerEcho: the API answers with the offer identifier the client
	// sent (then a different offer on a found effect proves it is not
	// this operation's). offerDiffers: it once answered with another, so
	// offers prove nothing.
	offerEcho, offerDiffers bool
	// noTimes: the API once answered an effect without a creation time
	// the SDK can read; charges then take a pre-send snapshot so that
	// earlier effects are excluded by ID instead of by time.
	noTimes bool
}

// method returns the method a spelling means: by the tables, or learned.
// learned says it comes from one answer of this API, not from the tables:
// such a spelling may confirm that a sale is an operation's, never prove
// that it is another's (an API that reports a channel, "online", for
// several methods would teach one of them).
func (s *shapes) method(raw string) (m string, known, learned bool) {
	if m, ok := wire.CanonicalMethod(raw); ok {
		return m, true, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.methods[wire.Normalize(raw)]
	return m, ok && m != "", true
}

// learnMethod records that the API spells sent as raw.
func (s *shapes) learnMethod(raw, sent string) {
	if raw == "" {
		return
	}
	if _, ok := wire.CanonicalMethod(raw); ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.methods == nil {
		s.methods = map[string]string{}
	}
	k := wire.Normalize(raw)
	if old, seen := s.methods[k]; seen && old != sent {
		s.methods[k] = "" // one spelling for two methods: it proves nothing
		return
	}
	s.methods[k] = sent
}

func (s *shapes) learnOffer(got, sent string) {
	if got == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if got == sent {
		s.offerEcho = true
	} else {
		s.offerDiffers = true
	}
}

func (s *shapes) offersProve() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.offerEcho && !s.offerDiffers
}

func (s *shapes) learnNoTimes() {
	s.mu.Lock()
	s.noTimes = true
	s.mu.Unlock()
}

func (s *shapes) timesUnusable() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.noTimes
}
