package mirror_test

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/filters/headers"
	"github.com/coxswain-labs/coxswain/modules/filters/mirror"
)

// TestMirrorCopiesRequest: both mirrors of a rule get the request as the primary does (after the
// header modifier in front of them), and the client gets the primary's answer.
func TestMirrorCopiesRequest(t *testing.T) {
	primary := newBackend(t, "primary", nil)
	m0, m1 := newBackend(t, "mirror-0", nil), newBackend(t, "mirror-1", nil)
	h := start(t, primary, []*backend{m0, m1}, options{before: []*irv1.ModuleConfig{
		core.MustConfig(headers.RequestModuleID, headers.Config{Set: []headers.Header{{Name: "X-Set", Value: "v"}}, Remove: []string{"X-Remove"}}),
	}})
	status, body := h.do(t, http.MethodGet, "/a/b?q=1&r=%20", nil, map[string]string{"X-Remove": "x", "X-Keep": "k", "Connection": "X-Hop", "X-Hop": "h"})
	if status != http.StatusOK || body != "primary" {
		t.Fatalf("client got %d %q, want the primary's 200", status, body)
	}
	p := primary.next(t)
	for i, m := range []*backend{m0, m1} {
		s := m.next(t)
		if s.Method != http.MethodGet || s.URI != "/a/b?q=1&r=%20" || s.Host != p.Host {
			t.Errorf("mirror %d got %s %s Host %s, want GET /a/b?q=1&r=%%20 Host %s", i, s.Method, s.URI, s.Host, p.Host)
		}
		if s.Header.Get("X-Set") != "v" || s.Header.Get("X-Keep") != "k" || s.Header.Get("X-Remove") != "" || s.Header.Get("X-Hop") != "" {
			t.Errorf("mirror %d headers %v: want X-Set and X-Keep, no X-Remove or X-Hop", i, s.Header)
		}
		if s.Header.Get("X-Forwarded-For") != "127.0.0.1" || s.Header.Get("X-Forwarded-Proto") != "http" {
			t.Errorf("mirror %d X-Forwarded-For %q -Proto %q", i, s.Header.Get("X-Forwarded-For"), s.Header.Get("X-Forwarded-Proto"))
		}
		h.await(t, i, mirror.ResultSent, 1)
	}
}

// TestMirrorBodies: bodies up to MaxBody reach the mirror whole, of known length or chunked;
// a longer one reaches only the primary and is counted.
func TestMirrorBodies(t *testing.T) {
	primary := newBackend(t, "primary", nil)
	m := newBackend(t, "mirror", nil)
	h := start(t, primary, []*backend{m}, options{})
	small := bytes.Repeat([]byte("abcdefgh"), 1000)
	exact := bytes.Repeat([]byte("x"), mirror.MaxBody)
	large := bytes.Repeat([]byte("y"), mirror.MaxBody+1)
	sent := 0.0
	for _, tt := range []struct {
		name    string
		body    []byte
		chunked bool
		mirror  bool
	}{
		{"small, with Content-Length", small, false, true},
		{"small, chunked", small, true, true},
		{"exactly MaxBody", exact, false, true},
		{"exactly MaxBody, chunked", exact, true, true},
		{"one byte over, with Content-Length", large, false, false},
		{"one byte over, chunked", large, true, false},
		{"empty POST", nil, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var r io.Reader = bytes.NewReader(tt.body)
			if tt.chunked {
				r = io.MultiReader(r) // hides the length: sent chunked
			}
			status, _ := h.do(t, http.MethodPost, "/upload", r, nil)
			if status != http.StatusOK {
				t.Fatalf("status %d", status)
			}
			if got := primary.next(t).Body; !bytes.Equal(got, tt.body) {
				t.Fatalf("primary got %d bytes, want %d", len(got), len(tt.body))
			}
			if !tt.mirror {
				return
			}
			sent++
			s := m.next(t)
			if !bytes.Equal(s.Body, tt.body) || s.Method != http.MethodPost {
				t.Errorf("mirror got %s with %d bytes, want POST with %d", s.Method, len(s.Body), len(tt.body))
			}
			h.await(t, 0, mirror.ResultSent, sent)
		})
	}
	h.await(t, 0, mirror.ResultBodyTooLarge, 2)
	m.none(t)
}

