package translate

import (
	"fmt"
	"regexp"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/httproute"
	"github.com/coxswain-labs/coxswain/modules/ingress"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// A rule index of an entry counts the paths of every rule in order, then the defaultBackend:
// it is what DropRule and the IR route names ("Ingress/<ns>/<name>/rule/<i>/match/0") refer to.

func build(rc translation.RouteContext, ing *networkingv1.Ingress, ctls clientTLS, exists func(kind, name string) bool) []*translation.Entry {
	ann := parseAnnotations(rc, ing.Annotations, exists)
	if why := clientTLSClosed(ctls, rc.Listener(), ann.sslRedirect); why != "" && ann.closed == "" {
		ann.closed = why
		if rc.Listener().Protocol != gwapiv1.HTTPProtocolType {
			field := ctls.field
			if field == "" || ctls.closed == "" {
				field = "auth-tls-secret"
			}
			rc.Warn("metadata.annotations["+Prefix+field+"]", "%s: its paths there answer 503 (auth fails closed)", why)
		}
	}
	var out []*translation.Entry
	idx := 0
	for i, rule := range ing.Spec.Rules {
		if rule.HTTP == nil {
			continue
		}
		for j := range rule.HTTP.Paths {
			p := &rule.HTTP.Paths[j]
			field := fmt.Sprintf("spec.rules[%d].http.paths[%d]", i, j)
			if e := buildPath(rc, idx, field, rule.Host, p, ann); e != nil {
				out = append(out, e)
			}
			idx++
		}
	}
	if b := ing.Spec.DefaultBackend; b != nil {
		prefix := networkingv1.PathTypePrefix
		p := &networkingv1.HTTPIngressPath{Path: "/", PathType: &prefix, Backend: *b}
		if e := buildPath(rc, idx, "spec.defaultBackend", "", p, ann); e != nil {
			e.Precedence = []int{0, 0, 0, 0} // below every rule
			out = append(out, e)
		}
	}
	return out
}

func buildPath(rc translation.RouteContext, idx int, field, host string, p *networkingv1.HTTPIngressPath, ann *annotations) *translation.Entry {
	m, prec, err := pathMatch(p, ann.useRegex)
	if err != nil {
		rc.DropRule(idx, field+".path", gwapiv1.RouteReasonUnsupportedValue, "%s", err)
		return nil
	}
	hostRank := 0
	switch {
	case strings.HasPrefix(host, "*."):
		hostRank = 1
	case host != "":
		hostRank = 2
	}
	backendField := field + ".backend"
	if field == "spec.defaultBackend" {
		backendField = field
	}
	r := &irv1.Route{Match: core.MustConfig(ingress.ModuleID, ingress.Match{Host: host, Match: m, Normalize: ann.normalize})}
	env := translation.FilterEnv{Kind: "Ingress", Listener: rc.Listener()}
	if m.Path != nil && m.Path.Type == httproute.MatchPathPrefix {
		env.HasPrefix, env.Prefix = true, m.Path.Value
	}
	regexPath := ""
	if m.Path != nil && m.Path.Type == httproute.MatchRegularExpression {
		regexPath = m.Path.Value
	}
	filters, f := ann.filters(rc, env, regexPath)
	if f != nil {
		f.Report(rc, idx)
		r.Backends = []*irv1.Backend{translation.ErrorBackend(f.Error())}
	} else {
		r.Filters = filters
		r.Timeouts = ann.timeouts
		r.Retry = ann.retry
		if be := backend(rc, idx, backendField, p.Backend, ann.cluster); be != nil {
			r.Backends = []*irv1.Backend{be}
		} else {
			return nil
		}
	}
	return &translation.Entry{Rule: idx, Precedence: append([]int{hostRank}, prec...), Route: r}
}

// backend resolves an Ingress backend to a Service port; a resource backend, or a port by name,
// is refused (the rule is dropped, and its Ingress gets a Warning Event).
func backend(rc translation.RouteContext, idx int, field string, b networkingv1.IngressBackend, cs translation.ClusterSettings) *irv1.Backend {
	if b.Resource != nil {
		rc.DropRule(idx, field+".resource", gwapiv1.RouteReasonInvalidKind, "resource backends (%s %s) are not supported: use a Service", b.Resource.Kind, b.Resource.Name)
		return nil
	}
	if b.Service == nil {
		rc.DropRule(idx, field, gwapiv1.RouteReasonUnsupportedValue, "no service")
		return nil
	}
	if b.Service.Port.Number == 0 {
		rc.DropRule(idx, field+".service.port", gwapiv1.RouteReasonUnsupportedValue, "port %q by name is not supported: give port.number", b.Service.Port.Name)
		return nil
	}
	port := gwapiv1.PortNumber(b.Service.Port.Number)
	ref := gwapiv1.BackendRef{BackendObjectReference: gwapiv1.BackendObjectReference{Name: gwapiv1.ObjectName(b.Service.Name), Port: &port}}
	if !cs.IsZero() {
		return rc.BackendWith(field+".service", ref, nil, cs)
	}
	return rc.Backend(field+".service", ref, nil)
}

// pathMatch is the path of one Ingress path and its precedence (after the host's):
// [plain 1 | regex 0, length, Exact 1 | Prefix 0].
func pathMatch(p *networkingv1.HTTPIngressPath, useRegex bool) (httproute.Match, []int, error) {
	pt := networkingv1.PathTypeImplementationSpecific
	if p.PathType != nil {
		pt = *p.PathType
	}
	path := p.Path
	switch pt {
	case networkingv1.PathTypeExact:
		if !strings.HasPrefix(path, "/") {
			return httproute.Match{}, nil, fmt.Errorf("an Exact path must begin with \"/\", not %q", path)
		}
		return httproute.Match{Path: &httproute.PathMatch{Type: httproute.MatchExact, Value: path}}, []int{1, len(path), 1}, nil
	case networkingv1.PathTypePrefix, networkingv1.PathTypeImplementationSpecific:
		if pt == networkingv1.PathTypeImplementationSpecific && useRegex {
			if path == "" {
				path = "/"
			}
			if _, err := regexp.Compile(path); err != nil {
				return httproute.Match{}, nil, fmt.Errorf("use-regex path %q: %v", path, err)
			}
			return httproute.Match{Path: &httproute.PathMatch{Type: httproute.MatchRegularExpression, Value: path}}, []int{0, len(path), 0}, nil
		}
		if path == "" {
			path = "/"
		}
		if !strings.HasPrefix(path, "/") {
			return httproute.Match{}, nil, fmt.Errorf("a Prefix path must begin with \"/\", not %q", path)
		}
		// Element-wise, as Ingress specifies: "/foo" and "/foo/" both match "/foo" and "/foo/bar".
		v := path
		if len(v) > 1 {
			v = strings.TrimSuffix(v, "/")
		}
		return httproute.Match{Path: &httproute.PathMatch{Type: httproute.MatchPathPrefix, Value: v}}, []int{1, len(v), 0}, nil
	}
	return httproute.Match{}, nil, fmt.Errorf("pathType %q is not Exact, Prefix or ImplementationSpecific", pt)
}
