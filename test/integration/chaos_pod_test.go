package integration

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// podBackend is an HTTP backend that can die the way a killed pod does: kill resets every
// connection it has (SO_LINGER 0, so the proxy reads ECONNRESET, not a clean EOF) and closes its
// port, so that a connect after it is refused. A request to /hold is held until release answers it
// or kill resets it, and held counts them by Host: a test knows exactly which requests were in
// flight to the pod when it died.
type podBackend struct {
	name string
	ln   net.Listener
	srv  *http.Server

	mu       sync.Mutex
	conns    map[net.Conn]bool // every open connection: idle, serving, or held (hijacked)
	held     []heldRequest
	released bool
	killed   bool
	answered map[string]int // requests answered, by Host
}

type heldRequest struct {
	host string
	c    net.Conn
}

func startPodBackend(t testing.TB, name, addr string) *podBackend {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("backend %s: %v", name, err)
	}
	b := &podBackend{name: name, ln: ln, conns: map[net.Conn]bool{}, answered: map[string]int{}}
	b.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: b, ConnState: b.track}
	go func() { _ = b.srv.Serve(ln) }()
	t.Cleanup(func() {
		b.release()
		_ = b.srv.Close()
	})
	return b
}

// track keeps the set of open connections, which kill resets. A hijacked connection stays in it
// until it is answered or reset.
func (b *podBackend) track(c net.Conn, s http.ConnState) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch s {
	case http.StateNew:
		b.conns[c] = true
	case http.StateClosed:
		delete(b.conns, c)
	}
}

func (b *podBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	hold := r.URL.Path == "/hold" && !b.released
	if !hold {
		b.answered[r.Host]++
	}
	b.mu.Unlock()
	if !hold {
		w.Header().Set("X-Backend", b.name)
		fmt.Fprintf(w, "%s %s", b.name, r.URL.Path)
		return
	}
	c, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.killed:
		reset(c)
	case b.released:
		b.answer(heldRequest{host: r.Host, c: c})
	default:
		b.conns[c] = true
		b.held = append(b.held, heldRequest{host: r.Host, c: c})
	}
}

// answer writes a held request's 200 and closes its connection (b.mu held).
func (b *podBackend) answer(h heldRequest) {
	body := b.name + " /hold"
	_, _ = fmt.Fprintf(h.c, "HTTP/1.1 200 OK\r\nX-Backend: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", b.name, len(body), body)
	_ = h.c.Close()
	delete(b.conns, h.c)
	b.answered[h.host]++
}

// heldFrom is how many requests for host the pod holds now.
func (b *podBackend) heldFrom(host string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, h := range b.held {
		if h.host == host {
			n++
		}
	}
	return n
}

// answeredFor is how many requests for host the pod has answered.
func (b *podBackend) answeredFor(host string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.answered[host]
}

// release answers every held request, and every /hold after it at once.
func (b *podBackend) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.released = true
	for _, h := range b.held {
		b.answer(h)
	}
	b.held = nil
}

// kill resets every connection, held or not, and closes the port.
func (b *podBackend) kill() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.killed = true
	_ = b.ln.Close()
	for c := range b.conns {
		reset(c)
	}
	clear(b.conns)
	b.held = nil
}

// reset closes c with SO_LINGER 0: the kernel sends RST and drops what was unsent.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// sumMetric adds up every series of name whose labels include every k=v in labels.
func (p *proxyProcess) sumMetric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	res, err := http.Get("http://" + p.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, line := range strings.Split(string(b), "\n") {
		rest, found := strings.CutPrefix(line, name+"{")
		end := strings.LastIndex(rest, "} ")
		if !found || end < 0 {
			continue
		}
		match := true
		for _, kv := range labels {
			k, val, _ := strings.Cut(kv, "=")
			match = match && strings.Contains(","+rest[:end]+",", ","+k+"="+strconv.Quote(val)+",")
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(rest[end+2:]), 64); match && err == nil {
			sum += v
		}
	}
	return sum
}
