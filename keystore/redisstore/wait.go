package redisstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// defaultWaitCooldown is how long durable writes on a master fail fast
// after a WAIT (or WAITAOF with replicas) on it fell short.
const defaultWaitCooldown = time.Second

// waitGate keeps WithWait from stalling every write of a master that cannot
// confirm it: a master with fewer replicas attached than the wait asks for
// (none, after a failover promoted its only replica) would make each write
// wait the full WAIT timeout for nothing. Before the first durable write to
// a master, and again after each shortfall, the gate reads ROLE: too few
// replicas attached → the writes fail at once, not sent. After a WAIT that
// fell short (a replica attached but frozen or lagging), writes on that
// master fail at once, not sent, for the cool-down; the next one checks
// ROLE and tries again. Writes on other masters are not affected.
type waitGate struct {
	mu    sync.Mutex
	nodes map[string]*gateNode
}

type gateNode struct {
	closedUntil time.Time // fail fast until then
	probe       bool      // read ROLE before the next write
	reason      string
}

func (g *waitGate) node(addr string) *gateNode {
	n, ok := g.nodes[addr]
	if !ok {
		n = &gateNode{probe: true}
		g.nodes[addr] = n
	}
	return n
}

// admit returns nil if durable writes may be sent to node, or an error
// wrapping keystore.ErrUnavailable and ErrNotDurable (nothing sent).
func (s *Store) admit(ctx context.Context, node *redis.Client) error {
	d := s.cfg.durability
	if d.replicas == 0 {
		return nil // WAITAOF with a local fsync only
	}
	addr := node.Options().Addr
	s.gate.mu.Lock()
	n := s.gate.node(addr)
	now := time.Now()
	if now.Before(n.closedUntil) {
		reason := n.reason
		s.gate.mu.Unlock()
		return fmt.Errorf("%w: %w: not sent: %s (durable writes on this master fail fast for %s after that)", keystore.ErrUnavailable, ErrNotDurable, reason, s.cfg.waitCooldown)
	}
	probe := n.probe
	s.gate.mu.Unlock()
	if !probe {
		return nil
	}
	attached, err := replicasAttached(ctx, node)
	s.gate.mu.Lock()
	defer s.gate.mu.Unlock()
	if err != nil {
		if isServerReply(err) {
			// ROLE is refused (an ACL): send, and let WAIT answer.
			n.probe = false
			return nil
		}
		return wrapErr("ROLE", addr, err)
	}
	if attached < d.replicas {
		n.closedUntil = time.Now().Add(s.cfg.waitCooldown)
		n.reason = fmt.Sprintf("master %s has %d replicas attached and %s needs %d", addr, attached, d, d.replicas)
		return fmt.Errorf("%w: %w: not sent: %s", keystore.ErrUnavailable, ErrNotDurable, n.reason)
	}
	n.probe = false
	return nil
}

// fellShort closes the gate of node for the cool-down after a wait that
// did not confirm a write.
func (s *Store) fellShort(node *redis.Client, waitErr error) {
	if s.cfg.durability.replicas == 0 {
		return
	}
	s.gate.mu.Lock()
	defer s.gate.mu.Unlock()
	n := s.gate.node(node.Options().Addr)
	n.closedUntil = time.Now().Add(s.cfg.waitCooldown)
	n.probe = true
	n.reason = fmt.Sprintf("master %s: %v", node.Options().Addr, waitErr)
}

// replicasAttached counts the replicas ROLE lists on a master.
func replicasAttached(ctx context.Context, c *redis.Client) (int, error) {
	res, err := c.Do(ctx, "role").Slice()
	if err != nil {
		return 0, err
	}
	if len(res) < 3 || res[0] != "master" {
		return 0, fmt.Errorf("ROLE: %v is not a master's answer", res)
	}
	list, ok := res[2].([]any)
	if !ok {
		return 0, fmt.Errorf("ROLE: replica list is %T", res[2])
	}
	return len(list), nil
}
