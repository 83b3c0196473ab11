package controller

import (
	"net/netip"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func poolGateway(name, class string, age int, published ...string) *gwapiv1.Gateway {
	gw := &gwapiv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			CreationTimestamp: metav1.NewTime(time.Unix(1_000_000-int64(age), 0))},
		Spec: gwapiv1.GatewaySpec{GatewayClassName: gwapiv1.ObjectName(class)},
	}
	for _, p := range published {
		typ := gwapiv1.IPAddressType
		gw.Status.Addresses = append(gw.Status.Addresses, gwapiv1.GatewayStatusAddress{Type: &typ, Value: p})
	}
	return gw
}

func TestAddressPool(t *testing.T) {
	ours := map[string]bool{"mine": true}
	withSpec := poolGateway("spec", "mine", 9)
	withSpec.Spec.Addresses = []gwapiv1.GatewaySpecAddress{{Value: "192.0.2.7"}}
	ipType := gwapiv1.IPAddressType
	emptyValue := poolGateway("empty", "mine", 1)
	emptyValue.Spec.Addresses = []gwapiv1.GatewaySpecAddress{{Type: &ipType}}
	static := func(name string, age int, values ...string) *gwapiv1.Gateway {
		gw := poolGateway(name, "mine", age)
		for _, v := range values {
			gw.Spec.Addresses = append(gw.Spec.Addresses, gwapiv1.GatewaySpecAddress{Type: &ipType, Value: v})
		}
		return gw
	}
	hostname := gwapiv1.HostnameAddressType
	byName := poolGateway("byname", "mine", 1)
	byName.Spec.Addresses = []gwapiv1.GatewaySpecAddress{{Type: &hostname, Value: "lb.example.com"}, {Type: &ipType}}
	cluster := poolGateway("cluster", "mine", 1)
	cluster.Spec.Addresses = []gwapiv1.GatewaySpecAddress{{Type: &ipType, Routability: gwapiv1.GatewayAddressRoutabilityCluster}}
	sentinel := poolGateway("sentinel", "mine", 2)
	sentinel.Spec.Addresses = []gwapiv1.GatewaySpecAddress{{Type: &ipType, Routability: "testing.x-k8s.io/sentinel"}}
	type step struct {
		gateways []*gwapiv1.Gateway
		want     map[string]string // gateway name → address; absent means none
	}
	tests := []struct {
		name  string
		pool  string
		steps []step
	}{
		{name: "lowest free address, oldest first, network address skipped", pool: "10.250.0.0/24", steps: []step{
			{gateways: []*gwapiv1.Gateway{poolGateway("b", "mine", 1), poolGateway("a", "mine", 2)},
				want: map[string]string{"a": "10.250.0.1", "b": "10.250.0.2"}},
		}},
		{name: "an address stays with its Gateway; a freed one is reused", pool: "10.250.0.0/24", steps: []step{
			{gateways: []*gwapiv1.Gateway{poolGateway("a", "mine", 3), poolGateway("b", "mine", 2)},
				want: map[string]string{"a": "10.250.0.1", "b": "10.250.0.2"}},
			{gateways: []*gwapiv1.Gateway{poolGateway("b", "mine", 2), poolGateway("c", "mine", 1)},
				want: map[string]string{"b": "10.250.0.2", "c": "10.250.0.1"}},
		}},
		{name: "published addresses are taken back after a restart", pool: "10.250.0.0/24", steps: []step{
			{gateways: []*gwapiv1.Gateway{poolGateway("a", "mine", 2, "10.250.0.9"), poolGateway("b", "mine", 1)},
				want: map[string]string{"a": "10.250.0.9", "b": "10.250.0.1"}},
		}},
		{name: "a published address outside the pool or claimed twice is replaced", pool: "10.250.0.0/24", steps: []step{
			{gateways: []*gwapiv1.Gateway{poolGateway("a", "mine", 3, "10.250.0.5"), poolGateway("b", "mine", 2, "10.250.0.5"),
				poolGateway("c", "mine", 1, "192.0.2.1")},
				want: map[string]string{"a": "10.250.0.5", "b": "10.250.0.1", "c": "10.250.0.2"}},
		}},
		{name: "other classes and Gateways with spec.addresses get none", pool: "10.250.0.0/24", steps: []step{
			{gateways: []*gwapiv1.Gateway{poolGateway("theirs", "other", 2), withSpec, poolGateway("a", "mine", 1)},
				want: map[string]string{"a": "10.250.0.1"}},
		}},
		{name: "an exhausted pool leaves the newest without; deletion frees one", pool: "10.250.0.0/30", steps: []step{
			{gateways: []*gwapiv1.Gateway{poolGateway("a", "mine", 3), poolGateway("b", "mine", 2), poolGateway("c", "mine", 1)},
				want: map[string]string{"a": "10.250.0.1", "b": "10.250.0.2"}},
			{gateways: []*gwapiv1.Gateway{poolGateway("b", "mine", 2), poolGateway("c", "mine", 1)},
				want: map[string]string{"b": "10.250.0.2", "c": "10.250.0.1"}},
		}},
		{name: "an IPAddress entry without a value asks for an address from the pool", pool: "10.250.0.0/24", steps: []step{
			{gateways: []*gwapiv1.Gateway{emptyValue}, want: map[string]string{"empty": "10.250.0.1"}},
		}},
		{name: "a static address in the range is never handed out", pool: "10.250.0.0/24", steps: []step{
			{gateways: []*gwapiv1.Gateway{static("s", 3, "10.250.0.1", "::ffff:10.250.0.2"), poolGateway("a", "mine", 2)},
				want: map[string]string{"a": "10.250.0.3"}},
		}},
		{name: "a static address takes an assigned one back", pool: "10.250.0.0/24", steps: []step{
			{gateways: []*gwapiv1.Gateway{poolGateway("a", "mine", 2)}, want: map[string]string{"a": "10.250.0.1"}},
			{gateways: []*gwapiv1.Gateway{poolGateway("a", "mine", 2), static("s", 1, "10.250.0.1")},
				want: map[string]string{"a": "10.250.0.2"}},
		}},
		{name: "a static address of another class is not reserved", pool: "10.250.0.0/24", steps: []step{
			{gateways: []*gwapiv1.Gateway{func() *gwapiv1.Gateway {
				gw := static("theirs", 2, "10.250.0.1")
				gw.Spec.GatewayClassName = "other"
				return gw
			}(), poolGateway("a", "mine", 1)}, want: map[string]string{"a": "10.250.0.1"}},
		}},
		{name: "an empty value beside a static address gets one more", pool: "10.250.0.0/24", steps: []step{
			{gateways: []*gwapiv1.Gateway{func() *gwapiv1.Gateway {
				gw := static("both", 1, "10.250.0.1")
				gw.Spec.Addresses = append(gw.Spec.Addresses, gwapiv1.GatewaySpecAddress{Type: &ipType})
				return gw
			}()}, want: map[string]string{"both": "10.250.0.2"}},
		}},
		{name: "an unsupported address type gets none", pool: "10.250.0.0/24", steps: []step{
			{gateways: []*gwapiv1.Gateway{byName}, want: map[string]string{}},
		}},
		{name: "a routability we cannot give gets none; the sentinel one does", pool: "10.250.0.0/24", steps: []step{
			{gateways: []*gwapiv1.Gateway{cluster, sentinel}, want: map[string]string{"sentinel": "10.250.0.1"}},
		}},
		{name: "IPv6", pool: "fd00:250::/120", steps: []step{
			{gateways: []*gwapiv1.Gateway{poolGateway("a", "mine", 1)}, want: map[string]string{"a": "fd00:250::"}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newAddressPool(netip.MustParsePrefix(tc.pool))
			for i, s := range tc.steps {
				got := p.assign(s.gateways, ours)
				if len(got) != len(s.want) {
					t.Errorf("step %d: got %v, want %v", i, got, s.want)
				}
				for name, want := range s.want {
					if a := got[types.NamespacedName{Namespace: "ns", Name: name}]; a.String() != want {
						t.Errorf("step %d: %s got %v, want %s", i, name, a, want)
					}
				}
			}
		})
	}
}