// TestMirrorFraction samples: 1/4 of 2,000 requests, within 5 standard deviations.
func TestMirrorFraction(t *testing.T) {
	primary := newBackend(t, "primary", nil)
	m := newBackend(t, "mirror", nil)
	h := start(t, primary, []*backend{m}, options{fraction: &mirror.Fraction{Numerator: 1, Denominator: 4}})
	const n = 2000
	for range n {
		if status, _ := h.do(t, http.MethodGet, "/", nil, nil); status != http.StatusOK {
			t.Fatalf("status %d", status)
		}
	}
	got := h.settle(t, 0, m)
	want, sd := n*0.25, 19.4
	if got < want-5*sd || got > want+5*sd {
		t.Errorf("mirrored %v of %d at 1/4, want %v ± %v", got, n, want, 5*sd)
	}
}

// TestMirrorSlowDropsNotDelays: a mirror that never answers fills its one worker and its queue
// of one; the primary answers every request at once, and the copies past the queue are dropped.
func TestMirrorSlowDropsNotDelays(t *testing.T) {
	release := make(chan struct{})
	primary := newBackend(t, "primary", nil)
	m := newBackend(t, "mirror", func(w http.ResponseWriter, r *http.Request) { <-release })
	defer close(release)
	h := start(t, primary, []*backend{m}, options{settings: map[string]string{
		mirror.SettingConcurrency: "1", mirror.SettingQueue: "1"}})
	const n = 20
	for range n {
		if status, body := h.do(t, http.MethodGet, "/", nil, nil); status != http.StatusOK || body != "primary" {
			t.Fatalf("got %d %q", status, body)
		}
	}
	m.next(t) // the one in flight
	// One in flight and at most one queued: the rest were dropped.
	if d := h.count(t, 0, mirror.ResultDropped); d < n-2 {
		t.Errorf("dropped %v of %d, want at least %d", d, n, n-2)
	}
}

// TestMirrorFailure: a mirror that refuses connections changes nothing for the client; each
// failure is counted, and logged at WARN at most once per 10 s.
func TestMirrorFailure(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(strings.TrimPrefix(l.Addr().String(), "127.0.0.1:"))
	_ = l.Close() // nothing listens there now
	primary := newBackend(t, "primary", nil)
	dead := &backend{port: uint32(port)}
	core, logs := observer.New(zap.WarnLevel)
	h := start(t, primary, []*backend{dead}, options{log: zap.New(core)})
	for range 5 {
		if status, body := h.do(t, http.MethodGet, "/", nil, nil); status != http.StatusOK || body != "primary" {
			t.Fatalf("got %d %q", status, body)
		}
	}
	h.await(t, 0, mirror.ResultFailed, 5)
	warns := logs.FilterMessage("request mirror failed").All()
	if len(warns) != 1 {
		t.Fatalf("%d WARNs for 5 failures, want 1 (rate-limited): %v", len(warns), warns)
	}
	if c := warns[0].ContextMap()["cluster"]; c != mirrorCluster(0) {
		t.Errorf("WARN names cluster %v", c)
	}
}

// TestMirrorH2C: to a cleartext HTTP/2 cluster (a GRPCRoute's) the copy goes over HTTP/2 with
// prior knowledge, body and TE: trailers included, as a gRPC server needs it.
func TestMirrorH2C(t *testing.T) {
	primary := newBackend(t, "primary", nil)
	m := newH2CBackend(t, "grpc-mirror")
	h := start(t, primary, []*backend{m}, options{h2c: true})
	msg := []byte{0, 0, 0, 0, 3, 1, 2, 3} // one gRPC message frame
	status, _ := h.do(t, http.MethodPost, "/pkg.Svc/Method", bytes.NewReader(msg),
		map[string]string{"Content-Type": "application/grpc", "TE": "trailers"})
	if status != http.StatusOK {
		t.Fatalf("status %d", status)
	}
	s := m.next(t)
	if s.Header.Get("X-Seen-Proto") != "HTTP/2.0" || !bytes.Equal(s.Body, msg) || s.URI != "/pkg.Svc/Method" {
		t.Errorf("mirror got %s %s body %v, want HTTP/2.0 POST /pkg.Svc/Method with the message", s.Header.Get("X-Seen-Proto"), s.URI, s.Body)
	}
	if s.Header.Get("Te") != "trailers" || s.Header.Get("Content-Type") != "application/grpc" {
		t.Errorf("mirror headers %v: want TE: trailers and the content type", s.Header)
	}
	h.await(t, 0, mirror.ResultSent, 1)
}
