package standalone

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// applyDefaults fills in what the API server would: the Gateway API CRD defaults
// (+kubebuilder:default markers) and the core kinds' protocol defaults. The translator then sees
// the same object whether it came from a cluster or a file.
func applyDefaults(o object) {
	switch o := o.(type) {
	case *gwapiv1.Gateway:
		defaultGateway(o)
	case *gwapiv1.HTTPRoute:
		defaultHTTPRoute(o)
	case *gwapiv1.GRPCRoute:
		defaultGRPCRoute(o)
	case *gwapiv1.TCPRoute:
		defaultL4Route(&o.Spec.CommonRouteSpec, len(o.Spec.Rules), func(i int) []gwapiv1.BackendRef { return o.Spec.Rules[i].BackendRefs })
	case *gwapiv1.TLSRoute:
		defaultL4Route(&o.Spec.CommonRouteSpec, len(o.Spec.Rules), func(i int) []gwapiv1.BackendRef { return o.Spec.Rules[i].BackendRefs })
	case *gwapiv1.UDPRoute:
		defaultL4Route(&o.Spec.CommonRouteSpec, len(o.Spec.Rules), func(i int) []gwapiv1.BackendRef { return o.Spec.Rules[i].BackendRefs })
	case *corev1.Service:
		for i := range o.Spec.Ports {
			if o.Spec.Ports[i].Protocol == "" {
				o.Spec.Ports[i].Protocol = corev1.ProtocolTCP
			}
		}
		if o.Spec.Type == "" {
			o.Spec.Type = corev1.ServiceTypeClusterIP
		}
	case *discoveryv1.EndpointSlice:
		for i := range o.Ports {
			if o.Ports[i].Protocol == nil {
				o.Ports[i].Protocol = ptr.To(corev1.ProtocolTCP)
			}
		}
	case *corev1.Secret:
		// The API server merges stringData into data and never stores stringData.
		for k, v := range o.StringData {
			if o.Data == nil {
				o.Data = map[string][]byte{}
			}
			o.Data[k] = []byte(v)
		}
		o.StringData = nil
		if o.Type == "" {
			o.Type = corev1.SecretTypeOpaque
		}
	}
}

func defaultGateway(g *gwapiv1.Gateway) {
	for i := range g.Spec.Addresses {
		if g.Spec.Addresses[i].Type == nil {
			g.Spec.Addresses[i].Type = ptr.To(gwapiv1.IPAddressType)
		}
	}
	for i := range g.Spec.Listeners {
		l := &g.Spec.Listeners[i]
		if l.AllowedRoutes == nil {
			l.AllowedRoutes = &gwapiv1.AllowedRoutes{}
		}
		if l.AllowedRoutes.Namespaces == nil {
			l.AllowedRoutes.Namespaces = &gwapiv1.RouteNamespaces{}
		}
		if l.AllowedRoutes.Namespaces.From == nil {
			l.AllowedRoutes.Namespaces.From = ptr.To(gwapiv1.NamespacesFromSame)
		}
		for j := range l.AllowedRoutes.Kinds {
			if l.AllowedRoutes.Kinds[j].Group == nil {
				l.AllowedRoutes.Kinds[j].Group = ptr.To(gwapiv1.Group(gwapiv1.GroupName))
			}
		}
		if l.TLS != nil {
			if l.TLS.Mode == nil {
				l.TLS.Mode = ptr.To(gwapiv1.TLSModeTerminate)
			}
			for j := range l.TLS.CertificateRefs {
				ref := &l.TLS.CertificateRefs[j]
				if ref.Group == nil {
					ref.Group = ptr.To(gwapiv1.Group(""))
				}
				if ref.Kind == nil {
					ref.Kind = ptr.To(gwapiv1.Kind("Secret"))
				}
			}
		}
	}
}

func defaultHTTPRoute(r *gwapiv1.HTTPRoute) {
	for i := range r.Spec.ParentRefs {
		defaultParentRef(&r.Spec.ParentRefs[i])
	}
	if len(r.Spec.Rules) == 0 {
		r.Spec.Rules = []gwapiv1.HTTPRouteRule{{}}
	}
	for i := range r.Spec.Rules {
		rule := &r.Spec.Rules[i]
		if len(rule.Matches) == 0 {
			rule.Matches = []gwapiv1.HTTPRouteMatch{{}}
		}
		for j := range rule.Matches {
			defaultMatch(&rule.Matches[j])
		}
		defaultFilters(rule.Filters)
		for j := range rule.BackendRefs {
			b := &rule.BackendRefs[j]
			defaultBackendObjectRef(&b.BackendObjectReference)
			if b.Weight == nil {
				b.Weight = ptr.To[int32](1)
			}
			defaultFilters(b.Filters)
		}
	}
}

func defaultGRPCRoute(r *gwapiv1.GRPCRoute) {
	for i := range r.Spec.ParentRefs {
		defaultParentRef(&r.Spec.ParentRefs[i])
	}
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
		defaultGRPCFilters(rule.Filters)
		for j := range rule.BackendRefs {
			b := &rule.BackendRefs[j]
			defaultBackendObjectRef(&b.BackendObjectReference)
			if b.Weight == nil {
				b.Weight = ptr.To[int32](1)
			}
			defaultGRPCFilters(b.Filters)
		}
	}
}

func defaultGRPCFilters(fs []gwapiv1.GRPCRouteFilter) {
	for i := range fs {
		if m := fs[i].RequestMirror; m != nil {
			defaultBackendObjectRef(&m.BackendRef)
		}
	}
}

// defaultL4Route defaults the parentRefs and backendRefs of a TCPRoute, TLSRoute or UDPRoute.
func defaultL4Route(spec *gwapiv1.CommonRouteSpec, rules int, refs func(int) []gwapiv1.BackendRef) {
	for i := range spec.ParentRefs {
		defaultParentRef(&spec.ParentRefs[i])
	}
	for i := range rules {
		brs := refs(i)
		for j := range brs {
			defaultBackendObjectRef(&brs[j].BackendObjectReference)
			if brs[j].Weight == nil {
				brs[j].Weight = ptr.To[int32](1)
			}
		}
	}
}

func defaultParentRef(p *gwapiv1.ParentReference) {
	if p.Group == nil {
		p.Group = ptr.To(gwapiv1.Group(gwapiv1.GroupName))
	}
	if p.Kind == nil {
		p.Kind = ptr.To(gwapiv1.Kind("Gateway"))
	}
}

func defaultMatch(m *gwapiv1.HTTPRouteMatch) {
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
			defaultBackendObjectRef(&f.RequestMirror.BackendRef)
		}
	}
}

func defaultBackendObjectRef(b *gwapiv1.BackendObjectReference) {
	if b.Group == nil {
		b.Group = ptr.To(gwapiv1.Group(""))
	}
	if b.Kind == nil {
		b.Kind = ptr.To(gwapiv1.Kind("Service"))
	}
}
