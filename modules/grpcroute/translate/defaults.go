package translate

import (
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/modules/translation"
)

// defaultRoute fills in what the GRPCRoute CRD's defaults would: Exact method and header
// matches, and the references' group, kind and weight.
func defaultRoute(r *gwapiv1.GRPCRoute) {
	translation.DefaultParentRefs(r.Spec.ParentRefs)
	for i := range r.Spec.Rules {
		rule := &r.Spec.Rules[i]
		for j := range rule.Matches {
			m := &rule.Matches[j]
			if m.Method != nil && m.Method.Type == nil {
				m.Method.Type = ptr.To(gwapiv1.GRPCMethodMatchExact)
			}
			for k := range m.Headers {
				if m.Headers[k].Type == nil {
					m.Headers[k].Type = ptr.To(gwapiv1.GRPCHeaderMatchExact)
				}
			}
		}
		defaultFilters(rule.Filters)
		for j := range rule.BackendRefs {
			translation.DefaultBackendRef(&rule.BackendRefs[j].BackendRef)
			defaultFilters(rule.BackendRefs[j].Filters)
		}
	}
}

func defaultFilters(fs []gwapiv1.GRPCRouteFilter) {
	for i := range fs {
		if m := fs[i].RequestMirror; m != nil {
			translation.DefaultBackendObjectRef(&m.BackendRef)
		}
	}
}
