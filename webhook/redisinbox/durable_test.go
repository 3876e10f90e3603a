package redisinbox_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pagpolar/pagpolar-go/webhook"
	"github.com/pagpolar/pagpolar-go/webhook/redisinbox"
)

// privateRedis is a redis-server of this test's own (the same binary as
// the shared one) on a free loopback port, with its data in dir, so the
// test can kill and restart it; the pattern of keystore/redisstore's tests.
type privateRedis struct {
	t    *testing.T
	bin  string
	port string
	dir  string
	args []string
	cmd  *exec.Cmd
}

func startPrivateRedis(t *testing.T, args ...string) *privateRedis {
	t.Helper()
	if os.Getenv("PAGPOLAR_TEST_REDIS_URL") == "" {
		t.Skip("PAGPOLAR_TEST_REDIS_URL is not set: skipping the Redis store")
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not on PATH: skipping the private Redis test")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	p := &privateRedis{t: t, bin: bin, port: port, dir: t.TempDir(), args: args}
	p.start()
	t.Cleanup(p.kill)
	return p
}

func (p *privateRedis) addr() string { return "127.0.0.1:" + p.port }

func (p *privateRedis) start() {
	p.t.Helper()
	p.cmd = exec.Command(p.bin, append([]string{"--port", p.port, "--bind", "127.0.0.1", "--save", "", "--dir", p.dir}, p.args...)...)
	p.cmd.Stdout, p.cmd.Stderr = io.Discard, io.Discard
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: p.addr()})
	defer c.Close()
	deadline := time.Now().Add(15 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			p.t.Fatalf("redis-server on port %s did not answer within 15 s", p.port)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill stops the server at once (SIGKILL: no shutdown save).
func (p *privateRedis) kill() {
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
		p.cmd = nil
	}
}

func (p *privateRedis) client(t *testing.T) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: p.addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// A Redis that keeps nothing on disk is refused unless opted out by name.
func TestNewRefusesRedisWithoutAOF(t *testing.T) {
	srv := startPrivateRedis(t, "--appendonly", "no")
	c := srv.client(t)
	_, err := redisinbox.New(c, redisinbox.WithLogger(quietLogger()))
	if !errors.Is(err, redisinbox.ErrVolatile) {
		t.Fatalf("New on a Redis with appendonly no: %v, want ErrVolatile", err)
	}
	if _, err := redisinbox.New(c, redisinbox.WithLogger(quietLogger()), redisinbox.AllowVolatile()); err != nil {
		t.Fatalf("New with AllowVolatile: %v", err)
	}
}

// With appendonly yes and appendfsync always, New needs no opt-out, and an
// event acknowledged by Insert survives a SIGKILL of Redis.
func TestDurableRedisKeepsAcknowledgedEvents(t *testing.T) {
	srv := startPrivateRedis(t, "--appendonly", "yes", "--appendfsync", "always")
	s, err := redisinbox.New(srv.client(t), redisinbox.WithLogger(quietLogger()))
	if err != nil {
		t.Fatalf("New on a Redis with an AOF: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rec := webhook.Record{Key: "TRANSACTION_PAID:s1", Event: "TRANSACTION_PAID", Entity: "sale:s1", EnvelopeID: "evt_1",
		Payload: []byte(`{"event":"TRANSACTION_PAID","data":{"transaction":{"id":"s1"}}}`)}
	if _, ins, err := s.Insert(ctx, rec); err != nil || !ins {
		t.Fatalf("Insert = %v, %v", ins, err)
	}
	srv.kill()
	srv.start()
	s2, err := redisinbox.New(srv.client(t), redisinbox.WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	got, err := s2.Get(ctx, rec.Key)
	if err != nil {
		t.Fatalf("acknowledged event after a SIGKILL of Redis: %v", err)
	}
	if got.State != webhook.StateReceived || !bytes.Equal(got.Payload, rec.Payload) {
		t.Fatalf("after the restart: %+v", got)
	}
	if rs, err := s2.Due(ctx, 10); err != nil || len(rs) != 1 {
		t.Fatalf("after the restart the event is not due: %v, %v", rs, err)
	}
}
