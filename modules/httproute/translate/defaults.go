package translate

import (
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/modules/translation"
)

// defaultRoute fills in what the HTTPRoute CRD's defaults would: one rule matching every path
// when there is none, PathPrefix "/" for a match without a path, Exact header and query matches,
// redirect status 302, and the references' group, kind and weight.
func defaultRoute(r *gwapiv1.HTTPRoute) {
	translation.DefaultParentRefs(r.Spec.ParentRefs)
	if len(r.Spec.Rules) == 0 {
		r.Spec.Rules = []gwapiv1.HTTPRouteRule{{}}
	}
	for i := range r.Spec.Rules {
		rule := &r.Spec.Rules[i]
		if len(rule.Matches) == 0 {
			rule.Matches = []gwapiv1.HTTPRouteMatch{{}}
		}
		for j := range rule.Matches {
			defaultMatchFields(&rule.Matches[j])
		}
		defaultFilters(rule.Filters)
		for j := range rule.BackendRefs {
			translation.DefaultBackendRef(&rule.BackendRefs[j].BackendRef)
			defaultFilters(rule.BackendRefs[j].Filters)
		}
	}
}

func defaultMatchFields(m *gwapiv1.HTTPRouteMatch) {
	if m.Path == nil {
		m.Path = &gwapiv1.HTTPPathMatch{}
	}
	if m.Path.Type == nil {
		m.Path.Type = ptr.To(gwapiv1.PathMatchPathPrefix)
	}
	if m.Path.Value == nil {
		m.Path.Value = ptr.To("/")
	}
	for k := range m.Headers {
		if m.Headers[k].Type == nil {
			m.Headers[k].Type = ptr.To(gwapiv1.HeaderMatchExact)
		}
	}
	for k := range m.QueryParams {
		if m.QueryParams[k].Type == nil {
			m.QueryParams[k].Type = ptr.To(gwapiv1.QueryParamMatchExact)
		}
	}
}

func defaultFilters(fs []gwapiv1.HTTPRouteFilter) {
	for i := range fs {
		f := &fs[i]
		if f.RequestRedirect != nil && f.RequestRedirect.StatusCode == nil {
			f.RequestRedirect.StatusCode = ptr.To(302)
		}
		if f.RequestMirror != nil {
			translation.DefaultBackendObjectRef(&f.RequestMirror.BackendRef)
		}
	}
}
