package translator

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/core"
)

// TestProvisionedGateways: two shared-mode Gateways on the same port bind their own internal
// ports on every address, never conflict, and publish their Services' addresses; the spec's
// addresses are validated as the shared mode gives them.
func TestProvisionedGateways(t *testing.T) {
	ip, host, named := gwapiv1.IPAddressType, gwapiv1.HostnameAddressType, gwapiv1.NamedAddressType
	cluster := gwapiv1.GatewayAddressRoutabilityCluster
	svcAddr := func(v string) []gwapiv1.GatewayStatusAddress {
		return []gwapiv1.GatewayStatusAddress{{Type: &ip, Value: v}}
	}
	prov := func(port uint32, addrs ...gwapiv1.GatewayStatusAddress) *Provisioned {
		return &Provisioned{InternalPorts: map[PortTransport]uint32{{Port: 5432, Transport: "tcp"}: port},
			Addresses: addrs, ClusterAddresses: svcAddr("10.96.0.9")}
	}
	gateway := func(name string, addrs ...gwapiv1.GatewaySpecAddress) *gwapiv1.Gateway {
		return &gwapiv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: gwapiv1.GatewaySpec{
			GatewayClassName: "c", Addresses: addrs,
			Listeners: []gwapiv1.Listener{{Name: "tcp", Port: 5432, Protocol: gwapiv1.TCPProtocolType}},
		}}
	}
	store := &Store{
		GatewayClasses: []*gwapiv1.GatewayClass{{ObjectMeta: metav1.ObjectMeta{Name: "c"},
			Spec: gwapiv1.GatewayClassSpec{ControllerName: DefaultControllerName}}},
		Gateways: []*gwapiv1.Gateway{
			gateway("a"), gateway("b"),
			gateway("pending"),
			gateway("two", gwapiv1.GatewaySpecAddress{Value: "10.96.0.1"}, gwapiv1.GatewaySpecAddress{Value: "10.96.0.2"}),
			gateway("named", gwapiv1.GatewaySpecAddress{Type: &named, Value: "pool"}),
			gateway("host", gwapiv1.GatewaySpecAddress{Type: &host, Value: "gw.example.com"}),
			gateway("cluster", gwapiv1.GatewaySpecAddress{Routability: cluster}),
		},
	}
	lb := gwapiv1.GatewayStatusAddress{Type: &ip, Value: "203.0.113.5"}
	hostAddr := gwapiv1.GatewayStatusAddress{Type: &host, Value: "gw.example.com"}
	provisioned := map[types.NamespacedName]*Provisioned{
		nn("ns", "a"): prov(20000, lb), nn("ns", "b"): prov(20001, svcAddr("10.96.0.8")...),
		nn("ns", "pending"): prov(20002),
		nn("ns", "two"):     prov(20003, lb), nn("ns", "named"): prov(20004, lb),
		nn("ns", "host"): prov(20005, lb, hostAddr), nn("ns", "cluster"): prov(20006, lb),
	}
	res := Translate(context.Background(), store, Options{Registry: core.NewRegistry(streamKind{}), Provisioned: provisioned, Routability: true})
	var bound []string
	for _, l := range res.Snapshot.Listeners {
		bound = append(bound, fmt.Sprintf("%s:%d", l.Address, l.Port))
	}
	if want := []string{":20000", ":20001", ":20005", ":20006"}; !slices.Equal(bound, want) {
		t.Errorf("bound %v, want %v", bound, want)
	}
	for _, tc := range []struct {
		gw, accepted, programmed string
		addrs                    []string
	}{
		{"a", "Accepted", "Programmed", []string{"203.0.113.5"}},
		{"b", "Accepted", "Programmed", []string{"10.96.0.8"}},
		{"pending", "Accepted", "AddressNotAssigned", nil},
		{"two", "Accepted", "AddressNotUsable", nil},
		{"named", "UnsupportedAddress", "Invalid", nil},
		{"host", "Accepted", "Programmed", []string{"203.0.113.5", "gw.example.com"}},
		{"cluster", "Accepted", "Programmed", []string{"10.96.0.9"}},
	} {
		st := res.Gateways[nn("ns", tc.gw)]
		if c := meta.FindStatusCondition(st.Conditions, "Accepted"); c.Reason != tc.accepted {
			t.Errorf("%s: Accepted %s (%s), want %s", tc.gw, c.Reason, c.Message, tc.accepted)
		}
		if c := meta.FindStatusCondition(st.Conditions, "Programmed"); c.Reason != tc.programmed {
			t.Errorf("%s: Programmed %s (%s), want %s", tc.gw, c.Reason, c.Message, tc.programmed)
		}
		var got []string
		for _, a := range st.Addresses {
			got = append(got, a.Value)
		}
		if !slices.Equal(got, tc.addrs) {
			t.Errorf("%s: status.addresses %v, want %v", tc.gw, got, tc.addrs)
		}
	}
	if r := res.Gateways[nn("ns", "cluster")].Addresses[0].Routability; r == nil || *r != cluster {
		t.Errorf("cluster: routability %v, want Cluster", r)
	}
}
