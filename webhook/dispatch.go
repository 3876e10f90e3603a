package webhook

import "sync"

// dispatcher queues keys for the workers so that the keys of one entity run
// one at a time, in the order they were queued, while other entities'
// keys run in parallel: a slow event holds up its own sale only, never a
// worker's whole share of them.
type dispatcher struct {
	mu       sync.Mutex
	max      int                 // keys queued or running at most; beyond, the store keeps them
	queued   map[string]bool     // key queued or running
	byEntity map[string][]string // entity → keys waiting, oldest first
	ready    []string            // entities with waiting keys and none running
	running  map[string]bool     // entities with a running key
	avail    chan struct{}       // a nudge per change; workers re-check under mu
}

func newDispatcher(workers, max int) *dispatcher {
	return &dispatcher{
		max:      max,
		queued:   make(map[string]bool),
		byEntity: make(map[string][]string),
		running:  make(map[string]bool),
		avail:    make(chan struct{}, workers),
	}
}

// push queues key unless it is already queued or running, or the queue is
// full (the store keeps the event; a later scan queues it).
func (d *dispatcher) push(key, entity string) bool {
	d.mu.Lock()
	if d.queued[key] || len(d.queued) >= d.max {
		d.mu.Unlock()
		return false
	}
	d.queued[key] = true
	d.byEntity[entity] = append(d.byEntity[entity], key)
	if !d.running[entity] && len(d.byEntity[entity]) == 1 {
		d.ready = append(d.ready, entity)
	}
	d.mu.Unlock()
	d.nudge()
	return true
}

// pop takes the next key whose entity is idle, and marks the entity running.
func (d *dispatcher) pop() (key, entity string, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.ready) == 0 {
		return "", "", false
	}
	entity = d.ready[0]
	d.ready[0] = ""
	d.ready = d.ready[1:]
	keys := d.byEntity[entity]
	key = keys[0]
	if len(keys) == 1 {
		delete(d.byEntity, entity)
	} else {
		d.byEntity[entity] = keys[1:]
	}
	d.running[entity] = true
	return key, entity, true
}

// done ends the run of key and lets entity's next key go.
func (d *dispatcher) done(key, entity string) {
	d.mu.Lock()
	delete(d.queued, key)
	delete(d.running, entity)
	more := len(d.byEntity[entity]) > 0
	if more {
		d.ready = append(d.ready, entity)
	}
	d.mu.Unlock()
	if more {
		d.nudge()
	}
}

func (d *dispatcher) nudge() {
	select {
	case d.avail <- struct{}{}:
	default: // every worker already has a nudge pending
	}
}
