package privatepg

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
)

// Server is one private PostgreSQL server.
type Server struct {
	// DSN reaches the server's "postgres" database as the superuser.
	DSN string

	bin, data, sock, port string
	settings              []string
	cred                  *syscall.Credential
	cmd                   *exec.Cmd
	log                   *bytes.Buffer
}

// Start initialises a cluster and starts its server; settings are
// "name=value" server settings (postgres -c). The test is skipped when
// initdb or postgres is not installed, or when it runs as root and there
// is no "postgres" user to run the server as. The server is stopped (and
// its directory removed) when the test ends.
func Start(t testing.TB, settings ...string) *Server {
	t.Helper()
	bindir := ""
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		bindir = strings.TrimSpace(string(out))
	}
	find := func(name string) string {
		if bindir != "" {
			if p := filepath.Join(bindir, name); fileExists(p) {
				return p
			}
		}
		p, err := exec.LookPath(name)
		if err != nil {
			t.Skipf("%s is not installed: skipping a test that needs a private PostgreSQL", name)
		}
		return p
	}
	initdb, postgres := find("initdb"), find("postgres")
	s := &Server{bin: postgres, settings: settings, log: &bytes.Buffer{}}
	var uid, gid int = -1, -1
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skip("running as root with no postgres user: skipping a test that needs a private PostgreSQL")
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	// Not t.TempDir: its parent is private to this user, and the server
	// may run as another.
	dir, err := os.MkdirTemp("", "pagpolar-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if s.cred != nil {
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	s.data, s.sock = filepath.Join(dir, "data"), dir
	cmd := exec.Command(initdb, "-D", s.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.port = strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	s.DSN = "postgres://postgres@127.0.0.1:" + s.port + "/postgres?sslmode=disable"
	t.Cleanup(func() {
		if s.cmd != nil {
			s.Kill(t)
		}
	})
	s.start(t)
	return s
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// start runs the server and waits (up to 60 s) until it accepts queries,
// crash recovery included.
func (s *Server) start(t testing.TB) {
	t.Helper()
	args := []string{"-D", s.data, "-p", s.port, "-k", s.sock,
		"-c", "listen_addresses=127.0.0.1", "-c", "shared_buffers=16MB", "-c", "max_connections=60",
		"-c", "fsync=off", "-c", "full_page_writes=off", "-c", "logging_collector=off"}
	for _, kv := range s.settings {
		args = append(args, "-c", kv)
	}
	s.log.Reset()
	cmd := exec.Command(s.bin, args...)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	// Wait returns at most this long after the postmaster exits, even if
	// a process it left holds the log pipe.
	cmd.WaitDelay = 10 * time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting postgres: %v", err)
	}
	s.cmd = cmd
	db, err := sql.Open("pgx", s.DSN+"&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := db.PingContext(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the private PostgreSQL did not answer within 60 s: %v\n%s", err, s.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// members are the server's processes: the postmaster and its children
// (each of which runs in a session of its own, so a process group does
// not reach them).
func (s *Server) members() []int {
	if s.cmd == nil || s.cmd.Process == nil {
		return nil
	}
	pm := s.cmd.Process.Pid
	out := []int{pm}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, _, ok := procStat(pid); ok && ppid == pm {
			out = append(out, pid)
		}
	}
	return out
}

// procStat reads a process's parent and state from /proc.
func procStat(pid int) (ppid int, state byte, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0, false
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	return ppid, f[0][0], err == nil
}

func (s *Server) signal(sig syscall.Signal) {
	for _, pid := range s.members() {
		_ = syscall.Kill(pid, sig)
	}
}

// Kill crashes the server: every process is stopped at once, then
// SIGKILLed. What was committed but not yet written from PostgreSQL's WAL
// buffers (with synchronous_commit off) is lost.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	// The postmaster stops first, so that no backend is forked after the
	// list is read: one forked meanwhile outlived the kill, holding the
	// log pipe open, and Wait never returned.
	if s.cmd != nil && s.cmd.Process != nil {
		_ = syscall.Kill(s.cmd.Process.Pid, syscall.SIGSTOP)
	}
	pids := s.members()
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGSTOP)
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	_ = s.cmd.Wait()
	s.cmd = nil
	// Wait until no process is left (a zombie is gone), so that a restart
	// does not find the old server's shared memory in use.
	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range pids {
		for {
			_, state, ok := procStat(pid)
			if !ok || state == 'Z' || state == 'X' {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("process %d of the private PostgreSQL outlived SIGKILL for 30 s", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// Restart starts the server again on the same data (after Kill: crash
// recovery) and waits until it answers.
func (s *Server) Restart(t testing.TB) { t.Helper(); s.start(t) }

// Pause SIGSTOPs the server and its backends: connections stay open and
// nothing answers. Call the returned function to let it go on.
func (s *Server) Pause() (resume func()) {
	s.signal(syscall.SIGSTOP)
	return func() { s.signal(syscall.SIGCONT) }
}

// String names the server for logs.
func (s *Server) String() string { return fmt.Sprintf("private PostgreSQL on 127.0.0.1:%s", s.port) }

// StopWALWriter SIGSTOPs the server's WAL writer alone. With
// synchronous_commit off a COMMIT returns before its WAL is written, and
// the WAL writer writes it within wal_writer_delay (the last partial page
// only then); stopped, every commit from now on stays in shared memory
// only, so that a Kill loses what an operating-system crash would (up to
// 3 × wal_writer_delay of commits). Call the returned function to let it
// go on (Kill does not need it).
func (s *Server) StopWALWriter(t testing.TB) (resume func()) {
	t.Helper()
	pid := s.member(t, "walwriter")
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	return func() { _ = syscall.Kill(pid, syscall.SIGCONT) }
}

// member is the pid of the server's process whose title names role.
func (s *Server) member(t testing.TB, role string) int {
	t.Helper()
	for _, pid := range s.members()[1:] {
		title, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if err == nil && strings.Contains(string(title), role) {
			return pid
		}
	}
	t.Fatalf("no %s process among the private PostgreSQL's", role)
	return 0
}
