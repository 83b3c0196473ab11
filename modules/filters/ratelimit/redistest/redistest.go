// Package redistest runs a real redis-server on a loopback port for the RateLimit filter's Global
// mode tests. Without the redis-server binary the test is skipped, with a message saying so;
// under COXSWAIN_REQUIRE_REDIS=1 (CI, which installs it) it fails instead.
package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Server is one redis-server process.
type Server struct {
	// Addr is its "127.0.0.1:port".
	Addr string

	t    testing.TB
	bin  string
	port int
	cmd  *exec.Cmd
	done chan struct{}
}

// Start runs redis-server on a free loopback port, without persistence, until t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("COXSWAIN_REQUIRE_REDIS") != "" {
			t.Fatalf("redis-server not found, and COXSWAIN_REQUIRE_REDIS is set: %v", err)
		}
		t.Skip("redis-server is not installed (apt-get install redis-server): skipping the Global rate limit test")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), t: t, bin: bin, port: port}
	s.Restart()
	t.Cleanup(s.Kill)
	return s
}

// Restart starts the server again on its port (after Kill), and waits until it answers PING.
func (s *Server) Restart() {
	s.t.Helper()
	s.cmd = exec.Command(s.bin, "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	s.cmd.Dir = s.t.TempDir()
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.done = make(chan struct{})
	go func(c *exec.Cmd, done chan struct{}) { _ = c.Wait(); close(done) }(s.cmd, s.done)
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := s.ping()
		if err == nil {
			return
		}
		select {
		case <-s.done:
			s.t.Fatalf("redis-server exited: %v", s.cmd.ProcessState)
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on %s not answering: %v", s.Addr, err)
		}
		time.Sleep(10 * time.Millisecond) // polling a process coming up: no event to wait on
	}
}

func (s *Server) ping() error {
	c, err := net.DialTimeout("tcp", s.Addr, time.Second)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// Kill stops the server (SIGKILL) and waits until it is gone.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}
