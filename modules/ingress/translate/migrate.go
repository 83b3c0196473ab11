package translate

import (
	"fmt"
	"sort"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1b1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/coxswain-labs/coxswain/modules/translation"
)

// The migration aid (`coxswain validate -f DIR -o gateway-api`): the Gateway API objects that
// express the routing of our Ingresses, ready to apply. It reads the annotations with the same
// parser the translator uses, so both say the same; what Gateway API cannot say is a Note, never
// silently dropped.

// MigrateOptions say where the Gateway that replaces the implicit ones goes.
type MigrateOptions struct {
	Namespace, Name, Class string
	// HTTPAddress and HTTPSAddress are --ingress-http-address and --ingress-https-address: the
	// listeners' ports, and the Gateway's address when the HTTP one names an IP.
	HTTPAddress, HTTPSAddress string
}

// Migration is the result: the objects in apply order, and what they do not carry over.
type Migration struct {
	Objects []runtime.Object
	Notes   []string
}

// Migrate converts the Ingresses of ours among objs (Ingresses and IngressClasses).
func Migrate(objs []translation.Object, o MigrateOptions) Migration {
	var classObjs []translation.Object
	var ings []*networkingv1.Ingress
	for _, obj := range objs {
		switch v := obj.(type) {
		case *networkingv1.IngressClass:
			classObjs = append(classObjs, v)
		case *networkingv1.Ingress:
			ings = append(ings, v)
		}
	}
	ours, def := classes(classObjs)
	var mine []*networkingv1.Ingress
	for _, ing := range ings {
		if isOurs(ing, ours, def) {
			mine = append(mine, ing)
		}
	}
	sort.Slice(mine, func(i, j int) bool { return olderFirst(mine[i], mine[j]) })
	m := &migrator{o: o}
	gw := m.gateway(mine)
	m.out.Objects = append(m.out.Objects, gw)
	for _, ing := range mine {
		m.ingress(ing)
	}
	m.out.Objects = append(m.out.Objects, m.grants()...)
	m.out.Objects = append(m.out.Objects, m.extra...)
	return m.out
}

type migrator struct {
	o       MigrateOptions
	out     Migration
	extra   []runtime.Object // filter objects, after the routes
	secrets map[string][]string
}

func (m *migrator) note(ing *networkingv1.Ingress, format string, args ...any) {
	m.out.Notes = append(m.out.Notes, fmt.Sprintf("Ingress %s/%s: ", ing.Namespace, ing.Name)+fmt.Sprintf(format, args...))
}

// gateway is the Gateway with the implicit ones' listeners: http, and https-<i> per TLS host.
func (m *migrator) gateway(ings []*networkingv1.Ingress) *gwapiv1.Gateway {
	all := gwapiv1.NamespacesFromAll
	allowed := &gwapiv1.AllowedRoutes{Namespaces: &gwapiv1.RouteNamespaces{From: &all}}
	httpPort, httpsPort := 80, 443
	if _, p, err := splitAddr(m.o.HTTPAddress); err == nil {
		httpPort = p
	}
	if _, p, err := splitAddr(m.o.HTTPSAddress); err == nil {
		httpsPort = p
	}
	gw := &gwapiv1.Gateway{Spec: gwapiv1.GatewaySpec{GatewayClassName: gwapiv1.ObjectName(m.o.Class), Listeners: []gwapiv1.Listener{{
		Name: "http", Protocol: gwapiv1.HTTPProtocolType, Port: gwapiv1.PortNumber(httpPort), AllowedRoutes: allowed}}}}
	if ip, _, err := splitAddr(m.o.HTTPAddress); err == nil && ip.IsValid() && !ip.IsUnspecified() {
		gw.Spec.Addresses = []gwapiv1.GatewaySpecAddress{{Type: ptr.To(gwapiv1.IPAddressType), Value: ip.String()}}
	}
	gw.APIVersion, gw.Kind = gwapiv1.GroupVersion.String(), "Gateway"
	gw.Namespace, gw.Name = m.o.Namespace, m.o.Name
	m.secrets = map[string][]string{}
	seen := map[string]bool{}
	for _, ing := range ings {
		for _, t := range ing.Spec.TLS {
			hosts := t.Hosts
			if len(hosts) == 0 {
				hosts = []string{""}
			}
			for _, h := range hosts {
				if t.SecretName == "" || seen[h] {
					continue
				}
				seen[h] = true
				ns := gwapiv1.Namespace(ing.Namespace)
				mode := gwapiv1.TLSModeTerminate
				l := gwapiv1.Listener{Name: gwapiv1.SectionName(fmt.Sprintf("https-%d", len(gw.Spec.Listeners)-1)), Protocol: gwapiv1.HTTPSProtocolType,
					Port: gwapiv1.PortNumber(httpsPort), AllowedRoutes: allowed,
					TLS: &gwapiv1.ListenerTLSConfig{Mode: &mode, CertificateRefs: []gwapiv1.SecretObjectReference{{Name: gwapiv1.ObjectName(t.SecretName), Namespace: &ns}}}}
				if h != "" {
					l.Hostname = ptr.To(gwapiv1.Hostname(h))
				}
				gw.Spec.Listeners = append(gw.Spec.Listeners, l)
				if ing.Namespace != m.o.Namespace {
					m.secrets[ing.Namespace] = append(m.secrets[ing.Namespace], t.SecretName)
				}
			}
		}
	}
	return gw
}

