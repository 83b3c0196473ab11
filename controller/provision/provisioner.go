package provision

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	appslisters "k8s.io/client-go/listers/apps/v1"
	autoscalinglisters "k8s.io/client-go/listers/autoscaling/v2"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/translator"
	policyv1a1 "github.com/coxswain-labs/coxswain/modules/api/policy/v1alpha1"
)

// DefaultProxySelector selects the shared proxy pool's pods as deploy/ and the chart label them.
const DefaultProxySelector = LabelName + "=coxswain," + LabelComponent + "=proxy"

// Options configure a Provisioner.
type Options struct {
	Log    *zap.Logger
	Client client.Client
	// Services and ServiceAccounts are the controller's caches: Services of every namespace (the
	// owned VIP Services among them), ServiceAccounts labelled app.kubernetes.io/managed-by=coxswain.
	Services        corelisters.ServiceLister
	ServiceAccounts corelisters.ServiceAccountLister
	// Deployments are the dedicated mode's Deployments (labelled managed-by=coxswain); nil: a
	// Deployment's drift is repaired only when its desired content changes.
	Deployments appslisters.DeploymentLister
	// ConfigMaps, HPAs and PDBs are the rest of the dedicated mode's objects (labelled
	// managed-by=coxswain); nil: one's drift is repaired only when its desired content changes.
	ConfigMaps corelisters.ConfigMapLister
	HPAs       autoscalinglisters.HorizontalPodAutoscalerLister
	PDBs       policylisters.PodDisruptionBudgetLister
	// ServiceType is every shared VIP Service's type (--gateway-service-type; LoadBalancer when empty).
	ServiceType corev1.ServiceType
	// ProxySelector selects the shared pool's pods (DefaultProxySelector when nil).
	ProxySelector map[string]string
	// ProxyPods are the shared pool's pods (a cache of the pool's namespace, filtered by
	// ProxySelector), published as every VIP Service's endpoints; nil: the EndpointSlices list none.
	ProxyPods corelisters.PodLister
	// EndpointSlices are the controller's cache of the EndpointSlices it wrote; nil: one's drift is
	// repaired only when its desired content changes.
	EndpointSlices discoverylisters.EndpointSliceLister
	// Ports is the internal port range (DefaultPortRange when zero).
	Ports PortRange
	// Dedicated renders the dedicated mode's objects; the registered renderer
	// (RegisterDedicated) when nil.
	Dedicated DedicatedRenderer
	// StatusAddresses are published for a Gateway whose Service has neither a load-balancer
	// ingress nor a cluster IP (--status-address).
	StatusAddresses []gwapiv1.GatewayStatusAddress
}

// Provisioner reconciles the objects of every Gateway of ours for one leadership term: a new
// leader builds a new one, which reads the internal ports back from the live VIP Services before
// it allocates any.
type Provisioner struct {
	opts    Options
	log     *zap.Logger
	ports   *portAllocator
	applier *Applier
	seeded  bool
	warned  map[types.UID]string // the reserved-key message last logged per Gateway
	// last is each Gateway as last provisioned: one that leaves our classes still exists, and
	// its objects are pruned through it.
	last map[types.NamespacedName]*gwapiv1.Gateway
}

// New builds a provisioner.
func New(opts Options) (*Provisioner, error) {
	if opts.Client == nil || opts.Services == nil || opts.Log == nil {
		return nil, errors.New("provision: Client, Services and Log are required")
	}
	if opts.ServiceType == "" {
		opts.ServiceType = corev1.ServiceTypeLoadBalancer
	}
	if opts.ProxySelector == nil {
		sel, _ := labels.ConvertSelectorToLabelsMap(DefaultProxySelector)
		opts.ProxySelector = sel
	}
	if opts.Ports == (PortRange{}) {
		opts.Ports = DefaultPortRange
	}
	if err := opts.Ports.Validate(); err != nil {
		return nil, err
	}
	p := &Provisioner{opts: opts, log: opts.Log, ports: newPortAllocator(opts.Ports), applier: NewApplier(opts.Client),
		warned: map[types.UID]string{}, last: map[types.NamespacedName]*gwapiv1.Gateway{}}
	p.applier.Live = p.live
	return p, nil
}

