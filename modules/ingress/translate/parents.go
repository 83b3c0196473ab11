package translate

import (
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strconv"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1b1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/coxswain-labs/coxswain/modules/translation"
)

// The implicit Gateways, in translation.ImplicitNamespace.
const (
	httpGateway  = "ingress-http"
	httpsGateway = "ingress-https"
)

// ClassName is the implicit GatewayClass of the Ingress Gateways.
const ClassName = translation.ImplicitClassPrefix + "ingress"

// ImplicitParents selects our Ingresses and makes their Gateways: HTTP on the http address,
// and HTTPS with one listener per TLS host (the oldest Ingress naming a host gives its
// certificate; a tls entry without hosts is the certificate for every other name), on a Gateway
// per client CA (clienttls.go).
func (k *Kind) ImplicitParents(w translation.ImplicitWorld) translation.ImplicitParents {
	ours, def := classes(w.Objects(ClassGK))
	k.present = map[string]bool{}
	for _, e := range extensionAnnotations {
		if !e.auth {
			continue
		}
		for _, o := range w.Objects(schema.GroupKind{Group: coxswainGroup, Kind: e.kind}) {
			k.present[e.kind+"/"+o.GetNamespace()+"/"+o.GetName()] = true
		}
	}
	k.ours = map[types.NamespacedName]bool{}
	var ings []*networkingv1.Ingress
	for _, o := range w.Objects(ingressGK) {
		if ing, ok := o.(*networkingv1.Ingress); ok && isOurs(ing, ours, def) {
			k.ours[types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}] = true
			ings = append(ings, ing)
		}
	}
	if len(ings) == 0 {
		return translation.ImplicitParents{}
	}
	sort.Slice(ings, func(i, j int) bool { return olderFirst(ings[i], ings[j]) })
	out := translation.ImplicitParents{Class: &gwapiv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: ClassName},
		Spec:       gwapiv1.GatewayClassSpec{ControllerName: gwapiv1.GatewayController(w.ControllerName)},
	}}
	httpAddr := setting(w.Settings, SettingHTTPAddress, DefaultHTTPAddress)
	if gw := implicitGateway(httpGateway, httpAddr, []gwapiv1.Listener{listener("http", gwapiv1.HTTPProtocolType, httpAddr, "", nil)}); gw != nil {
		out.Gateways = append(out.Gateways, gw)
	}
	httpsAddr := setting(w.Settings, SettingHTTPSAddress, DefaultHTTPSAddress)
	var cas map[caGateway]string
	k.clientTLS, cas = readClientTLS(ings, w)
	k.httpsHosts = map[string][]string{}
	byGateway, grants := tlsListeners(ings, httpsAddr, k.clientTLS, cas)
	out.ReferenceGrants = grants
	names := make([]string, 0, len(byGateway))
	for name := range byGateway {
		names = append(names, name)
	}
	sort.Strings(names)
	cgOf := map[string]caGateway{}
	for cg, name := range cas {
		cgOf[name] = cg
	}
	for _, name := range names {
		gw := implicitGateway(name, httpsAddr, byGateway[name])
		if gw == nil {
			continue
		}
		if cg, ok := cgOf[name]; ok {
			gw.Spec.TLS = frontendValidation(cg.ref)
			gw.Annotations = clientTLSAnnotations(cg)
		}
		out.Gateways = append(out.Gateways, gw)
		k.httpsGateways = append(k.httpsGateways, name)
		for _, l := range byGateway[name] {
			h := ""
			if l.Hostname != nil {
				h = string(*l.Hostname)
			}
			k.httpsHosts[name] = append(k.httpsHosts[name], h)
		}
	}
	return out
}

