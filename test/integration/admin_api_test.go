package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/adminapi"
	"github.com/coxswain-labs/coxswain/controller/discovery"
	"github.com/coxswain-labs/coxswain/core/admin"
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// TestAdminAPI runs the controller with --admin-auth=kubernetes and one proxy process against the
// real API server, and reads every /api/v1 endpoint with real ServiceAccount tokens: the
// TokenReview and SubjectAccessReview decide 401/403/200; the fleet shows the proxy; routing
// shows the Gateway, its routes and compiled rules; a route with a missing backend is in
// /api/v1/problems with its field and a hint, and has a Warning Event in /api/v1/events; pod
// logs check labels, parameters and pods/log permission before asking the API server.
func TestAdminAPI(t *testing.T) {
	e := env.Start(t)
	ctrlNS := namespace(t, e, "coxswain", nil)
	ctrl := startFleetController(t, e, "controller", ctrlNS, "--leader-elect=false", "--admin-auth=kubernetes", "--gateway-provisioning=shared")
	ns := namespace(t, e, "admin", nil)
	createService(t, e, ns, "v1", "10.99.8.1")
	createClass(t, e, "coxswain", "")
	port := freePort(t)
	createGateway(t, e, ns, "gw", "coxswain", httpListener("http", port))
	createRoute(t, e, httpRoute(ns, "good", []gwapiv1.ParentReference{parentRef(ns, "gw")}, nil, prefixRule("/", backendRef("v1", 1))))
	createRoute(t, e, httpRoute(ns, "broken", []gwapiv1.ParentReference{parentRef(ns, "gw")}, nil, prefixRule("/b", backendRef("missing", 1))))

	files := mountProxyFiles(t, e, ctrlNS, ctrlNS, "coxswain-proxy")
	startProxyProcess(t, "p1", "127.0.0.1", files, ctrl.discovery)

	reader := apiToken(t, e, ctrlNS, "reader", true, true)
	apiOnly := apiToken(t, e, ctrlNS, "api-only", true, false)
	nobody := apiToken(t, e, ctrlNS, "nobody", false, false)
	c := adminClient{base: "http://" + ctrl.admin}

	t.Run("open endpoints", func(t *testing.T) {
		for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
			eventually(t, path, func() error { _, err := c.get(path, "", 200); return err })
		}
	})
	t.Run("auth", func(t *testing.T) {
		if _, err := c.get("/api/v1/health", "", 401); err != nil {
			t.Error("no token:", err)
		}
		if _, err := c.get("/api/v1/health", "not-a-token", 401); err != nil {
			t.Error("wrong token:", err)
		}
		if _, err := c.get("/api/v1/health", nobody, 403); err != nil {
			t.Error("token without the permission:", err)
		}
		if _, err := c.get("/api/v1/health", reader, 200); err != nil {
			t.Error("reader:", err)
		}
		if _, err := c.do(http.MethodPost, "/api/v1/health", reader, 405); err != nil {
			t.Error("POST:", err)
		}
	})
	t.Run("health", func(t *testing.T) {
		var h admin.Health
		c.getJSON(t, "/api/v1/health", reader, &h)
		if h.Component != "controller" || h.Leader == nil || !*h.Leader || h.Identity == "" || h.LeaderIdentity != h.Identity {
			t.Errorf("health %+v", h)
		}
	})
	t.Run("fleet", func(t *testing.T) {
		eventually(t, "fleet shows p1", func() error {
			var p discovery.ProxyView
			body, err := c.get("/api/v1/fleet/proxies/p1", reader, 200)
			if err != nil {
				return err
			}
			if err := json.Unmarshal(body, &p); err != nil {
				return err
			}
			if p.AckedVersion == "" || len(p.Bound) == 0 || !slices.Contains(p.ModuleIDs, "route.http") || p.Modules != len(p.ModuleIDs) || p.Connected.IsZero() {
				return fmt.Errorf("proxy %+v", p)
			}
			return nil
		})
		if _, err := c.get("/api/v1/fleet/proxies/nope", reader, 404); err != nil {
			t.Error(err)
		}
	})
	t.Run("routing", func(t *testing.T) {
		eventually(t, "routing shows both routes", func() error {
			var g adminapi.GatewayRouting
			body, err := c.get("/api/v1/routing/"+ns+"/gw", reader, 200)
			if err != nil {
				return err
			}
			if err := json.Unmarshal(body, &g); err != nil {
				return err
			}
			if len(g.Listeners) != 1 || len(g.Listeners[0].Binds) != 1 || len(g.Routes) != 2 {
				return fmt.Errorf("gateway %s", body)
			}
			broken, good := g.Routes[0], g.Routes[1]
			if good.Name != "good" || len(good.Rules) != 1 || good.Rules[0].Backends[0].Cluster != ns+"/v1:80" || len(good.Clusters) != 1 {
				return fmt.Errorf("good route %+v", good)
			}
			if broken.Name != "broken" || len(broken.Rules) != 1 || broken.Rules[0].Backends[0].Error == "" {
				return fmt.Errorf("broken route %+v", broken)
			}
			return nil
		})
		var idx adminapi.RoutingIndex
		c.getJSON(t, "/api/v1/routing", reader, &idx)
		if len(idx.Gateways) != 1 || idx.Gateways[0].Name != "gw" || idx.Gateways[0].Routes != 2 {
			t.Errorf("index %+v", idx)
		}
		if _, err := c.get("/api/v1/routing/"+ns+"/nope", reader, 404); err != nil {
			t.Error(err)
		}
	})
	t.Run("problems", func(t *testing.T) {
		var ps adminapi.Problems
		c.getJSON(t, "/api/v1/problems", reader, &ps)
		i := slices.IndexFunc(ps.Problems, func(p adminapi.Problem) bool {
			return p.Object == adminapi.ObjectRef{Kind: "HTTPRoute", Namespace: ns, Name: "broken"}
		})
		if i < 0 {
			t.Fatalf("no problem for the broken route: %+v", ps.Problems)
		}
		p := ps.Problems[i]
		if p.Field != "spec.rules[0].backendRefs[0]" || p.Reason != "BackendNotFound" || p.Hint == "" || !strings.Contains(p.Message, "missing") {
			t.Errorf("problem %+v", p)
		}
	})
	t.Run("events", func(t *testing.T) {
		eventually(t, "the broken route's Event", func() error {
			var evs struct{ Events []adminapi.Event }
			body, err := c.get("/api/v1/events", reader, 200)
			if err != nil {
				return err
			}
			if err := json.Unmarshal(body, &evs); err != nil {
				return err
			}
			for _, ev := range evs.Events {
				if ev.Object.Kind == "HTTPRoute" && ev.Object.Name == "broken" && ev.Reason == "BackendNotFound" && ev.Type == "Warning" &&
					strings.HasPrefix(ev.Message, "spec.rules[0].backendRefs[0]: ") && ev.Object.UID != "" {
					return nil
				}
			}
			return fmt.Errorf("events %s", body)
		})
		if _, err := c.get("/api/v1/events?limit=0", reader, 400); err != nil {
			t.Error(err)
		}
	})
	t.Run("manifests", func(t *testing.T) {
		// The controller runs with --gateway-provisioning=shared: a VIP Service and an
		// identity ServiceAccount for the Gateway.
		eventually(t, "the Gateway's provisioned objects", func() error {
			var m adminapi.Manifests
			body, err := c.get("/api/v1/manifests/"+ns+"/gw", reader, 200)
			if err != nil {
				return err
			}
			if err := json.Unmarshal(body, &m); err != nil {
				return err
			}
			kinds := map[string]bool{}
			for _, o := range m.Objects {
				kinds[fmt.Sprint(o["kind"])] = true
			}
			if m.Mode != "shared" || !kinds["Service"] || !kinds["ServiceAccount"] || m.Gateway.UID == "" {
				return fmt.Errorf("manifests %s", body)
			}
			return nil
		})
		if _, err := c.get("/api/v1/manifests/"+ns+"/nope", reader, 404); err != nil {
			t.Error(err)
		}
	})
	t.Run("pod logs", func(t *testing.T) {
		proxyPod(t, e, ctrlNS, "proxy-0", map[string]string{"app.kubernetes.io/name": "coxswain", "app.kubernetes.io/component": "proxy"})
		proxyPod(t, e, ctrlNS, "other-0", map[string]string{"app": "other"})
		if _, err := c.get("/api/v1/pods/proxy-0/logs", "", 401); err != nil {
			t.Error("no token:", err)
		}
		if _, err := c.get("/api/v1/pods/other-0/logs", reader, 404); err != nil {
			t.Error("a pod that is not a proxy's:", err)
		}
		if _, err := c.get("/api/v1/pods/proxy-0/logs?tailLines=x", reader, 400); err != nil {
			t.Error("bad tailLines:", err)
		}
		if _, err := c.get("/api/v1/pods/proxy-0/logs", apiOnly, 403); err != nil {
			t.Error("a user without pods/log:", err)
		}
		// The user may read it, so the API server is asked. With no kubelet it has no log to give
		// for a pod that was never scheduled: an empty one.
		if _, err := c.get("/api/v1/pods/proxy-0/logs?namespace="+ctrlNS+"&tailLines=10", reader, 200); err != nil {
			t.Error("reader:", err)
		}
		if _, err := c.get("/api/v1/pods/proxy-0/logs?namespace=elsewhere", reader, 404); err != nil {
			t.Error("another namespace:", err)
		}
	})
}