// Input is the part of the world the provisioner reads.
type Input struct {
	// Gateways are the Gateways of our classes.
	Gateways     []*gwapiv1.Gateway
	Classes      map[string]*gwapiv1.GatewayClass
	ListenerSets []*gwapiv1.ListenerSet
	// ClientTrafficPolicies say which HTTPS listeners serve HTTP/3, whose UDP sockets the
	// Services expose too.
	ClientTrafficPolicies []*policyv1a1.ClientTrafficPolicy
}

// Reconcile provisions every Gateway of in and returns, for the shared ones, what the translator
// needs: internal ports and status addresses. An error is transient (the API server refused a
// call for a reason worth retrying): the caller retries; the result is still usable.
func (p *Provisioner) Reconcile(ctx context.Context, in Input) (map[types.NamespacedName]*translator.Provisioned, error) {
	gws := append([]*gwapiv1.Gateway(nil), in.Gateways...)
	sort.Slice(gws, func(i, j int) bool { // oldest first: they get the lowest ports on a fresh start
		a, b := gws[i].CreationTimestamp, gws[j].CreationTimestamp
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return gws[i].Namespace+"/"+gws[i].Name < gws[j].Namespace+"/"+gws[j].Name
	})
	if !p.seeded {
		p.seed(gws)
		p.seeded = true
	}
	present := map[types.NamespacedName]bool{}
	out := map[types.NamespacedName]*translator.Provisioned{}
	var errs []error
	for _, gw := range gws {
		nn := types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name}
		present[nn] = true
		if old, ok := p.last[nn]; ok && old.UID != gw.UID {
			p.applier.Forget(old.UID) // deleted and made again under the same name
			p.ports.release(nn)
		}
		p.last[nn] = gw
		class := in.Classes[string(gw.Spec.GatewayClassName)]
		sockets := gatewaySockets(gw, in.ListenerSets, in.ClientTrafficPolicies)
		if r := p.dedicated(); r != nil {
			objs, handled, err := r.Objects(gw, class, sockets.All())
			if handled {
				p.ports.release(nn)
				if err != nil {
					p.log.Warn("dedicated Gateway not provisioned", zap.String("gateway", nn.String()), zap.Error(err))
					objs = nil
				}
				prov, err := p.dedicatedPool(ctx, gw, objs)
				if err != nil {
					errs = append(errs, fmt.Errorf("Gateway %s: %w", nn, err))
				}
				out[nn] = prov
				continue
			}
		}
		prov, err := p.shared(ctx, gw, sockets)
		if err != nil {
			errs = append(errs, fmt.Errorf("Gateway %s: %w", nn, err))
		}
		out[nn] = prov
	}
	for nn, gw := range p.last {
		if present[nn] {
			continue
		}
		// Deleted (the garbage collector deletes its objects, and pruning finds them gone or
		// deletes them first) or moved to a class that is not ours (pruning deletes them).
		if res := p.applier.Apply(ctx, gw, nil); res.Err != nil {
			errs = append(errs, res.Err)
			continue
		}
		p.ports.release(nn)
		p.applier.Forget(gw.UID)
		delete(p.warned, gw.UID)
		delete(p.last, nn)
	}
	return out, errors.Join(errs...)
}