// grants let the Gateway read the certificates in the Ingresses' namespaces.
func (m *migrator) grants() []runtime.Object {
	var out []runtime.Object
	for _, ns := range sortedKeys(m.secrets) {
		g := &gwapiv1b1.ReferenceGrant{Spec: gwapiv1b1.ReferenceGrantSpec{
			From: []gwapiv1b1.ReferenceGrantFrom{{Group: gwapiv1.GroupName, Kind: "Gateway", Namespace: gwapiv1.Namespace(m.o.Namespace)}}}}
		g.APIVersion, g.Kind = gwapiv1b1.GroupVersion.String(), "ReferenceGrant"
		g.Namespace, g.Name = ns, m.o.Name+"-certificates"
		for _, s := range m.secrets[ns] {
			g.Spec.To = append(g.Spec.To, gwapiv1b1.ReferenceGrantTo{Kind: "Secret", Name: ptr.To(gwapiv1.ObjectName(s))})
		}
		out = append(out, g)
	}
	return out
}

// ingress adds the HTTPRoutes of one Ingress: one per rule host (an HTTPRoute's hostnames hold
// for all its rules), one for the defaultBackend, and with ssl-redirect an HTTP twin that redirects.
func (m *migrator) ingress(ing *networkingv1.Ingress) {
	var warned []string
	ann := parseAnnotations(noteContext{warn: func(s string) { warned = append(warned, s) }}, ing.Annotations, func(string, string) bool { return true })
	for _, w := range warned {
		m.note(ing, "%s (left out)", w)
	}
	m.unexpressed(ing, ann)
	byHost := map[string][]networkingv1.HTTPIngressPath{}
	for _, r := range ing.Spec.Rules {
		if r.HTTP != nil {
			byHost[r.Host] = append(byHost[r.Host], r.HTTP.Paths...)
		}
		if strings.HasPrefix(r.Host, "*.") {
			m.note(ing, "host %q: a Gateway API wildcard matches any number of labels (a.b%s too), an Ingress one", r.Host, r.Host[1:])
		}
	}
	if b := ing.Spec.DefaultBackend; b != nil {
		m.note(ing, "defaultBackend: an HTTPRoute without hostnames on PathPrefix /, which any more specific route of the Gateway comes before")
		byHost["\x00default"] = []networkingv1.HTTPIngressPath{{Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix), Backend: *b}}
	}
	for i, host := range sortedKeys(byHost) {
		name := fmt.Sprintf("%s-%d", ing.Name, i)
		var hostnames []gwapiv1.Hostname
		if host == "\x00default" {
			name = ing.Name + "-default"
		} else if host != "" {
			hostnames = []gwapiv1.Hostname{gwapiv1.Hostname(host)}
		}
		var rules []gwapiv1.HTTPRouteRule
		for _, p := range byHost[host] {
			if r, ok := m.rule(ing, ann, p, false); ok {
				rules = append(rules, r)
			}
		}
		if ann.sslRedirect {
			var redirects []gwapiv1.HTTPRouteRule
			for _, p := range byHost[host] {
				if r, ok := m.rule(ing, ann, p, true); ok {
					redirects = append(redirects, r)
				}
			}
			m.route(ing, name+"-http", hostnames, redirects, "http")
			m.route(ing, name, hostnames, rules, "https")
			continue
		}
		m.route(ing, name, hostnames, rules, "")
	}
}

