// Package translate is the controller half of networking.k8s.io/v1 Ingress (module
// translate.route.ingress): a route kind whose objects name no parent, so it asks the core for
// implicit Gateways (translation.ImplicitParentKind) — one HTTP listener on
// --ingress-http-address and one HTTPS listener per TLS host on --ingress-https-address — and its
// rules become route.ingress entries on them. Everything after that (TLS, socket sharing with
// operators' Gateways, backends, filters, the snapshot) is the Gateway code's: there is no second
// data path. docs/ingress.md is the operator's page.
//
// Precedence inside a virtual host, compared element-wise (larger first):
//
//  1. the rule's host: exact, then a wildcard, then none (a rule without host, defaultBackend);
//  2. a plain path before a use-regex one;
//  3. the longer path;
//  4. Exact before Prefix of the same path.
package translate

import (
	"sort"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// ModuleID is the translator module this package registers.
const ModuleID = "translate.route.ingress"

// ControllerName is the IngressClass spec.controller Coxswain serves.
const ControllerName = "coxswain-labs.dev/ingress-controller"

// Annotations about classes.
const (
	DefaultClassAnnotation = "ingressclass.kubernetes.io/is-default-class"
	LegacyClassAnnotation  = "kubernetes.io/ingress.class"
)

// Settings the core passes (translator Options.KindSettings) and their defaults.
const (
	SettingHTTPAddress  = "ingress.http-address"
	SettingHTTPSAddress = "ingress.https-address"
	DefaultHTTPAddress  = "0.0.0.0:80"
	DefaultHTTPSAddress = "0.0.0.0:443"
)

var ingressGK = schema.GroupKind{Group: networkingv1.GroupName, Kind: "Ingress"}

// ClassGK is the IngressClass resource.
var ClassGK = schema.GroupKind{Group: networkingv1.GroupName, Kind: "IngressClass"}

func init() { core.RegisterModule(&Kind{}) }

// Kind is the Ingress route kind. One value lives for one translation (RouteKinds calls New):
// ImplicitParents records which Ingresses are ours, and Route reads it.
type Kind struct {
	ours map[types.NamespacedName]bool
	// httpsGateways are the implicit HTTPS Gateways made (none when no Ingress has TLS), and
	// the hostnames of each one's listeners.
	httpsGateways []string
	httpsHosts    map[string][]string
	// clientTLS is what each Ingress's auth-tls-secret made (clienttls.go).
	clientTLS map[types.NamespacedName]clientTLS
	// present holds the auth filter objects of the Store ("<Kind>/<namespace>/<name>"): an auth
	// annotation naming one that does not exist fails closed.
	present map[string]bool
}

var (
	_ translation.RouteKind          = (*Kind)(nil)
	_ translation.ImplicitParentKind = (*Kind)(nil)
)

// CoxswainModule implements core.Module.
func (*Kind) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: ModuleID, New: func() core.Module { return &Kind{} }}
}

// API is networking.k8s.io/v1 Ingress. Its status is not a RouteStatus: nil tells the route
// status writer to leave it alone (the controller writes status.loadBalancer itself).
func (*Kind) API() translation.RouteAPI {
	return translation.NewAPI(networkingv1.SchemeGroupVersion.WithKind("Ingress"), "ingresses", networkingv1.AddToScheme,
		func(*networkingv1.Ingress) *gwapiv1.RouteStatus { return nil }, nil)
}

// Protocols are HTTP and HTTPS (terminated) listeners.
func (*Kind) Protocols() []gwapiv1.ProtocolType {
	return []gwapiv1.ProtocolType{gwapiv1.HTTPProtocolType, gwapiv1.HTTPSProtocolType}
}

// Companions: IngressClass, which decides which Ingresses are ours.
func (*Kind) Companions() []translation.CompanionAPI {
	return []translation.CompanionAPI{{
		GVK: networkingv1.SchemeGroupVersion.WithKind("IngressClass"), Resource: "ingressclasses",
		AddToScheme: networkingv1.AddToScheme, New: func() translation.Object { return &networkingv1.IngressClass{} },
	}}
}

// YieldsToGatewayAPI: on a shared socket, a host Gateway API serves is Gateway API's.
func (*Kind) YieldsToGatewayAPI() bool { return true }

// RuleHostnames are the hosts of the Ingress's rules.
func (*Kind) RuleHostnames(r translation.Route) []string {
	ir, ok := r.(route)
	if !ok {
		return nil
	}
	var out []string
	for _, rule := range ir.ing.Spec.Rules {
		if rule.Host != "" {
			out = append(out, rule.Host)
		}
	}
	return out
}

