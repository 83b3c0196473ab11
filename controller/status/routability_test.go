package status

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// TestGatewayStatusRoutability: a translated status that reports routability (it carries
// AddressesAssigned) and has no address gets none from --status-address: the translator gave the
// Gateway none on purpose (an unsatisfied entry), or publishes them itself. With no address at all,
// AddressesAssigned turns False NotAssigned with Programmed. Without the condition the writer
// still falls back to --status-address.
func TestGatewayStatusRoutability(t *testing.T) {
	addr := []gwapiv1.GatewayStatusAddress{{Type: ptr(gwapiv1.IPAddressType), Value: "10.99.0.1"}}
	withCond := func(programmed metav1.ConditionStatus) *gwapiv1.GatewayStatus {
		st := gwStatus(2, programmed)
		st.Conditions = append(st.Conditions, cond("AddressesAssigned", "True", "AddressesAssigned", 2, t1))
		return st
	}
	got := gatewayStatus(gwapiv1.GatewayStatus{}, withCond("False"), gate{Generation: 2, Applied: 2, Addresses: addr})
	if len(got.Addresses) != 0 {
		t.Errorf("unsatisfied Gateway published %v, want no address", got.Addresses)
	}
	got = gatewayStatus(gwapiv1.GatewayStatus{}, withCond("True"), gate{Generation: 2, Applied: 2})
	if c := meta.FindStatusCondition(got.Conditions, "AddressesAssigned"); c.Status != "False" || c.Reason != "NotAssigned" {
		t.Errorf("no address to publish: AddressesAssigned %s/%s, want False/NotAssigned", c.Status, c.Reason)
	}
	if c := meta.FindStatusCondition(got.Conditions, "Programmed"); c.Reason != "AddressNotAssigned" {
		t.Errorf("no address to publish: Programmed %s/%s, want AddressNotAssigned", c.Status, c.Reason)
	}
	got = gatewayStatus(gwapiv1.GatewayStatus{}, gwStatus(2, "False"), gate{Generation: 2, Applied: 2, Addresses: addr})
	if !Equal(got.Addresses, addr) {
		t.Errorf("without routability: addresses %v, want --status-address %v", got.Addresses, addr)
	}
}