// route adds one HTTPRoute; only "http" attaches to the http listener alone, "https" to the
// others (every listener but http), "" to the Gateway.
func (m *migrator) route(ing *networkingv1.Ingress, name string, hostnames []gwapiv1.Hostname, rules []gwapiv1.HTTPRouteRule, only string) {
	if len(rules) == 0 {
		return
	}
	ns := gwapiv1.Namespace(m.o.Namespace)
	ref := gwapiv1.ParentReference{Name: gwapiv1.ObjectName(m.o.Name), Namespace: &ns}
	var refs []gwapiv1.ParentReference
	switch only {
	case "http":
		ref.SectionName = ptr.To(gwapiv1.SectionName("http"))
		refs = append(refs, ref)
	case "https":
		gw := m.out.Objects[0].(*gwapiv1.Gateway)
		for _, l := range gw.Spec.Listeners[1:] {
			r := ref
			r.SectionName = ptr.To(l.Name)
			refs = append(refs, r)
		}
	default:
		refs = append(refs, ref)
	}
	if len(refs) == 0 {
		m.note(ing, "ssl-redirect without a tls entry of any Ingress: nothing serves HTTPS, the redirect goes nowhere")
		return
	}
	hr := &gwapiv1.HTTPRoute{Spec: gwapiv1.HTTPRouteSpec{CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: refs}, Hostnames: hostnames, Rules: rules}}
	hr.APIVersion, hr.Kind = gwapiv1.GroupVersion.String(), "HTTPRoute"
	hr.Namespace, hr.Name = ing.Namespace, name
	m.out.Objects = append(m.out.Objects, hr)
}

// rule is one Ingress path as an HTTPRoute rule, with the annotations' filters; redirectOnly is
// the HTTP twin of an ssl-redirect Ingress.
func (m *migrator) rule(ing *networkingv1.Ingress, ann *annotations, p networkingv1.HTTPIngressPath, redirectOnly bool) (gwapiv1.HTTPRouteRule, bool) {
	hm, _, err := pathMatch(&p, ann.useRegex)
	if err != nil {
		m.note(ing, "path %q left out: %v", p.Path, err)
		return gwapiv1.HTTPRouteRule{}, false
	}
	match := gwapiv1.HTTPRouteMatch{Path: &gwapiv1.HTTPPathMatch{Value: ptr.To(hm.Path.Value)}}
	switch hm.Path.Type {
	case "Exact":
		match.Path.Type = ptr.To(gwapiv1.PathMatchExact)
	case "PathPrefix":
		match.Path.Type = ptr.To(gwapiv1.PathMatchPathPrefix)
	default:
		match.Path.Type = ptr.To(gwapiv1.PathMatchRegularExpression)
	}
	r := gwapiv1.HTTPRouteRule{Matches: []gwapiv1.HTTPRouteMatch{match}}
	if redirectOnly {
		code := ann.sslCode
		r.Filters = []gwapiv1.HTTPRouteFilter{{Type: gwapiv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gwapiv1.HTTPRequestRedirectFilter{
			Scheme: ptr.To("https"), StatusCode: &code, Port: ptr.To(gwapiv1.PortNumber(443))}}}
		return r, true
	}
	if b := p.Backend; b.Service == nil || b.Service.Port.Number == 0 {
		m.note(ing, "path %q left out: only a Service backend with a port number converts", p.Path)
		return gwapiv1.HTTPRouteRule{}, false
	}
	m.filters(ing, ann, &r, hm.Path.Type, hm.Path.Value)
	if !redirects(ann) {
		port := gwapiv1.PortNumber(p.Backend.Service.Port.Number)
		r.BackendRefs = []gwapiv1.HTTPBackendRef{{BackendRef: gwapiv1.BackendRef{BackendObjectReference: gwapiv1.BackendObjectReference{
			Name: gwapiv1.ObjectName(p.Backend.Service.Name), Port: &port}}}}
	}
	if t := ann.timeouts; t != nil {
		r.Timeouts = &gwapiv1.HTTPRouteTimeouts{}
		if t.RequestMs > 0 {
			r.Timeouts.Request = ptr.To(gwapiv1.Duration(fmt.Sprintf("%dms", t.RequestMs)))
		}
		if t.BackendRequestMs > 0 {
			r.Timeouts.BackendRequest = ptr.To(gwapiv1.Duration(fmt.Sprintf("%dms", t.BackendRequestMs)))
		}
	}
	if rt := ann.retry; rt != nil {
		r.Retry = &gwapiv1.HTTPRouteRetry{Attempts: ptr.To(int(rt.Attempts))}
		for _, c := range rt.Codes {
			r.Retry.Codes = append(r.Retry.Codes, gwapiv1.HTTPRouteRetryStatusCode(c))
		}
	}
	return r, true
}

func redirects(a *annotations) bool { return a.redirect != nil }

