package proxy_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// An endpoint that leaves the snapshot (its pod rescheduled) has its idle upstream connections
// closed, while an endpoint that stays keeps its warm ones.
func TestUpstreamPoolOfRemovedEndpointClosed(t *testing.T) {
	watched := func(name string) (*testBackend, *atomic.Int64, *atomic.Int64) {
		var opened, closed atomic.Int64
		srv := httptest.NewUnstartedServer(echo(name))
		srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			switch s {
			case http.StateNew:
				opened.Add(1)
			case http.StateClosed, http.StateHijacked:
				closed.Add(1)
			}
		}
		srv.Start()
		t.Cleanup(srv.Close)
		return &testBackend{name: name, srv: srv, port: portOf(t, srv.Listener.Addr().String())}, &opened, &closed
	}
	gone, _, goneClosed := watched("gone")
	stays, staysOpened, staysClosed := watched("stays")
	p := newProxy(t)
	port := closedPort(t)
	l := httpListener(port, server("", vhost("", route("g", "/g", backend("g", 1)), route("s", "/s", backend("s", 1)))))
	apply(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cluster("g", gone), cluster("s", stays)}))
	c := newClient(addrOf(t, p, l.Name), nil)
	must(t, c.get("http://x/g"))
	must(t, c.get("http://x/s"))

	// Cluster g now points at the other endpoint: "gone" is in no cluster. Only endpoints change:
	// the table is updated in place.
	applyInPlace(t, p, snapshot(t, []*irv1.Listener{l}, []*irv1.Cluster{cluster("g", stays), cluster("s", stays)}))
	eventually(t, "the removed endpoint's idle connection closed", func() bool { return goneClosed.Load() == 1 })
	if r := must(t, c.get("http://x/g")); r.body != "stays" {
		t.Fatalf("GET /g after the change: %q", r.body)
	}
	must(t, c.get("http://x/s"))
	if staysClosed.Load() != 0 || staysOpened.Load() != 1 {
		t.Fatalf("the staying endpoint: %d opened, %d closed; want its one connection kept",
			staysOpened.Load(), staysClosed.Load())
	}
}
