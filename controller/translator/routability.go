package translator

import (
	"fmt"
	"strings"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// RoutabilitySentinel is the value GEP-5093 reserves for conformance: it carries no guarantee,
// and an implementation claiming GatewayAddressRoutability must accept it and report it back.
const RoutabilitySentinel gwapiv1.GatewayAddressRoutabilityType = "testing.x-k8s.io/sentinel"

// RoutabilityUnsupported says why a spec.addresses[].routability cannot be satisfied, "" when it
// can. Coxswain gives the default (no guarantee, "") and the conformance sentinel. It never
// satisfies Cluster: an address it gives is one its proxies bind (a static value, a pool address)
// or --status-address, and none of those is a Service ClusterIP from the ServiceCIDR, which is
// what Cluster promises; a Gateway reached through the proxy Service's ClusterIP is reached
// there whatever its status says, but the controller does not own that Service and cannot vouch
// for it. Any other value (other testing.x-k8s.io ones included) is not ours to promise, and the
// GEP forbids substituting another scope.
func RoutabilityUnsupported(r gwapiv1.GatewayAddressRoutabilityType) string {
	switch r {
	case gwapiv1.GatewayAddressRoutabilityDefault, RoutabilitySentinel:
		return ""
	case gwapiv1.GatewayAddressRoutabilityCluster:
		return "Cluster is not supported: Coxswain's addresses are bound by its proxies or set by --status-address, none is a Service ClusterIP"
	}
	return fmt.Sprintf("%q is not supported; only the default (empty) is", r)
}

// addressesAssigned is the AddressesAssigned condition (GEP-5093): every spec.addresses entry
// satisfied (or none asked for and the default chosen), some of them, or none.
func (t *session) addressesAssigned(g *gatewayState) condState {
	switch {
	case len(g.unsatisfied) == 0:
		return condState{ok: true, reason: string(gwapiv1.GatewayReasonAddressesAssigned), msg: "All addresses are assigned"}
	case len(g.addresses) > 0 && g.addrMsg == "" && g.rejectReason == "":
		return condState{reason: string(gwapiv1.GatewayReasonAddressesPartiallyAssigned),
			msg: "unsatisfied: " + strings.Join(g.unsatisfied, "; ")}
	}
	return condState{reason: string(gwapiv1.GatewayReasonAddressesNotAssigned), msg: "unsatisfied: " + strings.Join(g.unsatisfied, "; ")}
}

// statusRoutability is the routability to report for a status address: the routability of the
// spec entry it satisfies, the default for one nobody asked for; nil when routability is not
// reported (the Gateway CRDs lack the field, so the API server would drop it).
func (t *session) statusRoutability(g *gatewayState, addr string) *gwapiv1.GatewayAddressRoutabilityType {
	if !t.opts.Routability {
		return nil
	}
	r := g.routability[addr]
	return &r
}
