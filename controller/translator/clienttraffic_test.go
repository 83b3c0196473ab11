package translator

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	policyv1a1 "github.com/coxswain-labs/coxswain/modules/api/policy/v1alpha1"
	httptranslate "github.com/coxswain-labs/coxswain/modules/httproute/translate"
)

func ctp(name string, age int, spec policyv1a1.ClientTrafficPolicySpec) *policyv1a1.ClientTrafficPolicy {
	return &policyv1a1.ClientTrafficPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: name, Generation: 1,
		CreationTimestamp: metav1.NewTime(time.Unix(1_700_000_000, 0).Add(time.Duration(age) * time.Minute))}, Spec: spec}
}

func gwRef(name string, section string) gwapiv1.LocalPolicyTargetReferenceWithSectionName {
	r := gwapiv1.LocalPolicyTargetReferenceWithSectionName{LocalPolicyTargetReference: gwapiv1.LocalPolicyTargetReference{
		Group: gwapiv1.GroupName, Kind: "Gateway", Name: gwapiv1.ObjectName(name)}}
	if section != "" {
		r.SectionName = ptr.To(gwapiv1.SectionName(section))
	}
	return r
}

func ppSpec(hops uint32, versions []policyv1a1.ProxyProtocolVersion, refs ...gwapiv1.LocalPolicyTargetReferenceWithSectionName) policyv1a1.ClientTrafficPolicySpec {
	return policyv1a1.ClientTrafficPolicySpec{TargetRefs: refs,
		ProxyProtocol:     &policyv1a1.ProxyProtocol{Enabled: true, Versions: versions},
		ClientIPDetection: &policyv1a1.ClientIPDetection{XForwardedFor: &policyv1a1.XForwardedForSettings{NumTrustedHops: ptr.To(hops)}}}
}

func accepted(t *testing.T, res *Result, name string) []metav1.Condition {
	t.Helper()
	st := res.Policies[PolicyKey{Group: policyv1a1.GroupName, Kind: policyv1a1.ClientTrafficPolicyKind, Namespace: "db", Name: name}]
	if st == nil {
		t.Fatalf("no status for %s; problems %v", name, res.Problems)
	}
	var out []metav1.Condition
	for _, a := range st.Ancestors {
		out = append(out, a.Conditions[0])
	}
	return out
}

func listenerByPort(snap *irv1.Snapshot, port uint32) *irv1.Listener {
	for _, l := range snap.GetListeners() {
		if l.GetPort() == port {
			return l
		}
	}
	return nil
}

