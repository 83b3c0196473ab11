package ipaccess_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/filters/filtertest"
	"github.com/coxswain-labs/coxswain/modules/filters/ipaccess"
)

func spec(json string) []*irv1.ModuleConfig {
	mc := core.MustConfig(ipaccess.ModuleID, nil)
	mc.Json = []byte(json)
	return []*irv1.ModuleConfig{mc}
}

// from is a client whose connections come from the loopback address src (127.0.0.2, ...), over
// HTTP/1.1, or over cleartext HTTP/2 with prior knowledge when h2c is set.
func from(src string, h2c bool) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	tr := &http.Transport{DialContext: d.DialContext}
	if h2c {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		tr.Protocols = &p
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// TestThroughProxy: the engine's client address decides, over HTTP/1.1 and HTTP/2, and a refused
// request never reaches the backend.
func TestThroughProxy(t *testing.T) {
	h := filtertest.Start(t, spec(`{"deny":["127.0.0.3","bogus"],"allow":["127.0.0.2/31","127.0.0.4"]}`),
		filtertest.Options{Modules: []core.Module{(*ipaccess.IpAccessControl)(nil)}})
	for _, h2c := range []bool{false, true} {
		for src, want := range map[string]int{"127.0.0.2": 200, "127.0.0.3": 403, "127.0.0.4": 200, "127.0.0.1": 403, "127.0.0.5": 403} {
			c := from(src, h2c)
			h.Client = c
			req, _ := h.NewRequest(http.MethodPost, "/x", strings.NewReader("payload"))
			ex := h.Do(t, req)
			c.CloseIdleConnections()
			if ex.Status != want {
				t.Errorf("h2c=%v from %s: status %d %q, want %d", h2c, src, ex.Status, ex.Body, want)
			}
			if reached := ex.Upstream != nil; reached != (want == 200) {
				t.Errorf("h2c=%v from %s: backend reached = %v", h2c, src, reached)
			}
			if want == 403 && strings.TrimSpace(string(ex.Body)) != ipaccess.DeniedMessage {
				t.Errorf("h2c=%v from %s: body %q", h2c, src, ex.Body)
			}
		}
	}
}

// TestGRPCDenied: a gRPC call from a refused client gets a trailers-only PERMISSION_DENIED over
// HTTP/2, not an HTTP error page.
func TestGRPCDenied(t *testing.T) {
	h := filtertest.Start(t, spec(`{"deny":["127.0.0.3"]}`),
		filtertest.Options{Modules: []core.Module{(*ipaccess.IpAccessControl)(nil)}})
	c := from("127.0.0.3", true)
	defer c.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.URL+"/grpc.testing.TestService/UnaryCall", strings.NewReader("\x00\x00\x00\x00\x00"))
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.ProtoMajor != 2 || resp.StatusCode != 200 || resp.Header.Get("Grpc-Status") != "7" || len(body) != 0 {
		t.Errorf("HTTP/%d %d %v %q, want HTTP/2 200 with grpc-status 7 and no body", resp.ProtoMajor, resp.StatusCode, resp.Header, body)
	}
	if msg := resp.Header.Get("Grpc-Message"); msg != ipaccess.DeniedMessage {
		t.Errorf("grpc-message %q", msg)
	}
}
