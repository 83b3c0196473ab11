package proxy_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

// newRetryingProxy is a proxy that retries failed binds quickly, so tests await a freed port in
// milliseconds.
func newRetryingProxy(t testing.TB) *proxy.Proxy {
	t.Helper()
	p := proxy.New(proxy.Options{Log: testLogger(), Registry: registry(),
		BindRetryMin: 10 * time.Millisecond, BindRetryMax: 50 * time.Millisecond})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

// holdPort binds a loopback port the way another process would, until release is called.
func holdPort(t testing.TB) (port uint32, release func()) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return portOf(t, l.Addr().String()), func() { _ = l.Close() }
}

func failedNames(p *proxy.Proxy) []string {
	var out []string
	for _, f := range p.Failed() {
		out = append(out, f.Name)
	}
	return out
}

// awaitChange waits on ch (from ListenersChanged) with a deadline.
func awaitChange(t testing.TB, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestBindFailure: a listener whose port is taken does not hold the snapshot back. The others
// serve it, the failure is listed, later snapshots keep applying, and once the port is free the
// listener is bound without a new snapshot and serves the current table.
func TestBindFailure(t *testing.T) {
	a := newBackend(t, "a", nil)
	b := newBackend(t, "b", nil)
	clusters := []*irv1.Cluster{cluster("a", a), cluster("b", b)}
	heldPort, release := holdPort(t)
	good := func(be string) *irv1.Listener {
		return httpListener(0, server("", vhost("", route("r/good", "/", backend(be, 1)))))
	}
	blocked := func(be string) *irv1.Listener {
		return httpListener(heldPort, server("", vhost("", route("r/blocked", "/", backend(be, 1)))))
	}
	p := newRetryingProxy(t)
	apply(t, p, snapshot(t, []*irv1.Listener{good("a")}, clusters))
	goodClient := newClient(addrOf(t, p, good("a").Name), nil)

	first := snapshot(t, []*irv1.Listener{good("a"), blocked("a")}, clusters)
	changed := p.ListenersChanged()
	if err := p.Apply(context.Background(), first); err != nil {
		t.Fatalf("a snapshot with one unbindable listener was rejected: %v", err)
	}
	awaitChange(t, changed, "the apply to be announced")
	if p.Version() != first.GetVersion() {
		t.Fatalf("serving %s, want %s", p.Version(), first.GetVersion())
	}
	var since time.Time
	t.Run("the failure is listed with its reason", func(t *testing.T) {
		fs := p.Failed()
		if len(fs) != 1 {
			t.Fatalf("failed = %+v", fs)
		}
		f := fs[0]
		want := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(heldPort)))
		if f.Name != blocked("a").Name || f.Address != want || f.Reason != proxy.BindAddressInUse || f.Attempts < 1 || f.Error == "" {
			t.Fatalf("failure %+v, want %s at %s, AddressInUse", f, blocked("a").Name, want)
		}
		since = f.Since
		if len(p.Bound()) != 1 || p.Bound()[0].Name != good("a").Name {
			t.Fatalf("bound %v", p.Bound())
		}
	})
	t.Run("the other listeners serve", func(t *testing.T) {
		if r := must(t, goodClient.get(hostURL("http", "example.com", "/"))); r.status != 200 || r.header.Get("X-Backend") != "a" {
			t.Fatalf("good listener: %d from %q", r.status, r.header.Get("X-Backend"))
		}
	})
	t.Run("later snapshots apply while the port stays taken", func(t *testing.T) {
		next := snapshot(t, []*irv1.Listener{good("b"), blocked("b")}, clusters)
		if err := p.Apply(context.Background(), next); err != nil {
			t.Fatal(err)
		}
		if r := must(t, goodClient.get(hostURL("http", "example.com", "/"))); r.header.Get("X-Backend") != "b" {
			t.Fatalf("good listener still on %q after the update", r.header.Get("X-Backend"))
		}
		fs := p.Failed()
		if len(fs) != 1 || !fs[0].Since.Equal(since) || fs[0].Attempts < 2 {
			t.Fatalf("failure %+v: want the same run of failures (since %v), retried", fs, since)
		}
	})
	t.Run("a freed port is bound without a new snapshot", func(t *testing.T) {
		version := p.Version()
		release()
		eventually(t, "the freed port to be bound", func() bool { return len(p.Failed()) == 0 })
		if p.Version() != version {
			t.Fatalf("version changed to %s", p.Version())
		}
		r := must(t, newClient(addrOf(t, p, blocked("b").Name), nil).get(hostURL("http", "example.com", "/")))
		if r.status != 200 || r.header.Get("X-Backend") != "b" {
			t.Fatalf("freed listener: %d from %q, want the current table (b)", r.status, r.header.Get("X-Backend"))
		}
		if len(p.Bound()) != 2 {
			t.Fatalf("bound %v", p.Bound())
		}
	})
}

// TestBindFailureDropped: a failed listener the next snapshot no longer names is forgotten, and
// one that is taken again on the next snapshot is retried when the same version is applied
// again.
func TestBindFailureDropped(t *testing.T) {
	a := newBackend(t, "a", nil)
	clusters := []*irv1.Cluster{cluster("a", a)}
	heldPort, release := holdPort(t)
	good := httpListener(0, server("", vhost("", route("r/good", "/", backend("a", 1)))))
	blocked := httpListener(heldPort, server("", vhost("", route("r/blocked", "/", backend("a", 1)))))
	// A slow retry timer: what binds here is the re-applied snapshot, not the timer.
	p := proxy.New(proxy.Options{Log: testLogger(), Registry: registry(), BindRetryMin: time.Hour, BindRetryMax: time.Hour})
	t.Cleanup(func() { _ = p.Close(context.Background()) })

	both := snapshot(t, []*irv1.Listener{good, blocked}, clusters)
	apply(t, p, both)
	if got := failedNames(p); len(got) != 1 || got[0] != blocked.Name {
		t.Fatalf("failed %v", got)
	}
	t.Run("the same version again retries at once", func(t *testing.T) {
		release()
		apply(t, p, both)
		if got := failedNames(p); len(got) != 0 {
			t.Fatalf("failed %v after the port was freed and the snapshot re-applied", got)
		}
		addrOf(t, p, blocked.Name)
	})
	t.Run("a listener left out is forgotten", func(t *testing.T) {
		port2, _ := holdPort(t)
		again := httpListener(port2, server("", vhost("", route("r/again", "/", backend("a", 1)))))
		apply(t, p, snapshot(t, []*irv1.Listener{good, again}, clusters))
		if got := failedNames(p); len(got) != 1 || got[0] != again.Name {
			t.Fatalf("failed %v", got)
		}
		apply(t, p, snapshot(t, []*irv1.Listener{good}, clusters))
		if got := failedNames(p); len(got) != 0 {
			t.Fatalf("failed %v after the listener left the snapshot", got)
		}
	})
}
