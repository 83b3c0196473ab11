package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwfeatures "sigs.k8s.io/gateway-api/pkg/features"

	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// TestAddressRoutability: spec.addresses[].routability (GEP-5093) through the real API server on
// the experimental CRDs, which keep the field. The class claims GatewayAddressRoutability and not
// GatewayAddressRoutabilityCluster. A Gateway asking for nothing and one asking for the
// conformance sentinel get --status-address with an explicit routability ("" and the sentinel, as
// read back from the API server) and AddressesAssigned=True, and serve; one asking only for
// Cluster gets no address, Programmed=False AddressNotAssigned and AddressesAssigned=False
// NotAssigned naming the entry. The CRD refuses a reserved k8s.io prefix.
func TestAddressRoutability(t *testing.T) {
	e := env.Start(t, env.WithChannel("experimental"))
	startController(t, e, controllerOpts{})
	ns := namespace(t, e, "routab", nil)
	createClass(t, e, "routab", "")
	startBackend(t, "rt1", "10.99.9.51:8080")
	createService(t, e, ns, "svc", "10.99.9.51")
	ip := gwapiv1.IPAddressType
	gateway := func(name string, port int, r gwapiv1.GatewayAddressRoutabilityType) error {
		gw := &gwapiv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: gwapiv1.GatewaySpec{
			GatewayClassName: "routab", Listeners: []gwapiv1.Listener{httpListener("http", port)}}}
		if r != "none" {
			gw.Spec.Addresses = []gwapiv1.GatewaySpecAddress{{Type: &ip, Routability: r}}
		}
		_, err := e.Gateway.GatewayV1().Gateways(ns).Create(ctxFor(t), gw, metav1.CreateOptions{})
		return err
	}
	for name, r := range map[string]gwapiv1.GatewayAddressRoutabilityType{"plain": "none", "sentinel": translator.RoutabilitySentinel,
		"cluster": gwapiv1.GatewayAddressRoutabilityCluster} {
		port := map[string]int{"plain": 18301, "sentinel": 18302, "cluster": 18303}[name]
		if err := gateway(name, port, r); err != nil {
			t.Fatalf("Gateway %s: %v", name, err)
		}
		createRoute(t, e, httpRoute(ns, name, []gwapiv1.ParentReference{parentRef(ns, name)}, []string{name + ".example"},
			prefixRule("/", backendRef("svc", 1))))
	}
	if err := gateway("reserved", 18304, "k8s.io/internal"); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Errorf("a k8s.io routability: got %v, want the CRD's reserved-prefix refusal", err)
	}

	eventually(t, "GatewayClass claims GatewayAddressRoutability only", func() error {
		gc, err := e.Gateway.GatewayV1().GatewayClasses().Get(ctxFor(t), "routab", metav1.GetOptions{})
		if err != nil {
			return err
		}
		got := featureNames(gc.Status.SupportedFeatures)
		if !slices.Contains(got, string(gwfeatures.SupportGatewayAddressRoutability)) ||
			slices.Contains(got, string(gwfeatures.SupportGatewayAddressRoutabilityCluster)) {
			return fmt.Errorf("supportedFeatures %v", got)
		}
		return nil
	})
	for name, want := range map[string]string{"plain": "", "sentinel": string(translator.RoutabilitySentinel)} {
		waitGateway(t, e, ns, name, func(gw *gwapiv1.Gateway) error {
			if err := checkConds(gw.Status.Conditions, gw.Generation, cond{"Programmed", "True", "Programmed"},
				cond{"AddressesAssigned", "True", "AddressesAssigned"}); err != nil {
				return err
			}
			if a := gw.Status.Addresses; len(a) != 1 || a[0].Value != gatewayIP || a[0].Routability == nil || string(*a[0].Routability) != want {
				return fmt.Errorf("status.addresses %s, want %s with routability %q", printAddresses(a), gatewayIP, want)
			}
			return nil
		})
	}
	answers(t, "10.99.9.52", 18302, "sentinel.example", "/", 200)
	waitGateway(t, e, ns, "cluster", func(gw *gwapiv1.Gateway) error {
		if err := checkConds(gw.Status.Conditions, gw.Generation, cond{"Accepted", "True", "Accepted"},
			cond{"Programmed", "False", "AddressNotAssigned"}, cond{"AddressesAssigned", "False", "NotAssigned"}); err != nil {
			return err
		}
		for _, c := range gw.Status.Conditions {
			if c.Type == "AddressesAssigned" && !strings.Contains(c.Message, "spec.addresses[0].routability: Cluster is not supported") {
				return fmt.Errorf("AddressesAssigned message %q", c.Message)
			}
		}
		if len(gw.Status.Addresses) != 0 {
			return fmt.Errorf("status.addresses %s, want none", printAddresses(gw.Status.Addresses))
		}
		return nil
	})
	refused(t, 18303) // nothing of it is served
}

func printAddresses(as []gwapiv1.GatewayStatusAddress) string {
	var out []string
	for _, a := range as {
		r := "<unset>"
		if a.Routability != nil {
			r = fmt.Sprintf("%q", *a.Routability)
		}
		out = append(out, a.Value+" routability "+r)
	}
	return "[" + strings.Join(out, ", ") + "]"
}
