package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	policyv1a1 "github.com/coxswain-labs/coxswain/modules/api/policy/v1alpha1"
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

var backendPolicyGVR = policyv1a1.SchemeGroupVersion.WithResource(policyv1a1.BackendPolicyResource)

// TestBackendPolicy: a CoxswainBackendPolicy in the cluster sets the clusters of its Service in
// the snapshot the proxy applies (and the proxy serves it); a newer policy on the same Service is
// Conflicted while it applies to its other target; a target that does not exist is
// TargetNotFound, naming it; a value the controller cannot use is accepted with a message naming
// the field; and status follows every change: a spec edit, the older policy's deletion, a fix, the
// missing Service appearing. Other controllers' ancestor entries are left as they are.
func TestBackendPolicy(t *testing.T) {
	e := env.Start(t)
	snaps := &publishedSnapshots{}
	startController(t, e, controllerOpts{published: snaps})
	ns := namespace(t, e, "policy", nil)
	const port = 19200
	startBackend(t, "api", "10.99.80.1:8080")
	startBackend(t, "web", "10.99.80.2:8080")
	createClass(t, e, "policy", "")
	createGateway(t, e, ns, "gw", "policy", httpListener("http", port))
	createService(t, e, ns, "api", "10.99.80.1")
	createService(t, e, ns, "web", "10.99.80.2")
	createRoute(t, e, httpRoute(ns, "r", []gwapiv1.ParentReference{parentRef(ns, "gw")}, nil,
		prefixRule("/api", backendRef("api", 1)), prefixRule("/web", backendRef("web", 1))))
	apiCluster, webCluster := ns+"/api:80", ns+"/web:80"

	createPolicy(t, e, ns, "first", map[string]any{
		"targetRefs":         []any{serviceTarget("api")},
		"timeouts":           map[string]any{"connect": "500ms", "idle": "30s"},
		"loadBalancer":       map[string]any{"algorithm": "least_conn"},
		"circuitBreaker":     map[string]any{"threshold": int64(50)},
		"sessionPersistence": map[string]any{"type": "Cookie", "sessionName": "pin"},
	})
	t.Run("the snapshot the proxy applies has the settings", func(t *testing.T) {
		waitCluster(t, snaps, apiCluster, func(c *irv1.Cluster) error {
			switch {
			case c.GetConnectTimeoutMs() != 500 || c.GetIdleTimeoutMs() != 30000:
				return fmt.Errorf("timeouts %d/%d", c.GetConnectTimeoutMs(), c.GetIdleTimeoutMs())
			case c.GetBalancer().GetId() != "lb.least_conn":
				return fmt.Errorf("balancer %v", c.GetBalancer())
			case c.GetCircuitBreaker().GetThresholdPercent() != 50 || c.GetCircuitBreaker().GetWindowMs() != 10000:
				return fmt.Errorf("circuit breaker %v", c.GetCircuitBreaker())
			case c.GetSessionPersistence().GetName() != "pin" || len(c.GetSessionPersistence().GetKey()) != 32:
				return fmt.Errorf("session persistence %v", c.GetSessionPersistence())
			}
			return nil
		})
		served(t, port, "any", "/api", 200, "api")
		waitAncestor(t, e, ns, "first", "api", "True", "Accepted", "Applied to Service "+ns+"/api")
	})

	createPolicy(t, e, ns, "second", map[string]any{
		"targetRefs":   []any{serviceTarget("api"), serviceTarget("web")},
		"timeouts":     map[string]any{"connect": "750ms"},
		"loadBalancer": map[string]any{"algorithm": "fastest"},
	})
	t.Run("the newer of two policies is Conflicted", func(t *testing.T) {
		waitAncestor(t, e, ns, "second", "api", "False", "Conflicted", "CoxswainBackendPolicy "+ns+"/first is older")
		waitCluster(t, snaps, webCluster, func(c *irv1.Cluster) error {
			if c.GetConnectTimeoutMs() != 750 || c.GetBalancer() != nil {
				return fmt.Errorf("connect %d, balancer %v", c.GetConnectTimeoutMs(), c.GetBalancer())
			}
			return nil
		})
		if c := clusterOf(snaps.latest(), apiCluster); c.GetConnectTimeoutMs() != 500 {
			t.Errorf("api takes the older policy's settings: %v", c)
		}
	})
	t.Run("an ignored value is named in the Accepted message", func(t *testing.T) {
		waitAncestor(t, e, ns, "second", "web", "True", "Accepted", `spec.loadBalancer.algorithm: unknown algorithm "fastest"`)
		served(t, port, "any", "/web", 200, "web")
	})

	createPolicy(t, e, ns, "missing", map[string]any{"targetRefs": []any{serviceTarget("later")}})
	t.Run("a missing target", func(t *testing.T) {
		waitAncestor(t, e, ns, "missing", "later", "False", "TargetNotFound", "Service "+ns+"/later does not exist")
	})

	t.Run("other controllers' ancestor entries are left alone", func(t *testing.T) {
		theirs := gwapiv1.PolicyAncestorStatus{
			AncestorRef:    gwapiv1.ParentReference{Group: ptr.To(gwapiv1.Group("")), Kind: ptr.To(gwapiv1.Kind("Service")), Namespace: ptr.To(gwapiv1.Namespace(ns)), Name: "api"},
			ControllerName: otherController,
			Conditions: []metav1.Condition{{Type: "Accepted", Status: "True", Reason: "Accepted", Message: "theirs",
				ObservedGeneration: 1, LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second))}},
		}
		eventually(t, "their status write", func() error {
			p := getPolicy(t, e, ns, "second")
			p.Status.Ancestors = append(p.Status.Ancestors, theirs)
			return updatePolicyStatus(t, e, p)
		})
		// Ours changes (the spec below), theirs stays.
		updatePolicy(t, e, ns, "second", func(spec map[string]any) { spec["loadBalancer"] = map[string]any{"algorithm": "ewma"} })
		p := waitAncestor(t, e, ns, "second", "web", "True", "Accepted", "Applied to Service "+ns+"/web")
		if strings.Contains(ancestorCond(p, translatorController, "web").Message, "ignored") {
			t.Errorf("the fixed field is still reported: %v", ancestorCond(p, translatorController, "web"))
		}
		if c := ancestorCond(p, otherController, "api"); c == nil || c.Message != "theirs" {
			t.Errorf("their entry: %+v in %+v", c, p.Status.Ancestors)
		}
		waitCluster(t, snaps, webCluster, func(c *irv1.Cluster) error {
			if c.GetBalancer().GetId() != "lb.ewma" {
				return fmt.Errorf("balancer %v", c.GetBalancer())
			}
			return nil
		})
	})

	t.Run("a spec change updates the snapshot and observedGeneration", func(t *testing.T) {
		updatePolicy(t, e, ns, "first", func(spec map[string]any) {
			spec["timeouts"] = map[string]any{"connect": "1s"}
			delete(spec, "sessionPersistence")
		})
		waitCluster(t, snaps, apiCluster, func(c *irv1.Cluster) error {
			if c.GetConnectTimeoutMs() != 1000 || c.GetSessionPersistence() != nil {
				return fmt.Errorf("connect %d, persistence %v", c.GetConnectTimeoutMs(), c.GetSessionPersistence())
			}
			return nil
		})
		waitAncestor(t, e, ns, "first", "api", "True", "Accepted", "") // observedGeneration 2
	})

	t.Run("deleting the older policy hands the Service to the newer", func(t *testing.T) {
		if err := e.Dynamic.Resource(backendPolicyGVR).Namespace(ns).Delete(ctxFor(t), "first", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitAncestor(t, e, ns, "second", "api", "True", "Accepted", "Applied to Service "+ns+"/api")
		waitCluster(t, snaps, apiCluster, func(c *irv1.Cluster) error {
			if c.GetConnectTimeoutMs() != 750 || c.GetBalancer().GetId() != "lb.ewma" || c.GetCircuitBreaker() != nil {
				return fmt.Errorf("cluster %v", c)
			}
			return nil
		})
		served(t, port, "any", "/api", 200, "api")
	})

	t.Run("the missing Service appears", func(t *testing.T) {
		createService(t, e, ns, "later", "10.99.80.3")
		waitAncestor(t, e, ns, "missing", "later", "True", "Accepted", "Applied to Service "+ns+"/later")
	})
}