// seed reads the internal ports of the live VIP Services of gws and tells the applier which
// objects are theirs.
func (p *Provisioner) seed(gws []*gwapiv1.Gateway) {
	byUID := map[types.UID]*gwapiv1.Gateway{}
	for _, gw := range gws {
		byUID[gw.UID] = gw
	}
	sel := labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedBy, LabelComponent: ComponentGateway})
	svcs, err := p.opts.Services.List(sel)
	if err != nil {
		p.log.Warn("reading the VIP Services back", zap.Error(err))
		return
	}
	sort.Slice(svcs, func(i, j int) bool { return svcs[i].CreationTimestamp.Before(&svcs[j].CreationTimestamp) })
	for _, svc := range svcs {
		if gw := byUID[controllerUID(svc)]; gw != nil {
			p.ports.seed(types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name}, svc)
			p.applier.Adopt(gw.UID, ObjectKey{GVK: corev1.SchemeGroupVersion.WithKind("Service"), Namespace: svc.Namespace, Name: svc.Name})
		}
	}
	if p.opts.EndpointSlices != nil {
		eps, err := p.opts.EndpointSlices.List(labels.SelectorFromSet(labels.Set{discoveryv1.LabelManagedBy: EndpointSliceManager}))
		if err != nil {
			p.log.Warn("reading the VIP Services' EndpointSlices back", zap.Error(err))
		}
		for _, es := range eps {
			if gw := byUID[controllerUID(es)]; gw != nil {
				p.applier.Adopt(gw.UID, ObjectKey{GVK: discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice"), Namespace: es.Namespace, Name: es.Name})
			}
		}
	}
	if p.opts.ServiceAccounts == nil {
		return
	}
	sas, err := p.opts.ServiceAccounts.List(sel)
	if err != nil {
		p.log.Warn("reading the identity ServiceAccounts back", zap.Error(err))
		return
	}
	for _, sa := range sas {
		if gw := byUID[controllerUID(sa)]; gw != nil {
			p.applier.Adopt(gw.UID, ObjectKey{GVK: corev1.SchemeGroupVersion.WithKind("ServiceAccount"), Namespace: sa.Namespace, Name: sa.Name})
		}
	}
}

// shared provisions gw on the shared pool: its VIP Service and identity ServiceAccount.
func (p *Provisioner) shared(ctx context.Context, gw *gwapiv1.Gateway, sockets Sockets) (*translator.Provisioned, error) {
	nn := types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name}
	prov := &translator.Provisioned{InternalPorts: map[translator.PortTransport]uint32{}}
	pin, ok := pinnedAddress(gw)
	if !ok {
		// An unsupported address type: the Gateway is not accepted and gets nothing.
		p.ports.release(nn)
		res := p.applier.Apply(ctx, gw, nil)
		return prov, res.Err
	}
	ports, err := p.ports.allocate(nn, sockets.Keys)
	if err != nil {
		prov.AddressReason, prov.AddressMessage = gwapiv1.GatewayReasonNoResources, err.Error()
		return prov, nil
	}
	for k, v := range ports {
		prov.InternalPorts[translator.PortTransport{Port: k.Port, Transport: strings.ToLower(string(k.Protocol))}] = uint32(v)
	}
	md := InfrastructureMetadata(gw, ComponentGateway)
	p.noteDropped(gw, prov, md)
	// One type for every shared Gateway: a GatewayClass whose parametersRef could choose another
	// makes its Gateways dedicated, where CoxswainGatewayParameters spec.service.type decides.
	svc := vipService(gw, md, p.opts.ServiceType, ports, sockets.HTTP3, pin)
	sa := identity(gw, md)
	res := p.applier.Apply(ctx, gw, append([]client.Object{svc, sa}, vipEndpointSlices(svc, p.proxyPods())...))
	p.settle(gw, prov, svc, pin, res)
	return prov, res.Err
}

// settle fills prov from what applying gw's objects did: a conflict or a refused object is the
// reason nothing is published (AddressNotUsable when the refused object is the Service pinned to
// a static address, NoResources otherwise), else the addresses of svc as it is live.
func (p *Provisioner) settle(gw *gwapiv1.Gateway, prov *translator.Provisioned, svc *corev1.Service, pin string, res Result) {
	var why []string
	for _, c := range res.Conflicts {
		why = append(why, c.Error())
	}
	for _, r := range res.Rejected {
		msg := r.Error()
		if r.Key.Kind() == "Service" && pin != "" {
			prov.AddressReason = gwapiv1.GatewayReasonAddressNotUsable
			msg = fmt.Sprintf("the API server does not accept %s as the cluster IP of Service %s: %v", pin, r.Key.Name, r.Err)
		}
		why = append(why, msg)
		if r.Fresh {
			// Once per refusal: the applier does not send the object again until it changes.
			p.log.Warn("the API server refused a provisioned object", zap.String("gateway", gw.Namespace+"/"+gw.Name),
				zap.String("object", r.Key.String()), zap.Error(r.Err))
		}
	}
	if len(why) > 0 {
		if prov.AddressReason == "" {
			prov.AddressReason = gwapiv1.GatewayReasonNoResources
		}
		prov.AddressMessage = strings.Join(why, "; ")
		return
	}
	if svc == nil {
		return
	}
	if live, err := p.opts.Services.Services(svc.Namespace).Get(svc.Name); err == nil && ownedBy(live, gw.UID) {
		prov.Addresses = p.addresses(gw, live)
		for _, ip := range clusterIPs(live) {
			typ := gwapiv1.IPAddressType
			prov.ClusterAddresses = append(prov.ClusterAddresses, gwapiv1.GatewayStatusAddress{Type: &typ, Value: ip})
		}
		if len(prov.ClusterAddresses) > 0 {
			prov.ClusterAddresses = append(prov.ClusterAddresses, specHostnames(gw)...)
		}
	}
}