// tlsListeners makes one HTTPS listener per TLS host, on the Gateway of the CA of the Ingress
// that gives the host's certificate (the oldest naming it), else on ingress-https; and the
// ReferenceGrants that let the implicit Gateways read each certificate and CA Secret.
func tlsListeners(ings []*networkingv1.Ingress, addr string, ctls map[types.NamespacedName]clientTLS, cas map[caGateway]string) (map[string][]gwapiv1.Listener, []*gwapiv1b1.ReferenceGrant) {
	seen := map[string]bool{}
	ls := map[string][]gwapiv1.Listener{}
	n := 0
	grants := map[string]*gwapiv1b1.ReferenceGrant{}
	grant := func(ns, secret string) {
		g := grants[ns]
		if g == nil {
			g = &gwapiv1b1.ReferenceGrant{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "implicit.coxswain-ingress"},
				Spec: gwapiv1b1.ReferenceGrantSpec{
					From: []gwapiv1b1.ReferenceGrantFrom{{Group: gwapiv1.GroupName, Kind: "Gateway", Namespace: translation.ImplicitNamespace}},
				},
			}
			grants[ns] = g
		}
		name := gwapiv1.ObjectName(secret)
		for _, to := range g.Spec.To {
			if to.Name != nil && *to.Name == name {
				return
			}
		}
		g.Spec.To = append(g.Spec.To, gwapiv1b1.ReferenceGrantTo{Kind: "Secret", Name: &name})
	}
	for cg := range cas {
		grant(cg.ref.namespace, cg.ref.name)
	}
	for _, ing := range ings {
		gateway := httpsGateway
		if c := ctls[types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}]; c.gateway != "" {
			gateway = c.gateway
		}
		for _, t := range ing.Spec.TLS {
			if t.SecretName == "" {
				continue
			}
			hosts := t.Hosts
			if len(hosts) == 0 {
				hosts = []string{""}
			}
			for _, h := range hosts {
				if seen[h] {
					continue
				}
				seen[h] = true
				ns := gwapiv1.Namespace(ing.Namespace)
				ref := gwapiv1.SecretObjectReference{Name: gwapiv1.ObjectName(t.SecretName), Namespace: &ns}
				ls[gateway] = append(ls[gateway], listener(fmt.Sprintf("tls-%d", n), gwapiv1.HTTPSProtocolType, addr, h, []gwapiv1.SecretObjectReference{ref}))
				n++
				grant(ing.Namespace, t.SecretName)
			}
		}
	}
	nss := make([]string, 0, len(grants))
	for ns := range grants {
		nss = append(nss, ns)
	}
	sort.Strings(nss)
	out := make([]*gwapiv1b1.ReferenceGrant, 0, len(nss))
	for _, ns := range nss {
		sort.Slice(grants[ns].Spec.To, func(i, j int) bool { return *grants[ns].Spec.To[i].Name < *grants[ns].Spec.To[j].Name })
		out = append(out, grants[ns])
	}
	return ls, out
}

func listener(name string, p gwapiv1.ProtocolType, addr, host string, certs []gwapiv1.SecretObjectReference) gwapiv1.Listener {
	_, port, _ := splitAddr(addr)
	all := gwapiv1.NamespacesFromAll
	g := gwapiv1.Group(networkingv1.GroupName)
	l := gwapiv1.Listener{
		Name: gwapiv1.SectionName(name), Protocol: p, Port: gwapiv1.PortNumber(port),
		AllowedRoutes: &gwapiv1.AllowedRoutes{
			Namespaces: &gwapiv1.RouteNamespaces{From: &all},
			Kinds:      []gwapiv1.RouteGroupKind{{Group: &g, Kind: "Ingress"}},
		},
	}
	if host != "" {
		h := gwapiv1.Hostname(host)
		l.Hostname = &h
	}
	if certs != nil {
		mode := gwapiv1.TLSModeTerminate
		l.TLS = &gwapiv1.ListenerTLSConfig{Mode: &mode, CertificateRefs: certs}
	}
	return l
}

// implicitGateway is one implicit Gateway bound on addr's IP (every address for 0.0.0.0 and
// ::), or nil when addr is not host:port (the flag's parser refuses that first).
func implicitGateway(name, addr string, ls []gwapiv1.Listener) *gwapiv1.Gateway {
	ip, _, err := splitAddr(addr)
	if err != nil {
		return nil
	}
	gw := &gwapiv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: translation.ImplicitNamespace, Name: name},
		Spec:       gwapiv1.GatewaySpec{GatewayClassName: gwapiv1.ObjectName(ClassName), Listeners: ls},
	}
	if ip.IsValid() && !ip.IsUnspecified() {
		t := gwapiv1.IPAddressType
		gw.Spec.Addresses = []gwapiv1.GatewaySpecAddress{{Type: &t, Value: ip.String()}}
	}
	return gw
}

// splitAddr parses "ip:port" (ip may be empty for every address).
func splitAddr(addr string) (netip.Addr, int, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return netip.Addr{}, 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 1 || port > 65535 {
		return netip.Addr{}, 0, fmt.Errorf("port %q: not 1-65535", p)
	}
	if h == "" {
		return netip.Addr{}, port, nil
	}
	ip, err := netip.ParseAddr(h)
	return ip, port, err
}

// ValidateAddress checks an --ingress-http-address / --ingress-https-address value.
func ValidateAddress(addr string) error {
	_, _, err := splitAddr(addr)
	return err
}

func setting(s map[string]string, k, def string) string {
	if v := s[k]; v != "" {
		return v
	}
	return def
}

func olderFirst(a, b *networkingv1.Ingress) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}
