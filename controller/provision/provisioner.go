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
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/translator"
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
	// ServiceType is the VIP Service's type when the GatewayClass sets none (LoadBalancer when empty).
	ServiceType corev1.ServiceType
	// ProxySelector selects the shared pool's pods (DefaultProxySelector when nil).
	ProxySelector map[string]string
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
	uids    map[types.NamespacedName]types.UID
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
		warned: map[types.UID]string{}, uids: map[types.NamespacedName]types.UID{}}
	p.applier.Live = p.live
	return p, nil
}

// Input is the part of the world the provisioner reads.
type Input struct {
	// Gateways are the Gateways of our classes.
	Gateways     []*gwapiv1.Gateway
	Classes      map[string]*gwapiv1.GatewayClass
	ListenerSets []*gwapiv1.ListenerSet
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
		if old, ok := p.uids[nn]; ok && old != gw.UID {
			p.applier.Forget(old) // deleted and made again under the same name
			p.ports.release(nn)
		}
		p.uids[nn] = gw.UID
		class := in.Classes[string(gw.Spec.GatewayClassName)]
		if r := p.dedicated(); r != nil {
			objs, handled, err := r.Objects(gw, class)
			if handled {
				p.ports.release(nn)
				if err != nil {
					p.log.Warn("dedicated Gateway not provisioned", zap.String("gateway", nn.String()), zap.Error(err))
					objs = nil
				}
				res := p.applier.Apply(ctx, gw, objs)
				if res.Err != nil {
					errs = append(errs, res.Err)
				}
				out[nn] = p.dedicatedStatus(gw, objs, res)
				continue
			}
		}
		prov, err := p.shared(ctx, gw, class, in.ListenerSets)
		if err != nil {
			errs = append(errs, fmt.Errorf("Gateway %s: %w", nn, err))
		}
		out[nn] = prov
	}
	for nn, uid := range p.uids {
		if !present[nn] {
			// The garbage collector deletes its objects (owner references).
			p.ports.release(nn)
			p.applier.Forget(uid)
			delete(p.warned, uid)
			delete(p.uids, nn)
		}
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
		for _, gw := range byUID {
			if ownedBy(svc, gw.UID) {
				p.ports.seed(types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name}, svc)
				p.applier.Adopt(gw.UID, ObjectKey{GVK: corev1.SchemeGroupVersion.WithKind("Service"), Namespace: svc.Namespace, Name: svc.Name})
			}
		}
	}
}

// shared provisions gw on the shared pool: its VIP Service and identity ServiceAccount.
func (p *Provisioner) shared(ctx context.Context, gw *gwapiv1.Gateway, class *gwapiv1.GatewayClass, sets []*gwapiv1.ListenerSet) (*translator.Provisioned, error) {
	nn := types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name}
	prov := &translator.Provisioned{InternalPorts: map[translator.PortTransport]uint32{}}
	pin, ok := pinnedAddress(gw)
	if !ok {
		// An unsupported address type: the Gateway is not accepted and gets nothing.
		p.ports.release(nn)
		res := p.applier.Apply(ctx, gw, nil)
		return prov, res.Err
	}
	ports, err := p.ports.allocate(nn, listenerKeys(gw, sets))
	if err != nil {
		prov.AddressReason, prov.AddressMessage = gwapiv1.GatewayReasonNoResources, err.Error()
		return prov, nil
	}
	for k, v := range ports {
		prov.InternalPorts[translator.PortTransport{Port: k.Port, Transport: strings.ToLower(string(k.Protocol))}] = uint32(v)
	}
	md := InfrastructureMetadata(gw, ComponentGateway)
	if msg := md.DroppedMessage(); msg != "" {
		prov.Notes = append(prov.Notes, msg)
		if p.warned[gw.UID] != msg {
			p.warned[gw.UID] = msg
			p.log.Warn("reserved infrastructure keys dropped", zap.String("gateway", nn.String()), zap.Strings("keys", md.Dropped))
		}
	}
	typ := p.opts.ServiceType
	if t, ok := classServiceType(class); ok && t != "" {
		typ = corev1.ServiceType(t)
	}
	svc := vipService(gw, md, typ, p.opts.ProxySelector, ports, pin)
	sa := identity(gw, md)
	res := p.applier.Apply(ctx, gw, []client.Object{svc, sa})
	var why []string
	for _, c := range res.Conflicts {
		why = append(why, c.Error())
	}
	for _, r := range res.Rejected {
		if r.Key.Kind() == "Service" && pin != "" {
			prov.AddressReason = gwapiv1.GatewayReasonAddressNotUsable
			why = append(why, fmt.Sprintf("the API server does not accept %s as the cluster IP of Service %s: %v", pin, r.Key.Name, r.Err))
			continue
		}
		why = append(why, r.Error())
	}
	if len(why) > 0 {
		if prov.AddressReason == "" {
			prov.AddressReason = gwapiv1.GatewayReasonNoResources
		}
		prov.AddressMessage = strings.Join(why, "; ")
		return prov, res.Err
	}
	if live, err := p.opts.Services.Services(svc.Namespace).Get(svc.Name); err == nil && ownedBy(live, gw.UID) {
		prov.Addresses = p.addresses(gw, live)
	}
	return prov, res.Err
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
	for _, a := range gw.Spec.Addresses {
		if a.Type != nil && *a.Type == gwapiv1.HostnameAddressType && a.Value != "" {
			add(gwapiv1.HostnameAddressType, a.Value)
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

// live is the applier's cache lookup for the kinds the controller watches.
func (p *Provisioner) live(k ObjectKey) (client.Object, bool) {
	if k.GVK.Group != "" {
		return nil, false
	}
	switch k.GVK.Kind {
	case "Service":
		if s, err := p.opts.Services.Services(k.Namespace).Get(k.Name); err == nil {
			return s, true
		}
	case "ServiceAccount":
		if p.opts.ServiceAccounts == nil {
			return nil, false
		}
		if s, err := p.opts.ServiceAccounts.ServiceAccounts(k.Namespace).Get(k.Name); err == nil {
			return s, true
		}
	}
	return nil, false
}

// dedicated is the renderer of the dedicated mode: Options.Dedicated, else the registered one.
func (p *Provisioner) dedicated() DedicatedRenderer {
	if p.opts.Dedicated != nil {
		return p.opts.Dedicated
	}
	return dedicated()
}

// dedicatedStatus is what the translator needs of a dedicated Gateway: its listeners bind their
// own ports on its own proxies, and its addresses are its Service's.
func (p *Provisioner) dedicatedStatus(gw *gwapiv1.Gateway, objs []client.Object, res Result) *translator.Provisioned {
	prov := &translator.Provisioned{Dedicated: true}
	var why []string
	for _, c := range res.Conflicts {
		why = append(why, c.Error())
	}
	for _, r := range res.Rejected {
		why = append(why, r.Error())
	}
	if len(why) > 0 {
		prov.AddressReason, prov.AddressMessage = gwapiv1.GatewayReasonNoResources, strings.Join(why, "; ")
		return prov
	}
	for _, o := range objs {
		if svc, ok := o.(*corev1.Service); ok {
			if live, err := p.opts.Services.Services(svc.Namespace).Get(svc.Name); err == nil && ownedBy(live, gw.UID) {
				prov.Addresses = p.addresses(gw, live)
			}
		}
	}
	return prov
}
