package translator

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/core"
)

// TestGatewayAddresses: an address the controller assigned is bound and published for a Gateway
// that asks for one (no spec.addresses, or an IPAddress entry without a value, also beside
// addresses of its own), and ignored for one that only names its own.
func TestGatewayAddresses(t *testing.T) {
	ip := gwapiv1.IPAddressType
	assigned := map[types.NamespacedName]netip.Addr{nn("ns", "gw"): netip.MustParseAddr("10.250.0.7")}
	tests := []struct {
		name     string
		spec     []gwapiv1.GatewaySpecAddress
		assigned map[types.NamespacedName]netip.Addr
		pool     bool
		bind     []string
		status   []string
		reason   string // of Programmed; Programmed when empty
	}{
		{name: "no spec.addresses", assigned: assigned, bind: []string{"10.250.0.7"}, status: []string{"10.250.0.7"}},
		{name: "an empty IPAddress value", spec: []gwapiv1.GatewaySpecAddress{{Type: &ip}}, assigned: assigned,
			bind: []string{"10.250.0.7"}, status: []string{"10.250.0.7"}},
		{name: "an address of its own", spec: []gwapiv1.GatewaySpecAddress{{Type: &ip, Value: "192.0.2.1"}}, assigned: assigned,
			bind: []string{"192.0.2.1"}, status: []string{"192.0.2.1"}},
		{name: "an address of its own and an empty value", spec: []gwapiv1.GatewaySpecAddress{{Value: "192.0.2.1"}, {Type: &ip}},
			assigned: assigned, bind: []string{"10.250.0.7", "192.0.2.1"}, status: []string{"10.250.0.7", "192.0.2.1"}},
		{name: "an address of its own and an empty value, nothing assigned", spec: []gwapiv1.GatewaySpecAddress{{Value: "192.0.2.1"}, {Type: &ip}},
			bind: []string{"192.0.2.1"}, status: []string{"192.0.2.1"}},
		{name: "nothing assigned: every address, none published", bind: []string{""}},
		{name: "a pool with nothing left: not programmed", pool: true, reason: "AddressNotAssigned"},
		{name: "a pool with nothing left, an address of its own and an empty value", pool: true,
			spec: []gwapiv1.GatewaySpecAddress{{Value: "192.0.2.1"}, {Type: &ip}}, bind: []string{"192.0.2.1"}, status: []string{"192.0.2.1"}},
		{name: "an unusable address: nothing bound or published", spec: []gwapiv1.GatewaySpecAddress{{Value: "192.0.2.1"}, {Value: "224.0.0.1"}},
			assigned: assigned, reason: "AddressNotUsable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			store := &Store{
				GatewayClasses: []*gwapiv1.GatewayClass{{ObjectMeta: metav1.ObjectMeta{Name: "c"},
					Spec: gwapiv1.GatewayClassSpec{ControllerName: DefaultControllerName}}},
				Gateways: []*gwapiv1.Gateway{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gw"}, Spec: gwapiv1.GatewaySpec{
					GatewayClassName: "c", Addresses: tc.spec,
					Listeners: []gwapiv1.Listener{{Name: "tcp", Port: 5432, Protocol: gwapiv1.TCPProtocolType}},
				}}},
			}
			res := Translate(context.Background(), store, Options{
				Registry: core.NewRegistry(streamKind{}), GatewayAddresses: tc.assigned, AssignsAddresses: tc.pool,
			})
			var bind []string
			for _, l := range res.Snapshot.Listeners {
				bind = append(bind, l.Address)
			}
			if !slices.Equal(bind, tc.bind) {
				t.Errorf("listeners bound to %q, want %q", bind, tc.bind)
			}
			var status []string
			for _, a := range res.Gateways[nn("ns", "gw")].Addresses {
				status = append(status, a.Value)
			}
			if !slices.Equal(status, tc.status) {
				t.Errorf("status addresses %v, want %v", status, tc.status)
			}
			want := tc.reason
			if want == "" {
				want = "Programmed"
			}
			if c := meta.FindStatusCondition(res.Gateways[nn("ns", "gw")].Conditions, "Programmed"); c == nil || c.Reason != want {
				t.Errorf("Programmed %+v, want reason %s", c, want)
			}
		})
	}
}