// filters are the annotations' filters in the translator's order.
func (m *migrator) filters(ing *networkingv1.Ingress, a *annotations, r *gwapiv1.HTTPRouteRule, pathType, value string) {
	ext := func(kind, name string) {
		r.Filters = append(r.Filters, gwapiv1.HTTPRouteFilter{Type: gwapiv1.HTTPRouteFilterExtensionRef,
			ExtensionRef: &gwapiv1.LocalObjectReference{Group: coxswainGroup, Kind: gwapiv1.Kind(kind), Name: gwapiv1.ObjectName(name)}})
	}
	if a.maxBody != "" {
		name := ing.Name + "-max-body-size"
		m.object(ing, "RequestSizeLimit", name, map[string]any{"maxSize": a.maxBody})
		ext("RequestSizeLimit", name)
	}
	if a.redirect != nil {
		r.Filters = append(r.Filters, gwapiv1.HTTPRouteFilter{Type: gwapiv1.HTTPRouteFilterRequestRedirect, RequestRedirect: a.redirect})
	}
	for _, e := range a.extensions {
		ext(string(e.Kind), string(e.Name))
	}
	if a.reqHeader != nil {
		r.Filters = append(r.Filters, gwapiv1.HTTPRouteFilter{Type: gwapiv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: a.reqHeader})
	}
	if a.respHeader != nil {
		r.Filters = append(r.Filters, gwapiv1.HTTPRouteFilter{Type: gwapiv1.HTTPRouteFilterResponseHeaderModifier, ResponseHeaderModifier: a.respHeader})
	}
	if a.mirror != nil {
		r.Filters = append(r.Filters, gwapiv1.HTTPRouteFilter{Type: gwapiv1.HTTPRouteFilterRequestMirror, RequestMirror: a.mirror})
	}
	switch {
	case a.rewrite == "" || a.redirect != nil:
	case pathType == "RegularExpression":
		name := fmt.Sprintf("%s-rewrite-%d", ing.Name, len(m.extra))
		m.object(ing, "PathRewriteRegex", name, map[string]any{"pattern": "^(?:" + value + ")$", "substitution": a.rewrite})
		ext("PathRewriteRegex", name)
	case pathType == "PathPrefix":
		r.Filters = append(r.Filters, gwapiv1.HTTPRouteFilter{Type: gwapiv1.HTTPRouteFilterURLRewrite, URLRewrite: &gwapiv1.HTTPURLRewriteFilter{
			Path: &gwapiv1.HTTPPathModifier{Type: gwapiv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptr.To(a.rewrite)}}})
	default:
		r.Filters = append(r.Filters, gwapiv1.HTTPRouteFilter{Type: gwapiv1.HTTPRouteFilterURLRewrite, URLRewrite: &gwapiv1.HTTPURLRewriteFilter{
			Path: &gwapiv1.HTTPPathModifier{Type: gwapiv1.FullPathHTTPPathModifier, ReplaceFullPath: ptr.To(a.rewrite)}}})
	}
}

// object adds a Coxswain filter object once.
func (m *migrator) object(ing *networkingv1.Ingress, kind, name string, spec map[string]any) {
	for _, o := range m.extra {
		if u := o.(*unstructured.Unstructured); u.GetKind() == kind && u.GetName() == name && u.GetNamespace() == ing.Namespace {
			return
		}
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": coxswainGroup + "/v1alpha1", "kind": kind,
		"metadata": map[string]any{"namespace": ing.Namespace, "name": name}, "spec": spec}}
	m.extra = append(m.extra, u)
}

// unexpressed notes the annotations an HTTPRoute cannot carry, and what to use instead.
func (m *migrator) unexpressed(ing *networkingv1.Ingress, a *annotations) {
	if !a.cluster.IsZero() {
		m.note(ing, "load-balance / connect-timeout are per Service in Gateway API: a CoxswainBackendPolicy on the backends (it applies to every route to them)")
	}
	if a.clientIP != nil {
		m.note(ing, "trust-forwarded-for: a ClientTrafficPolicy clientIPDetection on the Gateway (for the whole listener)")
	}
	if a.normalize != "" {
		m.note(ing, "path-normalize has no Gateway API equivalent: left out")
	}
	if _, ok := ing.Annotations[Prefix+"auth-tls-secret"]; ok {
		m.note(ing, "auth-tls-secret: the Gateway's spec.tls.frontend validation (a ConfigMap with ca.crt), per port")
	}
	if _, ok := ing.Annotations[Prefix+"auth-tls-verify-depth"]; ok {
		m.note(ing, "auth-tls-verify-depth has no Gateway API equivalent: left out (every chain to the CA is accepted)")
	}
	if _, ok := ing.Annotations[Prefix+"auth-tls-pass-certificate-to-upstream"]; ok {
		m.note(ing, "auth-tls-pass-certificate-to-upstream has no Gateway API equivalent: left out (a ClientTrafficPolicy clientCertificate.subjectHeader passes the subject)")
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// noteContext is the RouteContext parseAnnotations reports to during a migration: only Warn is
// called there.
type noteContext struct {
	translation.RouteContext
	warn func(string)
}

func (n noteContext) Warn(field, format string, args ...any) {
	n.warn(field + ": " + fmt.Sprintf(format, args...))
}
