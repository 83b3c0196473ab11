package translator

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/core"
)

// TestAddressRoutability: each spec.addresses entry is satisfied on its own (GEP-5093). The
// default and the conformance sentinel are given and reported on the status address they got;
// Cluster, an unknown prefixed value and other testing.x-k8s.io values never are, the other
// entries are still served (PartiallyAssigned), and a Gateway none of whose entries is satisfied
// is not programmed (AddressNotAssigned, NotAssigned). Without Options.Routability (CRDs without
// the field) neither the field nor the condition is written.
func TestAddressRoutability(t *testing.T) {
	ip := gwapiv1.IPAddressType
	hostname := gwapiv1.HostnameAddressType
	entry := func(value string, r gwapiv1.GatewayAddressRoutabilityType) gwapiv1.GatewaySpecAddress {
		return gwapiv1.GatewaySpecAddress{Type: &ip, Value: value, Routability: r}
	}
	pool := map[types.NamespacedName]netip.Addr{nn("ns", "gw"): netip.MustParseAddr("10.250.0.7")}
	statusAddr := []gwapiv1.GatewayStatusAddress{{Type: &hostname, Value: "gw.example.com"}}
	tests := []struct {
		name       string
		spec       []gwapiv1.GatewaySpecAddress
		pool       bool // a --gateway-address-pool that gave the Gateway 10.250.0.7
		off        bool // Options.Routability unset
		bind       []string
		status     []string // value=routability
		programmed string
		assigned   string // the AddressesAssigned reason; "" for no condition
		msg        string // in the AddressesAssigned message
	}{
		{name: "no spec.addresses: the pool's, default", pool: true,
			bind: []string{"10.250.0.7"}, status: []string{"10.250.0.7="}, programmed: "Programmed", assigned: "AddressesAssigned"},
		{name: "no spec.addresses, no pool: --status-address, default",
			bind: []string{""}, status: []string{"gw.example.com="}, programmed: "Programmed", assigned: "AddressesAssigned"},
		{name: "the sentinel on a static value", spec: []gwapiv1.GatewaySpecAddress{entry("192.0.2.1", RoutabilitySentinel)},
			bind: []string{"192.0.2.1"}, status: []string{"192.0.2.1=testing.x-k8s.io/sentinel"}, programmed: "Programmed", assigned: "AddressesAssigned"},
		{name: "the sentinel without a value: the pool's", pool: true, spec: []gwapiv1.GatewaySpecAddress{entry("", RoutabilitySentinel)},
			bind: []string{"10.250.0.7"}, status: []string{"10.250.0.7=testing.x-k8s.io/sentinel"}, programmed: "Programmed", assigned: "AddressesAssigned"},
		{name: "the sentinel without a value, no pool: --status-address", spec: []gwapiv1.GatewaySpecAddress{entry("", RoutabilitySentinel)},
			bind: []string{""}, status: []string{"gw.example.com=testing.x-k8s.io/sentinel"}, programmed: "Programmed", assigned: "AddressesAssigned"},
		{name: "an explicit empty routability and the sentinel", spec: []gwapiv1.GatewaySpecAddress{entry("192.0.2.2", ""), entry("192.0.2.1", RoutabilitySentinel)},
			bind: []string{"192.0.2.1", "192.0.2.2"}, status: []string{"192.0.2.1=testing.x-k8s.io/sentinel", "192.0.2.2="},
			programmed: "Programmed", assigned: "AddressesAssigned"},
		{name: "Cluster alone: not programmed", spec: []gwapiv1.GatewaySpecAddress{entry("", gwapiv1.GatewayAddressRoutabilityCluster)},
			programmed: "AddressNotAssigned", assigned: "NotAssigned", msg: "spec.addresses[0].routability: Cluster is not supported"},
		{name: "Cluster on a static value beside an empty request: partial", pool: true,
			spec: []gwapiv1.GatewaySpecAddress{entry("10.96.0.10", gwapiv1.GatewayAddressRoutabilityCluster), entry("", "")},
			bind: []string{"10.250.0.7"}, status: []string{"10.250.0.7="}, programmed: "Programmed", assigned: "PartiallyAssigned",
			msg: "spec.addresses[0].routability: Cluster"},
		{name: "an unknown prefixed value beside a static one: partial",
			spec: []gwapiv1.GatewaySpecAddress{entry("192.0.2.1", ""), entry("192.0.2.2", "example.com/CorpWan")},
			bind: []string{"192.0.2.1"}, status: []string{"192.0.2.1="}, programmed: "Programmed", assigned: "PartiallyAssigned",
			msg: `spec.addresses[1].routability: "example.com/CorpWan" is not supported`},
		{name: "another testing.x-k8s.io value is unsupported", spec: []gwapiv1.GatewaySpecAddress{entry("192.0.2.1", "testing.x-k8s.io/other")},
			programmed: "AddressNotAssigned", assigned: "NotAssigned", msg: "testing.x-k8s.io/other"},
		{name: "a pool with nothing left", pool: true, spec: []gwapiv1.GatewaySpecAddress{entry("", RoutabilitySentinel)},
			programmed: "AddressNotAssigned", assigned: "NotAssigned", msg: "no free address"},
		{name: "not reported without the CRD field", off: true, spec: []gwapiv1.GatewaySpecAddress{entry("192.0.2.1", "")},
			bind: []string{"192.0.2.1"}, status: []string{"192.0.2.1"}, programmed: "Programmed"},
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
			opts := Options{Registry: core.NewRegistry(streamKind{}), Routability: !tc.off, StatusAddresses: statusAddr}
			if tc.pool {
				opts.AssignsAddresses = true
				if tc.name != "a pool with nothing left" {
					opts.GatewayAddresses = pool
				}
			}
			res := Translate(context.Background(), store, opts)
			var bind []string
			for _, l := range res.Snapshot.Listeners {
				bind = append(bind, l.Address)
			}
			if !slices.Equal(bind, tc.bind) {
				t.Errorf("listeners bound to %q, want %q", bind, tc.bind)
			}
			st := res.Gateways[nn("ns", "gw")]
			var status []string
			for _, a := range st.Addresses {
				s := a.Value
				if a.Routability != nil {
					s += "=" + string(*a.Routability)
				}
				status = append(status, s)
			}
			if !slices.Equal(status, tc.status) {
				t.Errorf("status addresses %q, want %q", status, tc.status)
			}
			if c := meta.FindStatusCondition(st.Conditions, "Programmed"); c == nil || c.Reason != tc.programmed {
				t.Errorf("Programmed %+v, want reason %s", c, tc.programmed)
			}
			c := meta.FindStatusCondition(st.Conditions, "AddressesAssigned")
			switch {
			case tc.assigned == "" && c != nil:
				t.Errorf("AddressesAssigned %+v, want none", c)
			case tc.assigned == "":
			case c == nil || c.Reason != tc.assigned || (c.Status == metav1.ConditionTrue) != (tc.assigned == "AddressesAssigned"):
				t.Errorf("AddressesAssigned %+v, want reason %s", c, tc.assigned)
			case !strings.Contains(c.Message, tc.msg):
				t.Errorf("AddressesAssigned message %q, want it to contain %q", c.Message, tc.msg)
			}
		})
	}
}
