package integration

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	policyv1a1 "github.com/coxswain-labs/coxswain/modules/api/policy/v1alpha1"
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

var clientTrafficPolicyGVR = policyv1a1.SchemeGroupVersion.WithResource(policyv1a1.ClientTrafficPolicyResource)

// TestClientTrafficPolicy: ClientTrafficPolicies against the real API server (their CRD from
// deploy/crds), through the controller's typed informer, into the snapshot its in-process proxy
// applies. A whole-Gateway policy sets every listener's socket; an (even newer) policy naming one
// listener by sectionName takes that listener over, and the whole-Gateway policy stays Accepted
// saying where it is overridden; a third policy on the same listener is Conflicted, naming the
// older; a missing Gateway or listener is TargetNotFound; deleting the listener's winner hands it
// to the Conflicted one, and deleting that gives it back to the Gateway's policy. The proxy side
// of PROXY protocol is not on this branch: the IR and status are checked, not the wire.
func TestClientTrafficPolicy(t *testing.T) {
	e := env.Start(t)
	snaps := &publishedSnapshots{}
	startController(t, e, controllerOpts{published: snaps})
	ns := namespace(t, e, "ctp", nil)
	const httpPort, otherPort, newPort = 19300, 19301, 19302
	startBackend(t, "ctp", "10.99.90.1:8080")
	createClass(t, e, "ctp", "")
	createGateway(t, e, ns, "gw", "ctp", httpListener("http", httpPort), httpListener("other", otherPort))
	createService(t, e, ns, "svc", "10.99.90.1")
	createRoute(t, e, httpRoute(ns, "r", []gwapiv1.ParentReference{parentRef(ns, "gw")}, nil, prefixRule("/", backendRef("svc", 1))))
	// Traffic before any policy: the listeners are up (PROXY protocol would refuse plain requests
	// once the proxy enforces it, so none are sent after).
	served(t, httpPort, "any", "/", 200, "ctp")
	served(t, otherPort, "any", "/", 200, "ctp")

	// Names sort in creation order, so policies created within one second (creationTimestamp's
	// resolution) still have the age the test means.
	createCTP(t, e, ns, "a-whole", map[string]any{
		"targetRefs":        []any{gatewayTarget("gw", "")},
		"clientIPDetection": map[string]any{"xForwardedFor": map[string]any{"numTrustedHops": int64(5)}},
	})
	t.Run("a whole-Gateway policy sets every listener", func(t *testing.T) {
		for _, port := range []uint32{httpPort, otherPort} {
			waitIRListener(t, snaps, port, wantClient(nil, 5))
		}
		waitPolicyAncestor(t, e, clientTrafficPolicyGVR, ns, "a-whole", "gw", "", "True", "Accepted", "Applied to Gateway "+ns+"/gw")
	})

	createCTP(t, e, ns, "b-listener", map[string]any{
		"targetRefs":        []any{gatewayTarget("gw", "http")},
		"proxyProtocol":     map[string]any{"enabled": true, "versions": []any{"V2"}},
		"clientIPDetection": map[string]any{"xForwardedFor": map[string]any{"numTrustedHops": int64(2)}},
	})
	t.Run("a sectionName policy takes its listener from the older whole-Gateway one", func(t *testing.T) {
		waitIRListener(t, snaps, httpPort, wantClient(&irv1.ProxyProtocol{V2: true}, 2))
		waitIRListener(t, snaps, otherPort, wantClient(nil, 5))
		waitPolicyAncestor(t, e, clientTrafficPolicyGVR, ns, "b-listener", "gw", "http", "True", "Accepted", "Applied to listener http of Gateway "+ns+"/gw")
		waitPolicyAncestor(t, e, clientTrafficPolicyGVR, ns, "a-whole", "gw", "", "True", "Accepted",
			"overridden on listener http (by ClientTrafficPolicy "+ns+"/b-listener, which names it)")
	})

	createCTP(t, e, ns, "c-newer", map[string]any{
		"targetRefs":    []any{gatewayTarget("gw", "http")},
		"proxyProtocol": map[string]any{"enabled": true},
	})
	t.Run("a newer policy on the same listener is Conflicted", func(t *testing.T) {
		waitPolicyAncestor(t, e, clientTrafficPolicyGVR, ns, "c-newer", "gw", "http", "False", "Conflicted",
			"ClientTrafficPolicy "+ns+"/b-listener is older and targets listener http of Gateway "+ns+"/gw too")
		if l := listenerByPort(snaps.latest(), httpPort); wantClient(&irv1.ProxyProtocol{V2: true}, 2)(l) != nil {
			t.Errorf("the listener changed: %v", l)
		}
	})

	createCTP(t, e, ns, "d-missing", map[string]any{
		"targetRefs":    []any{gatewayTarget("nope", ""), gatewayTarget("gw", "nosuch")},
		"proxyProtocol": map[string]any{"enabled": true},
	})
	t.Run("a missing Gateway or listener is TargetNotFound", func(t *testing.T) {
		waitPolicyAncestor(t, e, clientTrafficPolicyGVR, ns, "d-missing", "nope", "", "False", "TargetNotFound", "Gateway "+ns+"/nope does not exist")
		waitPolicyAncestor(t, e, clientTrafficPolicyGVR, ns, "d-missing", "gw", "nosuch", "False", "TargetNotFound", `Gateway `+ns+`/gw has no listener "nosuch"`)
	})

	t.Run("the missing listener appears", func(t *testing.T) {
		updateGateway(t, e, ns, "gw", func(gw *gwapiv1.Gateway) {
			gw.Spec.Listeners = append(gw.Spec.Listeners, httpListener("nosuch", newPort))
		})
		waitPolicyAncestor(t, e, clientTrafficPolicyGVR, ns, "d-missing", "gw", "nosuch", "True", "Accepted", "Applied to listener nosuch of Gateway "+ns+"/gw")
		waitIRListener(t, snaps, newPort, wantClient(&irv1.ProxyProtocol{}, 0))
		waitPolicyAncestor(t, e, clientTrafficPolicyGVR, ns, "a-whole", "gw", "", "True", "Accepted", "nosuch (by ClientTrafficPolicy "+ns+"/d-missing, which names it)")
	})

	t.Run("deleting the winner hands the listener to the loser", func(t *testing.T) {
		deleteObject(t, e, clientTrafficPolicyGVR, ns, "b-listener")
		waitIRListener(t, snaps, httpPort, wantClient(&irv1.ProxyProtocol{}, 0)) // no versions: both
		waitPolicyAncestor(t, e, clientTrafficPolicyGVR, ns, "c-newer", "gw", "http", "True", "Accepted", "Applied to listener http of Gateway "+ns+"/gw")
		waitPolicyAncestor(t, e, clientTrafficPolicyGVR, ns, "a-whole", "gw", "", "True", "Accepted", "by ClientTrafficPolicy "+ns+"/c-newer")
		waitIRListener(t, snaps, otherPort, wantClient(nil, 5))
	})

	t.Run("deleting the last listener policy gives the listener back to the Gateway's", func(t *testing.T) {
		deleteObject(t, e, clientTrafficPolicyGVR, ns, "c-newer")
		waitIRListener(t, snaps, httpPort, wantClient(nil, 5))
		eventually(t, "a-whole overridden only on listener nosuch", func() error {
			p := waitPolicyAncestor(t, e, clientTrafficPolicyGVR, ns, "a-whole", "gw", "", "True", "Accepted", "Applied to Gateway "+ns+"/gw")
			if c := ourAncestor(p, "gw", ""); strings.Contains(c.Message, "listener http ") {
				return fmt.Errorf("message %q", c.Message)
			}
			return nil
		})
	})

	t.Run("deleting the Gateway makes its policies TargetNotFound", func(t *testing.T) {
		if err := e.Gateway.GatewayV1().Gateways(ns).Delete(ctxFor(t), "gw", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitPolicyAncestor(t, e, clientTrafficPolicyGVR, ns, "a-whole", "gw", "", "False", "TargetNotFound", "Gateway "+ns+"/gw does not exist")
		waitPolicyAncestor(t, e, clientTrafficPolicyGVR, ns, "d-missing", "gw", "nosuch", "False", "TargetNotFound", "Gateway "+ns+"/gw does not exist")
		eventually(t, "the Gateway's listeners gone from the snapshot", func() error {
			for _, port := range []uint32{httpPort, otherPort, newPort} {
				if l := listenerByPort(snaps.latest(), port); l != nil {
					return fmt.Errorf("listener %s", l.GetName())
				}
			}
			return nil
		})
	})
}

func createCTP(t *testing.T, e *env.Env, ns, name string, spec map[string]any) {
	t.Helper()
	createFilterObject(t, e, clientTrafficPolicyGVR, policyv1a1.ClientTrafficPolicyKind, ns, name, spec)
}

// gatewayTarget is a targetRef to Gateway name, or to its listener section when set.
func gatewayTarget(name, section string) map[string]any {
	ref := map[string]any{"group": gwapiv1.GroupName, "kind": "Gateway", "name": name}
	if section != "" {
		ref["sectionName"] = section
	}
	return ref
}

func deleteObject(t *testing.T, e *env.Env, gvr schema.GroupVersionResource, ns, name string) {
	t.Helper()
	if err := e.Dynamic.Resource(gvr).Namespace(ns).Delete(ctxFor(t), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// policyObject is what the tests read of any policy kind: its generation and status.ancestors.
type policyObject struct {
	metav1.ObjectMeta `json:"metadata"`
	Status            gwapiv1.PolicyStatus `json:"status"`
}

func getPolicyObject(t *testing.T, e *env.Env, gvr schema.GroupVersionResource, ns, name string) (*policyObject, error) {
	t.Helper()
	u, err := e.Dynamic.Resource(gvr).Namespace(ns).Get(ctxFor(t), name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var p policyObject
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// ourAncestor is the Accepted condition of our ancestor entry for Gateway gw (and its listener
// section, "" for none).
func ourAncestor(p *policyObject, gw, section string) *metav1.Condition {
	for _, a := range p.Status.Ancestors {
		r := a.AncestorRef
		if a.ControllerName == translatorController && string(r.Name) == gw && ptr.Deref(r.Kind, "") == "Gateway" &&
			ptr.Deref(r.Group, "") == gwapiv1.GroupName && string(ptr.Deref(r.SectionName, "")) == section {
			return meta.FindStatusCondition(a.Conditions, string(gwapiv1.PolicyConditionAccepted))
		}
	}
	return nil
}

// waitPolicyAncestor waits until our ancestor entry of the policy for Gateway gw (section) is
// Accepted=status with reason and a message containing msg, for the policy's generation.
func waitPolicyAncestor(t *testing.T, e *env.Env, gvr schema.GroupVersionResource, ns, name, gw, section, status, reason, msg string) *policyObject {
	t.Helper()
	var p *policyObject
	eventually(t, fmt.Sprintf("%s %s ancestor %s/%s Accepted=%s %s", gvr.Resource, name, gw, section, status, reason), func() error {
		var err error
		if p, err = getPolicyObject(t, e, gvr, ns, name); err != nil {
			return err
		}
		c := ourAncestor(p, gw, section)
		switch {
		case c == nil:
			return fmt.Errorf("no ancestor entry for %s/%s: %+v", gw, section, p.Status.Ancestors)
		case string(c.Status) != status || c.Reason != reason || !strings.Contains(c.Message, msg):
			return fmt.Errorf("Accepted=%s %s %q", c.Status, c.Reason, c.Message)
		case c.ObservedGeneration != p.Generation:
			return fmt.Errorf("observedGeneration %d, generation %d", c.ObservedGeneration, p.Generation)
		}
		return nil
	})
	return p
}

func listenerByPort(snap *irv1.Snapshot, port uint32) *irv1.Listener {
	for _, l := range snap.GetListeners() {
		if l.GetPort() == port {
			return l
		}
	}
	return nil
}

// wantClient checks a listener's ClientTrafficPolicy fields: pp nil is no PROXY protocol, hops 0
// no client IP detection.
func wantClient(pp *irv1.ProxyProtocol, hops uint32) func(*irv1.Listener) error {
	return func(l *irv1.Listener) error {
		got := l.GetProxyProtocol()
		switch {
		case l == nil:
			return fmt.Errorf("no listener")
		case (got == nil) != (pp == nil) || got.GetV1() != pp.GetV1() || got.GetV2() != pp.GetV2():
			return fmt.Errorf("proxy_protocol %v, want %v", got, pp)
		case hops == 0 && l.GetClientIpDetection() != nil:
			return fmt.Errorf("client_ip_detection %v, want none", l.GetClientIpDetection())
		case l.GetClientIpDetection().GetXffNumTrustedHops() != hops:
			return fmt.Errorf("client_ip_detection %v, want %d hops", l.GetClientIpDetection(), hops)
		}
		return nil
	}
}

// waitIRListener waits until the applied snapshot's listener on port passes check.
func waitIRListener(t *testing.T, snaps *publishedSnapshots, port uint32, check func(*irv1.Listener) error) {
	t.Helper()
	eventually(t, fmt.Sprintf("listener :%d in the applied snapshot", port), func() error {
		return check(listenerByPort(snaps.latest(), port))
	})
}
