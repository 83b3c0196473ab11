package proxy_test

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

func TestTCPRoute(t *testing.T) {
	a, b := newTCPEcho(t, "a"), newTCPEcho(t, "b")
	clusters := []*irv1.Cluster{
		l4Cluster("a", irv1.Cluster_TCP, a.port),
		l4Cluster("b", irv1.Cluster_TCP, b.port),
	}
	weighted := portKeyed("TCP", 0, l4Route("route.tcp", "weighted", backend("a", 3), backend("b", 1)))
	oldestPort := closedPort(t)
	oldest := portKeyed("TCP", oldestPort,
		l4Route("route.tcp", "older", backend("b", 1)),
		l4Route("route.tcp", "newer", backend("a", 1)))
	halfPort := closedPort(t)
	half := portKeyed("TCP", halfPort, l4Route("route.tcp", "half", backend("a", 1), &irv1.Backend{Weight: 1, Error: "Service ns/gone not found"}))
	p := newL4Proxy(t, proxy.Limits{})
	apply(t, p, snapshot(t, []*irv1.Listener{weighted, oldest, half}, clusters))

	t.Run("weighted backends", func(t *testing.T) {
		addr := addrOf(t, p, weighted.Name)
		got := map[string]int{}
		for range 40 {
			got[greeting(t, addr)]++
		}
		if got["a"] != 30 || got["b"] != 10 {
			t.Fatalf("connections per backend %v, want a:30 b:10", got)
		}
	})
	t.Run("the first route of a port wins", func(t *testing.T) {
		addr := addrOf(t, p, oldest.Name)
		for range 10 {
			if g := greeting(t, addr); g != "b" {
				t.Fatalf("greeting %q, want the older route's backend b", g)
			}
		}
	})
	t.Run("an unresolved backend rejects its share", func(t *testing.T) {
		addr := addrOf(t, p, half.Name)
		got := map[string]int{}
		for range 20 {
			got[greeting(t, addr)]++
		}
		if got["a"] != 10 || got[""] != 10 {
			t.Fatalf("connections %v, want 10 served by a and 10 rejected", got)
		}
	})
	t.Run("half-close both ways", func(t *testing.T) {
		c, err := net.Dial("tcp", addrOf(t, p, weighted.Name))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		r := bufio.NewReader(c)
		name, _ := r.ReadString('\n')
		name = strings.TrimSpace(name)
		if _, err := io.WriteString(c, "ping\n"); err != nil {
			t.Fatal(err)
		}
		if err := c.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		// The backend sees our FIN only through the proxy, answers after it, and then closes;
		// its FIN reaching us ends ReadAll.
		rest, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		if want := "ping\n" + name + " saw EOF\n"; string(rest) != want {
			t.Fatalf("after half-close got %q, want %q", rest, want)
		}
	})
	t.Run("large transfer both ways at once", func(t *testing.T) {
		echoLarge(t, addrOf(t, p, weighted.Name), 32<<20)
	})
	t.Run("a backend that refuses is a closed connection", func(t *testing.T) {
		refused := portKeyed("TCP", 0, l4Route("route.tcp", "r", backend("dead", 1)))
		apply(t, p, snapshot(t, []*irv1.Listener{refused}, []*irv1.Cluster{l4Cluster("dead", irv1.Cluster_TCP, closedPort(t))}))
		if g := greeting(t, addrOf(t, p, refused.Name)); g != "" {
			t.Fatalf("greeting %q from a dead backend", g)
		}
	})
}

// echoLarge sends n random bytes through addr (a route to a tcpEcho) while reading the echo, and
// compares digests.
func echoLarge(t testing.TB, addr string, n int64) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	r := bufio.NewReaderSize(c, 64<<10)
	name, err := r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	sent := sha256.New()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, err := io.Copy(c, io.TeeReader(io.LimitReader(rand.Reader, n), sent))
		if err != nil {
			t.Errorf("sending: %v", err)
		}
		_ = c.(*net.TCPConn).CloseWrite()
	}()
	got := sha256.New()
	m, err := io.Copy(got, io.LimitReader(r, n))
	wg.Wait()
	if err != nil || m != n {
		t.Fatalf("echoed %d of %d bytes: %v", m, n, err)
	}
	if !bytes.Equal(got.Sum(nil), sent.Sum(nil)) {
		t.Fatal("echoed bytes differ from the sent ones")
	}
	tail, _ := io.ReadAll(r)
	if want := strings.TrimSpace(name) + " saw EOF\n"; string(tail) != want {
		t.Fatalf("tail %q, want %q", tail, want)
	}
}