// proxyPods are the shared pool's pods, which every VIP Service's EndpointSlices list.
func (p *Provisioner) proxyPods() []*corev1.Pod {
	if p.opts.ProxyPods == nil {
		return nil
	}
	pods, err := p.opts.ProxyPods.List(labels.SelectorFromSet(p.opts.ProxySelector))
	if err != nil {
		p.log.Warn("listing the shared proxy pods", zap.Error(err))
	}
	return pods
}

// addresses are what a Gateway's status publishes: its Service's load-balancer ingress, else
// its cluster IP, else --status-address; and the Hostname addresses its spec names, as they are.
func (p *Provisioner) addresses(gw *gwapiv1.Gateway, svc *corev1.Service) []gwapiv1.GatewayStatusAddress {
	var out []gwapiv1.GatewayStatusAddress
	add := func(typ gwapiv1.AddressType, v string) {
		out = append(out, gwapiv1.GatewayStatusAddress{Type: &typ, Value: v})
	}
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		switch {
		case ing.IP != "":
			add(gwapiv1.IPAddressType, ing.IP)
		case ing.Hostname != "":
			add(gwapiv1.HostnameAddressType, ing.Hostname)
		}
	}
	if len(out) == 0 {
		for _, ip := range clusterIPs(svc) {
			add(gwapiv1.IPAddressType, ip)
		}
	}
	if len(out) == 0 {
		out = append(out, p.opts.StatusAddresses...)
	}
	if len(out) == 0 {
		return nil // not resolved: the Gateway is not programmed
	}
	return append(out, specHostnames(gw)...)
}

// specHostnames are the Hostname addresses gw names, published as they are.
func specHostnames(gw *gwapiv1.Gateway) []gwapiv1.GatewayStatusAddress {
	var out []gwapiv1.GatewayStatusAddress
	for _, a := range gw.Spec.Addresses {
		if a.Type != nil && *a.Type == gwapiv1.HostnameAddressType && a.Value != "" {
			typ := gwapiv1.HostnameAddressType
			out = append(out, gwapiv1.GatewayStatusAddress{Type: &typ, Value: a.Value})
		}
	}
	return out
}

func clusterIPs(svc *corev1.Service) []string {
	ips := svc.Spec.ClusterIPs
	if len(ips) == 0 && svc.Spec.ClusterIP != "" {
		ips = []string{svc.Spec.ClusterIP}
	}
	var out []string
	for _, ip := range ips {
		if ip != corev1.ClusterIPNone && ip != "" {
			out = append(out, ip)
		}
	}
	return out
}

