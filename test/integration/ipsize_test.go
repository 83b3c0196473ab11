package integration

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/test/integration/env"
)

var (
	ipAccessGVR  = schema.GroupVersionResource{Group: "gateway.coxswain-labs.dev", Version: "v1alpha1", Resource: "ipaccesscontrols"}
	sizeLimitGVR = schema.GroupVersionResource{Group: "gateway.coxswain-labs.dev", Version: "v1alpha1", Resource: "requestsizelimits"}
)

// coxswainObject creates one of Coxswain's filter objects through the API server.
func coxswainObject(t *testing.T, e *env.Env, gvr schema.GroupVersionResource, kind, ns, name string, spec map[string]any) error {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(), "kind": kind,
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec":     spec,
	}}
	_, err := e.Dynamic.Resource(gvr).Namespace(ns).Create(ctxFor(t), obj, metav1.CreateOptions{})
	return err
}

// updateSpec replaces a filter object's spec.
func updateSpec(t *testing.T, e *env.Env, gvr schema.GroupVersionResource, ns, name string, spec map[string]any) {
	t.Helper()
	cur, err := e.Dynamic.Resource(gvr).Namespace(ns).Get(ctxFor(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Object["spec"] = spec
	if _, err := e.Dynamic.Resource(gvr).Namespace(ns).Update(ctxFor(t), cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// send makes one request to the gateway from the source address src (in netns.Range, routed to
// lo), on a new connection, and returns the status, or 0 and the error when there was no answer.
func send(src, method string, port int, host, path string, body io.Reader, length int64) (int, error) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
	req, err := http.NewRequest(method, fmt.Sprintf("http://%s:%d%s", gatewayIP, port, path), body)
	if err != nil {
		return 0, err
	}
	req.Host, req.ContentLength = host, length
	res, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return res.StatusCode, nil
}

// answers waits until a GET from src is answered with status.
func answers(t *testing.T, src string, port int, host, path string, status int) {
	t.Helper()
	eventually(t, fmt.Sprintf("GET %s%s from %s answered %d", host, path, src, status), func() error {
		got, err := send(src, http.MethodGet, port, host, path, nil, 0)
		if err != nil {
			return err
		}
		if got != status {
			return fmt.Errorf("got %d", got)
		}
		return nil
	})
}

// resolvedRefsMessage waits until the HTTPRoute's ResolvedRefs condition is True with a message
// containing every one of subs.
func resolvedRefsMessage(t *testing.T, e *env.Env, ns, name string, subs ...string) {
	t.Helper()
	eventually(t, fmt.Sprintf("HTTPRoute %s/%s ResolvedRefs=True with %q", ns, name, subs), func() error {
		r, err := e.Gateway.GatewayV1().HTTPRoutes(ns).Get(ctxFor(t), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, p := range r.Status.Parents {
			for _, c := range p.Conditions {
				if c.Type != string(gwapiv1.RouteConditionResolvedRefs) {
					continue
				}
				if c.Status != metav1.ConditionTrue {
					return fmt.Errorf("ResolvedRefs %s: %s", c.Status, c.Message)
				}
				for _, s := range subs {
					if !strings.Contains(c.Message, s) {
						return fmt.Errorf("message %q lacks %q", c.Message, s)
					}
				}
				return nil
			}
		}
		return fmt.Errorf("status %+v", r.Status.Parents)
	})
}

// TestIpAccessControl: an IpAccessControl object through the real API server, which takes any
// entry string; the proxy refuses by the client's source address, the route says which entry it
// skipped, and an update of the object applies.
func TestIpAccessControl(t *testing.T) {
	e := env.Start(t)
	startController(t, e, controllerOpts{})
	ns := namespace(t, e, "ipac", nil)
	const port = 18290
	startBackend(t, "a1", "10.99.9.1:8080")
	createClass(t, e, "ipac", "")
	createGateway(t, e, ns, "gw", "ipac", httpListener("http", port))
	createService(t, e, ns, "svc", "10.99.9.1")
	if err := coxswainObject(t, e, ipAccessGVR, "IpAccessControl", ns, "acl", map[string]any{
		"allow": []any{"10.99.9.2/32", "not-a-cidr", "10.99.10.0/24"},
		"deny":  []any{"10.99.10.7"},
	}); err != nil {
		t.Fatalf("the API server refused an IpAccessControl with an entry only the filter judges: %v", err)
	}
	guarded := prefixRule("/acl", backendRef("svc", 1))
	guarded.Filters = extRef("IpAccessControl", "acl")
	createRoute(t, e, httpRoute(ns, "web", []gwapiv1.ParentReference{parentRef(ns, "gw")}, []string{"ipac.example"},
		guarded, prefixRule("/", backendRef("svc", 1))))

	answers(t, "10.99.9.2", port, "ipac.example", "/acl/x", 200)
	answers(t, "10.99.9.3", port, "ipac.example", "/acl/x", 403)
	answers(t, "10.99.10.8", port, "ipac.example", "/acl/x", 200)
	answers(t, "10.99.10.7", port, "ipac.example", "/acl/x", 403)
	answers(t, "10.99.9.3", port, "ipac.example", "/plain", 200)
	resolvedRefsMessage(t, e, ns, "web", "accepted with warnings", `allow[1] "not-a-cidr"`)

	updateSpec(t, e, ipAccessGVR, ns, "acl", map[string]any{"deny": []any{"10.99.9.2"}})
	answers(t, "10.99.9.2", port, "ipac.example", "/acl/x", 403)
	answers(t, "10.99.9.3", port, "ipac.example", "/acl/x", 200)
}

// TestRequestSizeLimit: a RequestSizeLimit object through the real API server: its loose pattern
// refuses what is not a number with letters, the proxy refuses bodies over the limit, and a unit
// the filter does not read fails open with a warning on the route.
func TestRequestSizeLimit(t *testing.T) {
	e := env.Start(t)
	startController(t, e, controllerOpts{})
	ns := namespace(t, e, "rsl", nil)
	const port = 18291
	startBackend(t, "s1", "10.99.9.11:8080")
	createClass(t, e, "rsl", "")
	createGateway(t, e, ns, "gw", "rsl", httpListener("http", port))
	createService(t, e, ns, "svc", "10.99.9.11")
	if err := coxswainObject(t, e, sizeLimitGVR, "RequestSizeLimit", ns, "bad", map[string]any{"maxSize": "1.5m"}); err == nil {
		t.Error(`the API server accepted maxSize "1.5m"`)
	}
	if err := coxswainObject(t, e, sizeLimitGVR, "RequestSizeLimit", ns, "limit", map[string]any{"maxSize": "1k"}); err != nil {
		t.Fatal(err)
	}
	limited := prefixRule("/up", backendRef("svc", 1))
	limited.Filters = extRef("RequestSizeLimit", "limit")
	createRoute(t, e, httpRoute(ns, "web", []gwapiv1.ParentReference{parentRef(ns, "gw")}, []string{"rsl.example"},
		limited, prefixRule("/", backendRef("svc", 1))))

	post := func(path string, n int, declared bool) (int, error) {
		length := int64(n)
		if !declared {
			length = -1
		}
		return send("10.99.9.12", http.MethodPost, port, "rsl.example", path, bytes.NewReader(make([]byte, n)), length)
	}
	eventually(t, "POST /up of 2 KiB refused", func() error {
		if code, err := post("/up", 2048, true); err != nil || code != 413 {
			return fmt.Errorf("%d %v", code, err)
		}
		return nil
	})
	for _, tc := range []struct {
		path     string
		n        int
		declared bool
		want     int // 0: 413 or the connection closed under the client
	}{
		{"/up", 1024, true, 200},
		{"/up", 1024, false, 200},
		{"/up", 1025, false, 413},
		{"/up", 1 << 20, false, 0},
		{"/other", 2048, true, 200},
	} {
		code, err := post(tc.path, tc.n, tc.declared)
		if tc.want == 0 && (err != nil || code == 413) {
			continue
		}
		if err != nil || code != tc.want {
			t.Errorf("POST %s %d bytes (declared %v): %d %v, want %d", tc.path, tc.n, tc.declared, code, err, tc.want)
		}
	}

	updateSpec(t, e, sizeLimitGVR, ns, "limit", map[string]any{"maxSize": "10mb"})
	resolvedRefsMessage(t, e, ns, "web", "accepted with warnings", `"10mb"`, "not enforced")
	eventually(t, "an unparseable limit not enforced", func() error {
		if code, err := post("/up", 2048, true); err != nil || code != 200 {
			return fmt.Errorf("%d %v", code, err)
		}
		return nil
	})
}
