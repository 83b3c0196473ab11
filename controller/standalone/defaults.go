package standalone

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// applyDefaults fills in what the API server would for the kinds the core passes read: the Gateway
// CRD's defaults (+kubebuilder:default markers) and the core kinds' protocol defaults. Route kinds
// default themselves (translation.RouteAPI.Default). The translator then sees the same object
// whether it came from a cluster or a file.
func applyDefaults(o object) {
	switch o := o.(type) {
	case *gwapiv1.Gateway:
		defaultGateway(o)
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
