package proxy

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"
)

// A pool whose last connection closed is forgotten, so endpoints that come and go do not pile up.
func TestH2CPoolForgottenWhenEmpty(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})}
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetUnencryptedHTTP2(true)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	pol := connPolicy{connect: time.Second, idle: time.Minute}
	ps := newH2CPools()
	p := ps.pool(ln.Addr().String(), pol)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := p.get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := ps.size(); got != 1 {
		t.Fatalf("%d pools with a connection open, want 1", got)
	}
	c.release()
	ps.closeIdle()
	if got := ps.size(); got != 0 {
		t.Fatalf("%d pools after the last connection closed, want 0", got)
	}
	// A forwarder still holding the forgotten pool can use it; a new lookup starts afresh.
	if c, err = p.get(ctx); err != nil {
		t.Fatal(err)
	}
	c.release()
	if ps.pool(ln.Addr().String(), pol) == p {
		t.Fatal("the forgotten pool was handed out again")
	}
	ps.closeIdle()
	p.closeIdle()
}
