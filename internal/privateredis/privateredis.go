package privateredis

import (
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is one private redis-server.
type Server struct {
	Addr string // host:port

	bin, dir, port string
	args           []string
	cmd            *exec.Cmd
}

// Start runs redis-server with no persistence unless args say otherwise
// (they follow the defaults: "--appendonly", "yes" overrides), waits until
// it answers, and stops it when the test ends. The test is skipped when
// redis-server is not installed.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not on PATH: skipping a test that needs a private Redis")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	s := &Server{Addr: "127.0.0.1:" + port, bin: bin, dir: t.TempDir(), port: port, args: args}
	t.Cleanup(func() { s.stop() })
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *Server) start() error {
	cmd := exec.Command(s.bin, append([]string{"--port", s.port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", s.dir}, s.args...)...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	cmd.WaitDelay = 10 * time.Second // a forked child holding the pipes cannot hold Wait
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting redis-server: %w", err)
	}
	s.cmd = cmd
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer c.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the private redis-server on %s did not answer within 15 s: %w", s.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *Server) stop() {
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(syscall.SIGCONT)
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

// Restart SIGKILLs the server and starts it again on the same port and
// directory (without persistence, it comes back empty), and waits until
// it answers.
func (s *Server) Restart() error {
	s.stop()
	return s.start()
}

// Pause SIGSTOPs the server: connections stay open and nothing answers.
// Call the returned function to let it go on.
func (s *Server) Pause() (resume func()) {
	p := s.cmd.Process
	_ = p.Signal(syscall.SIGSTOP)
	return func() { _ = p.Signal(syscall.SIGCONT) }
}