func TestTCPIdleTimeout(t *testing.T) {
	const idle = 300 * time.Millisecond
	a := newTCPEcho(t, "a")
	l := portKeyed("TCP", 0, l4Route("route.tcp", "r", backend("a", 1)))
	p := newL4Proxy(t, proxy.Limits{StreamIdleTimeout: idle})
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{l4Cluster("a", irv1.Cluster_TCP, a.port)}))
	addr := addrOf(t, p, l.Name)
	dial := func() (net.Conn, *bufio.Reader, error) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return nil, nil, err
		}
		return greeted(c, "a")
	}

	t.Run("a trickle keeps the connection", func(t *testing.T) {
		trickleOutlivesIdle(t, idle, dial)
	})
	t.Run("silence closes it", func(t *testing.T) {
		silenceIsCut(t, idle, dial)
	})
}

// greeted reads the backend's greeting line, name, through c, with a deadline for the whole test;
// on an error it closes c.
func greeted(c net.Conn, name string) (net.Conn, *bufio.Reader, error) {
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	if g, err := r.ReadString('\n'); err != nil || g != name+"\n" {
		_ = c.Close()
		return nil, nil, fmt.Errorf("greeting %q: %w", g, err)
	}
	return c, r, nil
}

// silenceIsCut checks that a connection nothing moves on after the greeting is cut, not before
// the idle timeout. A proxy starved past the timeout may cut before relaying the greeting: that
// is a cut too, and only its time is judged.
func silenceIsCut(t *testing.T, idle time.Duration, dial func() (net.Conn, *bufio.Reader, error)) {
	t.Helper()
	start := time.Now() // the proxy's idle clock starts after this
	c, r, err := dial()
	if err == nil {
		defer c.Close()
		var rest []byte
		rest, err = io.ReadAll(r) // EOF when the proxy cuts the connection
		if len(rest) > 0 {
			t.Fatalf("read %q after the greeting", rest)
		}
	} else {
		t.Logf("cut before the greeting: %v", err)
	}
	if err != nil && !isReset(err) && !errors.Is(err, io.EOF) {
		t.Fatalf("read: %v", err)
	}
	if d := time.Since(start); d < idle {
		t.Fatalf("closed after %v, before the idle timeout %v", d, idle)
	}
}

// TestTCPIdleTimeoutBlockedWriter: a client that stops reading is cut once nothing moves, though
// the proxy's write to it stays blocked: the backend writes until the proxy closes its connection,
// and once the client's window and the socket buffers are full nothing moves either way.
func TestTCPIdleTimeoutBlockedWriter(t *testing.T) {
	const idle = 300 * time.Millisecond
	cut := make(chan error, 1)
	flood := serveTCP(t, func(c net.Conn) {
		chunk := make([]byte, 64<<10)
		for {
			if _, err := c.Write(chunk); err != nil {
				cut <- err
				return
			}
		}
	})
	l := portKeyed("TCP", 0, l4Route("route.tcp", "flood", backend("flood", 1)))
	p := newL4Proxy(t, proxy.Limits{StreamIdleTimeout: idle})
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{l4Cluster("flood", irv1.Cluster_TCP, portOf(t, flood.Addr().String()))}))
	start := time.Now() // the proxy's idle clock starts after this
	c, err := net.Dial("tcp", addrOf(t, p, l.Name))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case err := <-cut:
		if d := time.Since(start); d < idle {
			t.Fatalf("cut after %v, before the idle timeout %v: %v", d, idle, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a connection blocked on a client that does not read was never cut")
	}
}

// trickleOutlivesIdle checks that a connection carrying a byte each way every 100ms lives through
// four idle timeouts. dial connects and reads the backend's greeting. The timeout is the thing
// tested, so it stays short; a loaded -race run can still stall this goroutine or the proxy past
// it, so a cut is judged by the time since the last byte the proxy certainly moved (its echo came
// back): the proxy's idle clock restarted no earlier, so a cut sooner than idle after it is the
// product's fault, and a later one is a stall, after which the check starts over.
func trickleOutlivesIdle(t *testing.T, idle time.Duration, dial func() (net.Conn, *bufio.Reader, error)) {
	t.Helper()
	const rounds, attempts = 12, 5
	for attempt := 1; ; attempt++ {
		lastMoved := time.Now() // the pipe, and its idle clock, start after this
		c, r, err := dial()
		round := -1 // the greeting
		for i := range rounds {
			if err != nil {
				break
			}
			sent := time.Now()
			if _, err = c.Write([]byte{'x'}); err == nil {
				_, err = r.ReadByte()
			}
			if err != nil {
				round = i
				break
			}
			lastMoved = sent
			time.Sleep(100 * time.Millisecond) // the pace of the trickle under test
		}
		if err == nil {
			_ = c.Close()
			return
		}
		if c != nil {
			_ = c.Close()
		}
		since := time.Since(lastMoved)
		if since < idle {
			t.Fatalf("round %d: cut %v after the last byte moved, before the idle timeout %v: %v", round, since, idle, err)
		}
		t.Logf("attempt %d round %d: cut %v after the last byte moved: stalled past the idle timeout", attempt, round, since)
		if attempt == attempts {
			t.Fatalf("stalled past the idle timeout on all %d attempts", attempts)
		}
	}
}
