package mirror_test

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/core/accesslog"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/filters/clientip"
)

// lines collects access log lines, decoded.
type lines struct {
	mu  sync.Mutex
	got []map[string]any
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for line := range bytes.Lines(p) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			m = map[string]any{"invalid": string(line)}
		}
		l.got = append(l.got, m)
	}
	return len(p), nil
}

// await waits until n lines with "mirror": true are in, and returns them.
func (l *lines) await(t *testing.T, n int) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l.mu.Lock()
		var mirrored []map[string]any
		for _, m := range l.got {
			if m["invalid"] != nil {
				t.Fatalf("not JSON: %v", m["invalid"])
			}
			if m["mirror"] == true {
				mirrored = append(mirrored, m)
			}
		}
		l.mu.Unlock()
		if len(mirrored) >= n {
			return mirrored
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d mirror lines, want %d", len(mirrored), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestMirrorAccessLog: each copy gets an access log line of its own, marked mirror, with the
// mirror cluster and endpoint and the mirror's status, besides the primary's line (not marked);
// a copy the mirror refused has its error instead of a status.
func TestMirrorAccessLog(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadPort, _ := strconv.Atoi(strings.TrimPrefix(l.Addr().String(), "127.0.0.1:"))
	_ = l.Close()
	primary := newBackend(t, "primary", nil)
	m := newBackend(t, "mirror", nil)
	sink := &lines{}
	log := accesslog.New(accesslog.Options{Sink: sink, FlushInterval: time.Millisecond})
	t.Cleanup(func() { log.Close(nil) })
	h := start(t, primary, []*backend{m, {port: uint32(deadPort)}}, options{accessLog: log})
	if status, _ := h.do(t, http.MethodPost, "/copy/me?x=1", strings.NewReader("body"), map[string]string{"X-Request-Id": "r-7"}); status != http.StatusOK {
		t.Fatalf("status %d", status)
	}
	got := sink.await(t, 2)
	byBackend := map[any]map[string]any{}
	for _, line := range got {
		byBackend[line["backend"]] = line
	}
	sent := byBackend[mirrorCluster(0)]
	for k, v := range map[string]any{"msg": "request", "route": "HTTPRoute/ns/r", "upstream": "127.0.0.1:" + strconv.Itoa(int(m.port)),
		"method": "POST", "path": "/copy/me", "status": float64(200), "bytes_in": float64(4), "bytes_out": float64(len("mirror")),
		"request_id": "r-7", "client_ip": "127.0.0.1", "peer_ip": "127.0.0.1", "protocol": "HTTP/1.1",
		"listener": "127.0.0.1:0/HTTP", "gateway": "ns/gw"} {
		if sent[k] != v {
			t.Errorf("mirror line %s = %v, want %v (%v)", k, sent[k], v, sent)
		}
	}
	if _, ok := sent["query"]; ok {
		t.Errorf("query logged: %v", sent)
	}
	failed := byBackend[mirrorCluster(1)]
	if failed == nil || failed["status"] != nil || !strings.Contains(failed["error"].(string), "refused") ||
		failed["listener"] != "127.0.0.1:0/HTTP" || failed["gateway"] != "ns/gw" {
		t.Errorf("refused copy logged as %v", failed)
	}
	deadline := time.Now().Add(10 * time.Second)
	for primaries := 0; primaries != 1; {
		if time.Now().After(deadline) {
			t.Fatalf("%d primary lines, want 1: %v", primaries, sink.got)
		}
		time.Sleep(time.Millisecond)
		sink.mu.Lock()
		primaries = 0
		for _, line := range sink.got {
			if line["mirror"] == nil && line["path"] == "/copy/me" {
				primaries++
			}
		}
		sink.mu.Unlock()
	}
}

// TestMirrorAccessLogResolvedClient: behind a client_ip filter that trusts one hop of
// X-Forwarded-For, the copy's line and the request's both have the forwarded client as
// client_ip and the socket's peer as peer_ip.
func TestMirrorAccessLogResolvedClient(t *testing.T) {
	primary := newBackend(t, "primary", nil)
	m := newBackend(t, "mirror", nil)
	sink := &lines{}
	log := accesslog.New(accesslog.Options{Sink: sink, FlushInterval: time.Millisecond})
	t.Cleanup(func() { log.Close(nil) })
	h := start(t, primary, []*backend{m}, options{accessLog: log,
		before: []*irv1.ModuleConfig{core.MustConfig(clientip.ModuleID, clientip.Config{Hops: 1})}})
	hdr := map[string]string{"X-Forwarded-For": "198.51.100.9, 203.0.113.5", "X-Request-Id": "fwd"}
	if status, _ := h.do(t, http.MethodGet, "/resolved", nil, hdr); status != http.StatusOK {
		t.Fatalf("status %d", status)
	}
	copyLine := sink.await(t, 1)[0]
	primaryLine := sink.awaitLine(t, func(l map[string]any) bool { return l["mirror"] == nil && l["path"] == "/resolved" })
	for name, line := range map[string]map[string]any{"copy": copyLine, "request": primaryLine} {
		if line["client_ip"] != "203.0.113.5" || line["peer_ip"] != "127.0.0.1" {
			t.Errorf("%s line: client_ip %v, peer_ip %v, want 203.0.113.5 and 127.0.0.1: %v", name, line["client_ip"], line["peer_ip"], line)
		}
		if line["gateway"] != "ns/gw" || line["listener"] != "127.0.0.1:0/HTTP" {
			t.Errorf("%s line: gateway %v, listener %v: %v", name, line["gateway"], line["listener"], line)
		}
	}
}

// awaitLine waits for a line match accepts and returns it.
func (l *lines) awaitLine(t *testing.T, match func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l.mu.Lock()
		for _, m := range l.got {
			if match(m) {
				l.mu.Unlock()
				return m
			}
		}
		l.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatal("no such access log line")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