// pinnedAddress is the one IPAddress spec.addresses names, which the VIP Service is pinned to;
// "" when it names none, or several (then the translator reports AddressNotUsable and the
// Service gets an address of the API server's choosing). ok is false for an address type the
// shared mode cannot give (the Gateway is not accepted).
func pinnedAddress(gw *gwapiv1.Gateway) (string, bool) {
	var ips []string
	for _, a := range gw.Spec.Addresses {
		switch {
		case a.Type == nil || *a.Type == gwapiv1.IPAddressType:
			ip, err := netip.ParseAddr(a.Value)
			if a.Value == "" || err != nil {
				continue
			}
			if s := ip.Unmap().String(); !contains(ips, s) {
				ips = append(ips, s)
			}
		case *a.Type == gwapiv1.HostnameAddressType:
		default:
			return "", false
		}
	}
	if len(ips) != 1 {
		return "", true
	}
	return ips[0], true
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// live is the applier's cache lookup for the kinds the controller watches: every Service, the
// ServiceAccounts it labelled as its own, and (dedicated mode) the Deployments it labelled.
func (p *Provisioner) live(k ObjectKey) (client.Object, bool, bool) {
	if k.GVK.Group == "apps" && k.GVK.Kind == "Deployment" && p.opts.Deployments != nil {
		d, err := p.opts.Deployments.Deployments(k.Namespace).Get(k.Name)
		return d, err == nil, true
	}
	if k.GVK.Group == "autoscaling" && k.GVK.Kind == "HorizontalPodAutoscaler" && p.opts.HPAs != nil {
		h, err := p.opts.HPAs.HorizontalPodAutoscalers(k.Namespace).Get(k.Name)
		return h, err == nil, true
	}
	if k.GVK.Group == "policy" && k.GVK.Kind == "PodDisruptionBudget" && p.opts.PDBs != nil {
		b, err := p.opts.PDBs.PodDisruptionBudgets(k.Namespace).Get(k.Name)
		return b, err == nil, true
	}
	if k.GVK.Group == discoveryv1.GroupName && k.GVK.Kind == "EndpointSlice" && p.opts.EndpointSlices != nil {
		es, err := p.opts.EndpointSlices.EndpointSlices(k.Namespace).Get(k.Name)
		return es, err == nil, true
	}
	if k.GVK.Group != "" {
		return nil, false, false
	}
	switch k.GVK.Kind {
	case "Service":
		s, err := p.opts.Services.Services(k.Namespace).Get(k.Name)
		return s, err == nil, true
	case "ServiceAccount":
		if p.opts.ServiceAccounts == nil {
			return nil, false, false
		}
		s, err := p.opts.ServiceAccounts.ServiceAccounts(k.Namespace).Get(k.Name)
		return s, err == nil, true
	case "ConfigMap":
		if p.opts.ConfigMaps == nil {
			return nil, false, false
		}
		c, err := p.opts.ConfigMaps.ConfigMaps(k.Namespace).Get(k.Name)
		return c, err == nil, true
	}
	return nil, false, false
}

// dedicated is the renderer of the dedicated mode: Options.Dedicated, else the registered one.
func (p *Provisioner) dedicated() DedicatedRenderer {
	if p.opts.Dedicated != nil {
		return p.opts.Dedicated
	}
	return dedicated()
}

// dedicatedPool applies a dedicated Gateway's objects and says what the translator needs: its
// listeners bind their own ports on its own proxies, and its addresses are its Service's. The
// static addresses are the shared mode's: an IPAddress pins the Service's cluster IP, which makes
// it a ClusterIP Service whatever the parameters' service.type says (the issue's "provisions the
// VIP Service as a ClusterIP pinned to it"; a load balancer's address is the cloud's to give); an
// unsupported address type provisions nothing (the Gateway is not accepted).
func (p *Provisioner) dedicatedPool(ctx context.Context, gw *gwapiv1.Gateway, objs []client.Object) (*translator.Provisioned, error) {
	prov := &translator.Provisioned{Dedicated: true}
	pin, ok := pinnedAddress(gw)
	if !ok {
		objs = nil
	}
	if len(objs) > 0 {
		p.noteDropped(gw, prov, InfrastructureMetadata(gw, ComponentGateway))
	}
	var svc *corev1.Service
	for i, o := range objs {
		s, isSvc := o.(*corev1.Service)
		if !isSvc {
			continue
		}
		if pin != "" {
			s = s.DeepCopy()
			if s.Spec.Type != corev1.ServiceTypeClusterIP && s.Spec.Type != "" {
				prov.Notes = append(prov.Notes, fmt.Sprintf("spec.addresses pins %s, so Service %s is a ClusterIP Service, not %s", pin, s.Name, s.Spec.Type))
			}
			pinService(s, pin)
			objs[i] = s
		}
		svc = s
	}
	res := p.applier.Apply(ctx, gw, objs)
	p.settle(gw, prov, svc, pin, res)
	return prov, res.Err
}

// noteDropped puts the reserved infrastructure keys gw set, which md dropped, in its Accepted
// message, and logs them at WARN once.
func (p *Provisioner) noteDropped(gw *gwapiv1.Gateway, prov *translator.Provisioned, md Metadata) {
	msg := md.DroppedMessage()
	if msg == "" {
		return
	}
	prov.Notes = append(prov.Notes, msg)
	if p.warned[gw.UID] != msg {
		p.warned[gw.UID] = msg
		p.log.Warn("reserved infrastructure keys dropped", zap.String("gateway", gw.Namespace+"/"+gw.Name), zap.Strings("keys", md.Dropped))
	}
}

// pinService makes svc a ClusterIP Service on ip, dropping what only other types may set.
func pinService(svc *corev1.Service, ip string) {
	svc.Spec.Type = corev1.ServiceTypeClusterIP
	svc.Spec.ClusterIP = ip
	svc.Spec.ExternalTrafficPolicy = ""
	svc.Spec.LoadBalancerClass = nil
	svc.Spec.LoadBalancerSourceRanges = nil
}
