package integration

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// How BenchmarkPropagation times the status backlog of the pre-existing routes. Until session 16
// it polled one route (the last created) for a current status: that measured where the last
// route sat in the status writer's queue, not when every route had its status. A List of
// thousands of routes per poll would load the API server being measured; a watch costs it one
// event per status written, which it sends the controller's informers anyway.

// statusDrain counts the routes of a namespace named pre-<i> whose status is current
// (statusCurrent: our parent Accepted at the route's generation), from a watch started before
// the controller.
type statusDrain struct {
	done chan struct{} // closed when all n are current
	at   time.Time     // when the last of them became current (read after done)
}

// watchStatusDrain lists the routes once and follows them with a watch until n pre-<i> routes
// have a current status. The watch ends then, or when the benchmark does.
func watchStatusDrain(b *testing.B, e *env.Env, ns string, n int) *statusDrain {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	routes := e.Gateway.GatewayV1().HTTPRoutes(ns)
	d := &statusDrain{done: make(chan struct{})}
	current := map[string]bool{}
	note := func(r *gwapiv1.HTTPRoute, gone bool) bool {
		if !strings.HasPrefix(r.Name, "pre-") {
			return false
		}
		if !gone && statusCurrent(r) {
			current[r.Name] = true
		} else {
			delete(current, r.Name)
		}
		return len(current) == n
	}
	// list starts (again) from a List: the first time, and when the watch's resource version
	// is too old to resume from.
	list := func() (string, error) {
		l, err := routes.List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		clear(current)
		for i := range l.Items {
			note(&l.Items[i], false)
		}
		return l.ResourceVersion, nil
	}
	rv, err := list()
	if err != nil {
		b.Fatal(err)
	}
	if len(current) == n {
		b.Fatalf("all %d routes have a current status before the controller started", n)
	}
	go func() {
		for ctx.Err() == nil {
			w, err := routes.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil { // the context ended, or the API server is restarting: try again
				select {
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
				continue
			}
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					if rv, err = list(); err != nil {
						break
					}
					continue
				}
				r, ok := ev.Object.(*gwapiv1.HTTPRoute)
				if !ok {
					continue
				}
				rv = r.ResourceVersion
				if ev.Type != watch.Bookmark && note(r, ev.Type == watch.Deleted) {
					d.at = time.Now()
					close(d.done)
					w.Stop()
					return
				}
			}
			w.Stop()
		}
	}()
	return d
}

// wait waits until every route has its status, at most timeout.
func (d *statusDrain) wait(b *testing.B, timeout time.Duration) time.Time {
	select {
	case <-d.done:
		return d.at
	case <-time.After(timeout):
		b.Fatalf("the pre-existing routes have no current status after %s", timeout)
		return time.Time{}
	}
}

// counter reads one counter of a controller's /metrics (admin: its admin address).
func counter(b *testing.B, admin, name string) float64 {
	body, err := httpGet("http://" + admin + "/metrics")
	if err != nil {
		b.Fatalf("metrics: %v", err)
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	b.Fatalf("no %s in the controller's /metrics", name)
	return 0
}

// statusWrites is how many status updates the controller has written (every kind).
func statusWrites(b *testing.B, admin string) float64 {
	return counter(b, admin, "coxswain_controller_status_writes_total")
}
