package controller

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/provision"
	"github.com/coxswain-labs/coxswain/controller/provision/dedicated"
	infrav1a1 "github.com/coxswain-labs/coxswain/modules/api/infrastructure/v1alpha1"
)

// Dedicated configures the dedicated mode (controller/provision/dedicated): a Gateway whose
// parametersRef names a CoxswainGatewayParameters gets a proxy Deployment, Service and
// ServiceAccount of its own. It needs Provisioning; nil: such a Gateway is accepted but served
// by the shared pool like any other.
type Dedicated struct {
	// Image runs the dedicated proxies (--proxy-image) unless the parameters name another.
	Image string
	// DiscoveryAddress is what the dedicated proxies dial to reach the controllers' discovery
	// endpoint, host:port (--dedicated-discovery-address).
	DiscoveryAddress string
	// TrustBundle returns the PEM CA certificates the discovery endpoint's certificate chains to;
	// it is copied into a ConfigMap in each dedicated Gateway's namespace.
	TrustBundle func() []byte
	// ServiceAccount names the identity discovery admits for a Gateway's dedicated proxies
	// (discovery.DedicatedServiceAccount; this package cannot import discovery).
	ServiceAccount func(gatewayNamespace, gatewayName string) (namespace, name string)
}

func (d *Dedicated) validate() error {
	switch {
	case d.Image == "":
		return fmt.Errorf("dedicated mode: a proxy image is required")
	case d.DiscoveryAddress == "":
		return fmt.Errorf("dedicated mode: a discovery address is required")
	case d.TrustBundle == nil:
		return fmt.Errorf("dedicated mode: a trust bundle is required")
	case d.ServiceAccount == nil:
		return fmt.Errorf("dedicated mode: the dedicated proxies' ServiceAccount naming is required")
	}
	return nil
}

// dedicatedRenderer is the provisioner's DedicatedRenderer: it resolves a Gateway's parameters
// from the CoxswainGatewayParameters cache and renders its pool.
type dedicatedRenderer struct {
	opts        *Dedicated
	serviceType corev1.ServiceType
	params      dedicated.Lookup
}

var _ provision.DedicatedRenderer = (*dedicatedRenderer)(nil)

func (r *dedicatedRenderer) Objects(gw *gwapiv1.Gateway, class *gwapiv1.GatewayClass, sockets []provision.PortKey) ([]client.Object, bool, error) {
	p, err := dedicated.ResolveGateway(gw, class, r.params)
	if err != nil {
		// The translator reports the same error as the Gateway's Accepted=False InvalidParameters.
		return nil, true, err
	}
	if p == nil {
		return nil, false, nil
	}
	ns, sa := r.opts.ServiceAccount(gw.Namespace, gw.Name)
	if ns != gw.Namespace {
		return nil, true, fmt.Errorf("dedicated proxies of Gateway %s/%s must run as a ServiceAccount of namespace %s, not of its own", gw.Namespace, gw.Name, ns)
	}
	md := provision.InfrastructureMetadata(gw, dedicated.Component)
	socks := make([]dedicated.Socket, 0, len(sockets))
	for _, k := range sockets {
		socks = append(socks, dedicated.Socket{Port: k.Port, Protocol: k.Protocol})
	}
	return dedicated.Render(dedicated.Input{
		Sockets: socks,
		Gateway: gw, Params: p, Image: r.opts.Image, DiscoveryAddress: r.opts.DiscoveryAddress,
		TrustBundle: string(r.opts.TrustBundle()), ServiceAccount: sa,
		Meta:        dedicated.Meta{Labels: md.Labels, Annotations: md.Annotations},
		ServiceType: r.serviceType,
	}), true, nil
}

// gatewayParameters looks a CoxswainGatewayParameters up in the watch's cache.
func (w *watch) gatewayParameters(ns, name string) (*infrav1a1.CoxswainGatewayParameters, bool) {
	for _, k := range w.kinds {
		if k.gk.Group != infrav1a1.GroupName || k.gk.Kind != infrav1a1.GatewayParametersKind {
			continue
		}
		o, ok, err := k.informer.GetIndexer().GetByKey(ns + "/" + name)
		if err != nil || !ok {
			return nil, false
		}
		p, ok := o.(*infrav1a1.CoxswainGatewayParameters)
		return p, ok
	}
	return nil, false
}