const translatorController = "coxswain-labs.dev/gateway-controller"

func serviceTarget(name string) map[string]any {
	return map[string]any{"group": "", "kind": "Service", "name": name}
}

func createPolicy(t *testing.T, e *env.Env, ns, name string, spec map[string]any) {
	t.Helper()
	createFilterObject(t, e, backendPolicyGVR, policyv1a1.BackendPolicyKind, ns, name, spec)
}

func updatePolicy(t *testing.T, e *env.Env, ns, name string, change func(spec map[string]any)) {
	t.Helper()
	eventually(t, "updating "+name, func() error {
		cur, err := e.Dynamic.Resource(backendPolicyGVR).Namespace(ns).Get(ctxFor(t), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(cur.Object["spec"].(map[string]any))
		_, err = e.Dynamic.Resource(backendPolicyGVR).Namespace(ns).Update(ctxFor(t), cur, metav1.UpdateOptions{})
		return err
	})
}

func getPolicy(t *testing.T, e *env.Env, ns, name string) *policyv1a1.CoxswainBackendPolicy {
	t.Helper()
	u, err := e.Dynamic.Resource(backendPolicyGVR).Namespace(ns).Get(ctxFor(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var p policyv1a1.CoxswainBackendPolicy
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

func updatePolicyStatus(t *testing.T, e *env.Env, p *policyv1a1.CoxswainBackendPolicy) error {
	t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: policyv1a1.GroupName, Version: "v1alpha1", Kind: policyv1a1.BackendPolicyKind})
	_, err = e.Dynamic.Resource(backendPolicyGVR).Namespace(p.Namespace).UpdateStatus(ctxFor(t), u, metav1.UpdateOptions{})
	return err
}

// ancestorCond is the Accepted condition of controller's ancestor entry for Service svc.
func ancestorCond(p *policyv1a1.CoxswainBackendPolicy, controller gwapiv1.GatewayController, svc string) *metav1.Condition {
	for _, a := range p.Status.Ancestors {
		if a.ControllerName == controller && string(a.AncestorRef.Name) == svc && a.AncestorRef.Kind != nil && *a.AncestorRef.Kind == "Service" {
			return meta.FindStatusCondition(a.Conditions, "Accepted")
		}
	}
	return nil
}

// waitAncestor waits until our ancestor entry of policy name for Service svc is Accepted=status
// with reason, a message containing msg, for the policy's generation.
func waitAncestor(t *testing.T, e *env.Env, ns, name, svc, status, reason, msg string) *policyv1a1.CoxswainBackendPolicy {
	t.Helper()
	var p *policyv1a1.CoxswainBackendPolicy
	eventually(t, fmt.Sprintf("%s ancestor %s Accepted=%s %s", name, svc, status, reason), func() error {
		p = getPolicy(t, e, ns, name)
		c := ancestorCond(p, translatorController, svc)
		switch {
		case c == nil:
			return fmt.Errorf("no ancestor entry for Service %s: %+v", svc, p.Status.Ancestors)
		case string(c.Status) != status || c.Reason != reason || !strings.Contains(c.Message, msg):
			return fmt.Errorf("Accepted=%s %s %q", c.Status, c.Reason, c.Message)
		case c.ObservedGeneration != p.Generation:
			return fmt.Errorf("observedGeneration %d, generation %d", c.ObservedGeneration, p.Generation)
		}
		return nil
	})
	return p
}

func clusterOf(snap *irv1.Snapshot, name string) *irv1.Cluster {
	for _, c := range snap.GetClusters() {
		if c.GetName() == name {
			return c
		}
	}
	return nil
}

// waitCluster waits until the snapshot the proxy applied last has cluster name and check
// accepts it.
func waitCluster(t *testing.T, snaps *publishedSnapshots, name string, check func(*irv1.Cluster) error) {
	t.Helper()
	eventually(t, "cluster "+name+" in the applied snapshot", func() error {
		c := clusterOf(snaps.latest(), name)
		if c == nil {
			return fmt.Errorf("no cluster %s", name)
		}
		return check(c)
	})
}
