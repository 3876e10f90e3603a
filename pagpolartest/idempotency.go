package pagpolartest

import "time"

// credential is one API credential: its idempotency keys and its rate-limit
// window. Guarded by Server.mu.
type credential struct {
	id   string
	keys map[string]*keyEntry

	rlWindow time.Time // start of the current rate-limit minute
	rlCount  int
}

// keyEntry is one Idempotency-Key of a credential: in processing, or
// finished with a stored 2xx answer. Keys that finished non-2xx are deleted
// (released).
type keyEntry struct {
	gen        uint64 // identifies the request that owns the entry
	processing bool
	startedAt  time.Time // the in-processing mark runs from here
	finishedAt time.Time // the replay window runs from here
	status     int
	body       []byte
}

// claim is the outcome of looking a key up.
type claim int

const (
	claimProcess    claim = iota // the caller owns the key and processes the request
	claimInProgress              // 409
	claimReplay                  // answer the stored response
)

// claimKey looks key up for cred and, when the request is to be processed,
// marks the key in processing under a new generation. It implements the
// documented table: in processing (within the window) → 409; finished 2xx
// within the replay window → replay; otherwise (never used, released, mark
// expired, replay window passed) → process.
func (s *Server) claimKey(cred, key string) (claim, *keyEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.Clock.Now()
	c := s.credential(cred)
	if e, ok := c.keys[key]; ok {
		switch {
		case e.processing && now.Sub(e.startedAt) < s.cfg.processingWindow:
			return claimInProgress, nil
		case !e.processing && now.Sub(e.finishedAt) < s.cfg.replayWindow:
			cp := *e
			return claimReplay, &cp
		}
	}
	s.keyGen++
	e := &keyEntry{gen: s.keyGen, processing: true, startedAt: now}
	c.keys[key] = e
	return claimProcess, e
}

// finishKey ends the processing of generation gen of key: a 2xx answer is
// stored for replay, anything else releases the key. If the key has since
// been taken over by another request (its mark expired), it is left alone.
func (s *Server) finishKey(cred, key string, gen uint64, status int, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.credential(cred)
	e, ok := c.keys[key]
	if !ok || e.gen != gen {
		return
	}
	if status < 200 || status > 299 {
		delete(c.keys, key)
		return
	}
	e.processing = false
	e.finishedAt = s.Clock.Now()
	e.status = status
	e.body = body
}

// releaseKey releases generation gen of key, as an error answer does.
func (s *Server) releaseKey(cred, key string, gen uint64) { s.finishKey(cred, key, gen, 0, nil) }

// allowRate counts a money request against cred's per-minute limit. When
// over it, it returns false and the seconds until the next minute.
func (s *Server) allowRate(cred string) (bool, int) {
	if s.cfg.rateLimit <= 0 {
		return true, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.Clock.Now()
	c := s.credential(cred)
	if w := now.Truncate(time.Minute); !w.Equal(c.rlWindow) {
		c.rlWindow, c.rlCount = w, 0
	}
	if c.rlCount >= s.cfg.rateLimit {
		return false, retryAfterSeconds(c.rlWindow.Add(time.Minute).Sub(now))
	}
	c.rlCount++
	return true, 0
}

// retryAfterSeconds rounds d up to whole seconds, at least 1.
func retryAfterSeconds(d time.Duration) int {
	sec := max(int((d+time.Second-1)/time.Second), 1)
	return sec
}
