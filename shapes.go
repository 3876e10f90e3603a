package pagpolar

import (
	"sync"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// shapes is what a client has learned about the API's answers. A field
// proves only what it was seen to carry (SAFETY rule 5): a value read
// under a name compares with what the client sent only once answers of
// that same kind (wire.Answer: POST answer, list item, GET by ID, webhook
// data) have carried what was sent under that same name, and never since
// carried something else there. It is learned from
//
//   - fresh (not replayed) 2xx answers to the client's own requests: such
//     an answer is about the request just sent (POST answers);
//   - the filter a list or a GET asked for: the items of GET
//     /refunds?sale_identifier=X name sale X, the plan changes of GET
//     /subscriptions/{id} that subscription;
//   - an effect of this client's own (its identifier came in a fresh answer
//     to a request of this client) met again in a list, a GET or a webhook:
//     what it carries there is what was sent.
//
// A name that carried something else once proves nothing for the life of
// the client. Nothing is persisted: a new process starts knowing nothing
// and proves nothing by a field until it has learned it.
type shapes struct {
	mu sync.Mutex
	// methods maps a normalised spelling the tables do not know to the
	// method it answered; "" marks a spelling seen for two methods.
	methods map[string]string
	// echo holds, per answer kind, effect kind, field and name, whether
	// the name was seen carrying what was sent (echoSeen) and whether it
	// once carried something else (echoDiffers).
	echo map[echoKey]echoState
	// own are effects this client's fresh answers named: what was sent for
	// each, by identifier (bounded: the oldest are forgotten).
	own      map[string]ownEffect
	ownOrder []string
	// noTimes: the API once answered an effect without a creation time
	// the SDK can read; charges then take a pre-send snapshot so that
	// earlier effects are excluded by ID instead of by time.
	noTimes bool
}

type echoKey struct {
	answer wire.Answer
	kind   effectKind
	field  wire.Field
	name   string
}

type echoState uint8

const (
	echoSeen echoState = 1 << iota
	echoDiffers
)

// ownEffect is what this client sent for one of its effects.
type ownEffect struct {
	kind                              effectKind
	ref, method, offer, saleID, subID string
}

// maxOwn bounds the own effects a client remembers.
const maxOwn = 512

// proves reports whether a value read under name in an answer of kind
// answer compares with what was sent: answers of that kind carried what was
// sent under that name, and never anything else.
func (s *shapes) proves(answer wire.Answer, kind effectKind, field wire.Field, name string) bool {
	if name == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.echo[echoKey{answer, kind, field, name}] == echoSeen
}

// learnEcho records that answers of kind answer carried got under name
// where sent was what the client sent.
func (s *shapes) learnEcho(answer wire.Answer, kind effectKind, field wire.Field, name, got, sent string) {
	if name == "" || got == "" || sent == "" {
		return
	}
	st := echoSeen
	if got != sent {
		st = echoDiffers
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.echo == nil {
		s.echo = map[echoKey]echoState{}
	}
	k := echoKey{answer, kind, field, name}
	s.echo[k] |= st
}

// learnMethodEcho records whether the method read under name is the one
// sent (by the tables, or by a spelling learned from a fresh answer).
func (s *shapes) learnMethodEcho(answer wire.Answer, kind effectKind, name, raw, sent string) {
	if raw == "" || sent == "" {
		return
	}
	m, known, _ := s.method(raw)
	if !known {
		return // a spelling nobody knows says nothing about the name
	}
	s.learnEcho(answer, kind, wire.FMethod, name, m, sent)
}

// learnEffect records, from effect e of an answer of its kind, what each
// field it compares carried, for what was sent (o).
func (s *shapes) learnEffect(e effect, o ownEffect) {
	if e.refSt == wire.Read {
		s.learnEcho(e.answer, e.kind, wire.FRef, e.refName, e.Ref, o.ref)
	}
	if e.methodSt == wire.Read {
		s.learnMethodEcho(e.answer, e.kind, e.methodName, e.Method, o.method)
	}
	if e.offerSt == wire.Read {
		s.learnEcho(e.answer, e.kind, wire.FOffer, e.offerName, e.Offer, o.offer)
	}
	if e.saleSt == wire.Read {
		s.learnEcho(e.answer, e.kind, wire.FSale, e.saleName, e.SaleID, o.saleID)
	}
	if e.subSt == wire.Read {
		s.learnEcho(e.answer, e.kind, wire.FSubscription, e.subName, e.SubID, o.subID)
	}
}

// rememberOwn records that effect id is this client's, sent as o.
func (s *shapes) rememberOwn(id string, o ownEffect) {
	if id == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.own == nil {
		s.own = map[string]ownEffect{}
	}
	if _, ok := s.own[id]; !ok {
		s.ownOrder = append(s.ownOrder, id)
		if len(s.ownOrder) > maxOwn {
			delete(s.own, s.ownOrder[0])
			s.ownOrder = s.ownOrder[1:]
		}
	}
	s.own[id] = o
}

// learnFromOwn: effects that are this client's own teach what their
// answer kind carries.
func (s *shapes) learnFromOwn(effs []effect) {
	for _, e := range effs {
		if e.idSt != wire.Read {
			continue
		}
		s.mu.Lock()
		o, ok := s.own[e.ID]
		s.mu.Unlock()
		if ok && o.kind == e.kind {
			s.learnEffect(e, o)
		}
	}
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