func TestClientTrafficPolicy(t *testing.T) {
	reg := core.NewRegistry(extKind{})
	httpReg := core.NewRegistry(extKind{}, httptranslate.Kind{})
	udp := gwapiv1.Listener{Name: "udp", Port: 5353, Protocol: gwapiv1.UDPProtocolType}

	t.Run("applies to the sockets of the Gateway; UDP ignores PROXY protocol", func(t *testing.T) {
		store := tcpStore(udp)
		store.ClientTrafficPolicies = []*policyv1a1.ClientTrafficPolicy{ctp("p", 0, ppSpec(2, []policyv1a1.ProxyProtocolVersion{"V2"}, gwRef("gw", "")))}
		res := Translate(context.Background(), store, Options{Registry: reg})
		l := listenerByPort(res.Snapshot, 5432)
		if l.GetProxyProtocol() == nil || l.GetProxyProtocol().GetV1() || !l.GetProxyProtocol().GetV2() {
			t.Errorf("TCP listener proxy_protocol %v, want v2 only", l.GetProxyProtocol())
		}
		if l.GetClientIpDetection() != nil {
			t.Errorf("TCP listener client_ip_detection %v: X-Forwarded-For does not apply to TCP", l.GetClientIpDetection())
		}
		c := accepted(t, res, "p")
		if len(c) != 1 || c[0].Status != metav1.ConditionTrue || !strings.Contains(c[0].Message, "spec.proxyProtocol on UDP listener udp") ||
			!strings.Contains(c[0].Message, "spec.clientIPDetection on TCP listener tcp") {
			t.Errorf("Accepted %+v: want True naming the ignored fields", c)
		}
	})

	t.Run("older wins; sectionName over the whole Gateway; missing and other kinds", func(t *testing.T) {
		store := tcpStore(gwapiv1.Listener{Name: "tcp2", Port: 5433, Protocol: gwapiv1.TCPProtocolType})
		store.ClientTrafficPolicies = []*policyv1a1.ClientTrafficPolicy{
			ctp("old", 0, ppSpec(0, []policyv1a1.ProxyProtocolVersion{"V1"}, gwRef("gw", ""))),
			ctp("new", 1, ppSpec(0, nil, gwRef("gw", ""))),
			ctp("section", 2, ppSpec(0, []policyv1a1.ProxyProtocolVersion{"V2"}, gwRef("gw", "tcp2"))),
			ctp("lost", 3, ppSpec(0, nil, gwRef("nope", ""), gwRef("gw", "nope"))),
			ctp("svc", 4, policyv1a1.ClientTrafficPolicySpec{TargetRefs: []gwapiv1.LocalPolicyTargetReferenceWithSectionName{
				{LocalPolicyTargetReference: gwapiv1.LocalPolicyTargetReference{Kind: "Service", Name: "pg"}}}}),
		}
		res := Translate(context.Background(), store, Options{Registry: reg})
		if pp := listenerByPort(res.Snapshot, 5432).GetProxyProtocol(); !pp.GetV1() || pp.GetV2() {
			t.Errorf("5432 proxy_protocol %v, want the older Gateway policy's V1", pp)
		}
		if pp := listenerByPort(res.Snapshot, 5433).GetProxyProtocol(); pp.GetV1() || !pp.GetV2() {
			t.Errorf("5433 proxy_protocol %v, want the sectionName policy's V2", pp)
		}
		if c := accepted(t, res, "old"); c[0].Status != metav1.ConditionTrue || !strings.Contains(c[0].Message, "overridden on listener tcp2 (by ClientTrafficPolicy db/section") {
			t.Errorf("old: %+v", c)
		}
		if c := accepted(t, res, "new"); c[0].Status != metav1.ConditionFalse || c[0].Reason != "Conflicted" || !strings.Contains(c[0].Message, "db/old is older") {
			t.Errorf("new: %+v", c)
		}
		if c := accepted(t, res, "section"); c[0].Status != metav1.ConditionTrue || c[0].Message != "Applied to listener tcp2 of Gateway db/gw" {
			t.Errorf("section: %+v", c)
		}
		if c := accepted(t, res, "lost"); len(c) != 2 || c[0].Reason != "TargetNotFound" || c[1].Reason != "TargetNotFound" ||
			!strings.Contains(c[0].Message, `no listener "nope"`) || !strings.Contains(c[1].Message, "Gateway db/nope does not exist") {
			t.Errorf("lost: %+v", c)
		}
		if c := accepted(t, res, "svc"); c[0].Reason != "Invalid" {
			t.Errorf("svc: %+v", c)
		}
	})

	t.Run("a shared socket takes a setting only when every listener on it asks for it", func(t *testing.T) {
		// HTTP listeners of two Gateways on one port, for two hostnames: one socket.
		store := tcpStore(gwapiv1.Listener{Name: "http", Port: 8080, Protocol: gwapiv1.HTTPProtocolType, Hostname: ptr.To(gwapiv1.Hostname("a.example"))})
		other := store.Gateways[0].DeepCopy()
		other.Name, other.CreationTimestamp = "other", metav1.NewTime(time.Unix(1_800_000_000, 0))
		other.Spec.Listeners = []gwapiv1.Listener{{Name: "http-b", Port: 8080, Protocol: gwapiv1.HTTPProtocolType, Hostname: ptr.To(gwapiv1.Hostname("b.example"))}}
		store.Gateways = append(store.Gateways, other)
		store.Gateways[0].Spec.Listeners = store.Gateways[0].Spec.Listeners[1:]
		store.ClientTrafficPolicies = []*policyv1a1.ClientTrafficPolicy{ctp("p", 0, ppSpec(3, nil, gwRef("gw", "")))}
		res := Translate(context.Background(), store, Options{Registry: httpReg})
		if l := listenerByPort(res.Snapshot, 8080); l == nil || len(l.GetServers()) != 2 || l.GetProxyProtocol() != nil || l.GetClientIpDetection() != nil {
			t.Errorf("shared socket %v: a policy must not change the other Gateway's listener", l)
		}
		c := accepted(t, res, "p")
		if c[0].Status != metav1.ConditionFalse || c[0].Reason != "Conflicted" ||
			!strings.Contains(c[0].Message, "listener http shares socket :8080/HTTP with listener http-b of Gateway db/other, which asks for no ClientTrafficPolicy") {
			t.Errorf("Accepted %+v", c)
		}
		// The same policy on both: the socket takes it.
		store.ClientTrafficPolicies[0].Spec.TargetRefs = append(store.ClientTrafficPolicies[0].Spec.TargetRefs, gwRef("other", ""))
		res = Translate(context.Background(), store, Options{Registry: httpReg})
		if l := listenerByPort(res.Snapshot, 8080); l.GetProxyProtocol() == nil || l.GetClientIpDetection().GetXffNumTrustedHops() != 3 {
			t.Errorf("socket %v: both listeners ask for PROXY protocol", l)
		}
		if c := accepted(t, res, "p"); len(c) != 2 || c[0].Status != metav1.ConditionTrue || c[1].Status != metav1.ConditionTrue {
			t.Errorf("Accepted %+v", c)
		}
	})

	t.Run("unknown version (files only) is Invalid", func(t *testing.T) {
		store := tcpStore()
		store.ClientTrafficPolicies = []*policyv1a1.ClientTrafficPolicy{ctp("p", 0, ppSpec(0, []policyv1a1.ProxyProtocolVersion{"V3"}, gwRef("gw", "")))}
		res := Translate(context.Background(), store, Options{Registry: reg})
		if c := accepted(t, res, "p"); c[0].Reason != "Invalid" || listenerByPort(res.Snapshot, 5432).GetProxyProtocol() != nil {
			t.Errorf("Accepted %+v", c)
		}
	})
}