// Route wraps one Ingress; one that is not ours gets no parent, so the core ignores it.
func (k *Kind) Route(o translation.Object) (translation.Route, bool) {
	ing, ok := o.(*networkingv1.Ingress)
	if !ok {
		return nil, false
	}
	key := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
	r := route{ing: ing, ours: k.ours[key], present: k.present, clientTLS: k.clientTLS[key]}
	for _, gw := range k.httpsGateways {
		if r.reaches(k.httpsHosts[gw]) {
			r.https = append(r.https, gw)
		}
	}
	return r, true
}

// classes are the names of the IngressClasses whose controller is ours, and the default one.
func classes(objs []translation.Object) (ours map[string]bool, def string) {
	ours = map[string]bool{}
	var defaults []string
	for _, o := range objs {
		c, ok := o.(*networkingv1.IngressClass)
		if !ok || c.Spec.Controller != ControllerName {
			continue
		}
		ours[c.Name] = true
		if strings.EqualFold(c.Annotations[DefaultClassAnnotation], "true") {
			defaults = append(defaults, c.Name)
		}
	}
	sort.Strings(defaults)
	if len(defaults) > 0 {
		def = defaults[0] // several defaults: the API server's admission refuses new Ingresses; we pick one deterministically
	}
	return ours, def
}

// isOurs applies class selection: spec.ingressClassName, else the legacy annotation, else the
// default class when it is ours.
func isOurs(ing *networkingv1.Ingress, ours map[string]bool, def string) bool {
	if n := ing.Spec.IngressClassName; n != nil && *n != "" {
		return ours[*n]
	}
	if n, ok := ing.Annotations[LegacyClassAnnotation]; ok {
		return ours[n]
	}
	return def != "" && ours[def]
}

type route struct {
	ing       *networkingv1.Ingress
	ours      bool
	https     []string
	present   map[string]bool
	clientTLS clientTLS
}

var _ translation.Route = route{}

func (r route) Object() translation.Object { return r.ing }

func (r route) ParentRefs() []gwapiv1.ParentReference {
	if !r.ours {
		return nil
	}
	refs := []gwapiv1.ParentReference{implicitRef(httpGateway)}
	for _, gw := range r.https {
		refs = append(refs, implicitRef(gw))
	}
	return refs
}

// Hostnames are the rules' hosts, or nil (any) when a rule has none or there is a
// defaultBackend: the route.ingress matcher keeps each rule to its own host.
func (r route) Hostnames() []gwapiv1.Hostname {
	if r.ing.Spec.DefaultBackend != nil {
		return nil
	}
	var out []gwapiv1.Hostname
	for _, rule := range r.ing.Spec.Rules {
		if rule.Host == "" {
			return nil
		}
		out = append(out, gwapiv1.Hostname(rule.Host))
	}
	return out
}

func (r route) Build(rc translation.RouteContext) []*translation.Entry {
	return build(rc, r.ing, r.clientTLS, func(kind, name string) bool { return r.present[kind+"/"+r.ing.Namespace+"/"+name] })
}

// reaches reports whether some host of r can be served by a listener with one of hostnames:
// naming a Gateway that cannot take the route would only earn it a NoMatchingListenerHostname.
func (r route) reaches(hostnames []string) bool {
	hosts := r.Hostnames()
	if hosts == nil {
		return true
	}
	for _, lh := range hostnames {
		for _, h := range hosts {
			if intersects(string(h), lh) {
				return true
			}
		}
	}
	return false
}

// intersects is Gateway API hostname intersection of a route host and a listener hostname.
func intersects(h, lh string) bool {
	switch {
	case lh == "" || strings.EqualFold(h, lh):
		return true
	case strings.HasPrefix(lh, "*.") && strings.HasSuffix(strings.ToLower(h), strings.ToLower(lh[1:])):
		return true
	case strings.HasPrefix(h, "*.") && strings.HasSuffix(strings.ToLower(lh), strings.ToLower(h[1:])):
		return true
	}
	return false
}

func implicitRef(name string) gwapiv1.ParentReference {
	g, k, ns := gwapiv1.Group(gwapiv1.GroupName), gwapiv1.Kind("Gateway"), gwapiv1.Namespace(translation.ImplicitNamespace)
	return gwapiv1.ParentReference{Group: &g, Kind: &k, Namespace: &ns, Name: gwapiv1.ObjectName(name)}
}