// apiToken makes ServiceAccount ns/name, allowed to get /coxswain/api/v1/* when api and pods/log in ns
// when logs, and returns a token for it.
func apiToken(t *testing.T, e *env.Env, ns, name string, api, logs bool) string {
	t.Helper()
	// A token for the API server's own audience, as `kubectl create token` makes one.
	if _, err := e.Kube.CoreV1().ServiceAccounts(ns).Create(ctxFor(t), &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := e.Kube.CoreV1().ServiceAccounts(ns).CreateToken(ctxFor(t), name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tok := tr.Status.Token
	subject := []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: name}}
	if api {
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
			Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/coxswain/api/v1/*"}, Verbs: []string{"get"}}}}
		if _, err := e.Kube.RbacV1().ClusterRoles().Create(ctxFor(t), role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Kube.RbacV1().ClusterRoleBindings().Create(ctxFor(t), &rbacv1.ClusterRoleBinding{ObjectMeta: role.ObjectMeta,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}, Subjects: subject}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if logs {
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-logs"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}}}}
		if _, err := e.Kube.RbacV1().Roles(ns).Create(ctxFor(t), role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Kube.RbacV1().RoleBindings(ns).Create(ctxFor(t), &rbacv1.RoleBinding{ObjectMeta: role.ObjectMeta,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}, Subjects: subject}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return tok
}

func proxyPod(t *testing.T, e *env.Env, ns, name string, labels map[string]string) {
	t.Helper()
	_, err := e.Kube.CoreV1().Pods(ns).Create(ctxFor(t), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "proxy", Image: "coxswain:test",
			// As the chart runs the proxy, which the restricted Pod Security level admits (the
			// controller's namespace enforces it).
			SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr.To(false), RunAsNonRoot: ptr.To(true),
				Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			}}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// adminClient reads an admin address.
type adminClient struct{ base string }

func (c adminClient) get(path, token string, want int) ([]byte, error) {
	return c.do(http.MethodGet, path, token, want)
}

func (c adminClient) do(method, path, token string, want int) ([]byte, error) {
	req, err := http.NewRequest(method, c.base+path, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != want {
		return body, fmt.Errorf("%s %s: %s, want %d: %s", method, path, res.Status, want, body)
	}
	return body, nil
}

func (c adminClient) getJSON(t *testing.T, path, token string, v any) {
	t.Helper()
	body, err := c.get(path, token, 200)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("%s: %v: %s", path, err, body)
	}
}
