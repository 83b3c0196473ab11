package translator

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/coxswain-labs/coxswain/modules/translation"
)

// withImplicitParents returns the store a translation reads: store itself, or, when a route kind
// of the registry is a translation.ImplicitParentKind (Ingress), a shallow copy with the
// GatewayClass, Gateways and ReferenceGrants the kind asks for added. Translate never modifies
// the caller's Store.
func withImplicitParents(store *Store, kinds []translation.RouteKind, opts Options) *Store {
	var out *Store
	for _, k := range kinds {
		ik, ok := k.(translation.ImplicitParentKind)
		if !ok {
			continue
		}
		if out == nil {
			cp := *store
			out = &cp
		}
		secrets := map[types.NamespacedName]*corev1.Secret{}
		for _, s := range store.Secrets {
			secrets[nn(s.Namespace, s.Name)] = s
		}
		ps := ik.ImplicitParents(translation.ImplicitWorld{
			ControllerName: opts.ControllerName,
			Settings:       opts.KindSettings,
			Objects:        func(gk schema.GroupKind) []translation.Object { return store.Objects[gk] },
			Secret:         func(ns, name string) bool { return secrets[nn(ns, name)] != nil },
			SecretData: func(ns, name, key string) []byte {
				if s := secrets[nn(ns, name)]; s != nil {
					return secretData(s, key)
				}
				return nil
			},
		})
		if ps.Class != nil {
			out.GatewayClasses = append(append(out.GatewayClasses[:0:0], out.GatewayClasses...), ps.Class)
		}
		out.Gateways = append(append(out.Gateways[:0:0], out.Gateways...), ps.Gateways...)
		out.ReferenceGrants = append(append(out.ReferenceGrants[:0:0], out.ReferenceGrants...), ps.ReferenceGrants...)
	}
	if out == nil {
		return store
	}
	return out
}

// dropImplicitStatus removes the statuses of implicit objects from res: nobody may write them.
func dropImplicitStatus(res *Result) {
	for k := range res.Gateways {
		if k.Namespace == translation.ImplicitNamespace {
			delete(res.Gateways, k)
		}
	}
	for k := range res.GatewayClasses {
		if strings.HasPrefix(k.Name, translation.ImplicitClassPrefix) {
			delete(res.GatewayClasses, k)
		}
	}
}

// yieldToGatewayAPI applies translation.ImplicitParentKind.YieldsToGatewayAPI: on a socket an
// implicit Gateway listener shares with an operator's Gateway listener, a hostname that a
// Gateway API route serves there, or that the operator's listener names, belongs to Gateway API.
// The implicit route leaves that hostname (its attachment no longer places entries on it) and is
// told so with a Warning, which the controller turns into an Event and a log line.
func (t *session) yieldToGatewayAPI() {
	var warned []*routeState // the routes warned here: the others' warnings are in already
	for _, g := range t.gateways {
		if g.key.Namespace != translation.ImplicitNamespace {
			continue
		}
		for _, l := range g.listeners {
			if !l.programmed() {
				continue
			}
			claimed := t.gatewayAPIHostnames(l)
			if len(claimed) == 0 {
				continue
			}
			l.crossRoute = true
			for _, a := range l.routes {
				ik, ok := a.route.kind.(translation.ImplicitParentKind)
				if !ok || !ik.YieldsToGatewayAPI() {
					continue
				}
				warned = append(warned, a.route)
				if slices.Contains(a.hostnames, l.hostname) && len(a.route.hostnames) == 0 {
					// The route serves any host (a rule without one, a default backend): its rules'
					// hosts share the listener's catch-all, below every more specific Gateway API host.
					for _, h := range ik.RuleHostnames(a.route.route) {
						if by, lost := claimedBy(claimed, h); lost {
							a.route.warn("spec.rules", fmt.Sprintf("host %q on port %d is served by %s; Gateway API routes take precedence, so this %s serves only the requests they do not match there",
								h, l.spec.Port, by, a.route.key.Kind))
						}
					}
					continue
				}
				keep := a.hostnames[:0:0]
				for _, h := range a.hostnames {
					if by, lost := claimedBy(claimed, h); lost {
						a.route.warn("spec.rules", fmt.Sprintf("host %q on port %d is served by %s; Gateway API routes take precedence, so this %s does not serve it there",
							h, l.spec.Port, by, a.route.key.Kind))
						continue
					}
					for _, c := range coveredBy(claimed, h) {
						a.route.warn("spec.rules", fmt.Sprintf("host %q within %q on port %d is served by %s; Gateway API routes take precedence there",
							c, h, l.spec.Port, claimed[c]))
					}
					keep = append(keep, h)
				}
				a.hostnames = keep
			}
		}
	}
	for _, st := range warned {
		if len(st.parents) == 0 {
			continue
		}
		for _, p := range st.warnings {
			t.warnings[p.Error()] = p
		}
	}
}

// gatewayAPIHostnames maps each hostname that an operator's Gateway listener on l's socket
// serves to who serves it: the listener's own hostname (a Server of its own, which a request for
// it never leaves) and the hostnames of the routes attached to a listener without one.
func (t *session) gatewayAPIHostnames(l *listenerState) map[string]string {
	out := map[string]string{}
	for _, g := range t.gateways {
		if g.key.Namespace == translation.ImplicitNamespace {
			continue
		}
		for _, o := range g.listeners {
			if !o.programmed() || o.spec.Port != l.spec.Port || o.spec.Protocol != l.spec.Protocol || !sharesAddress(g.addresses, l.gw.addresses) {
				continue
			}
			if o.hostname != "" && o.hostname != l.hostname {
				out[o.hostname] = fmt.Sprintf("listener %s of Gateway %s", o.spec.Name, g.key)
				continue
			}
			for _, a := range o.routes {
				for _, h := range a.hostnames {
					if _, seen := out[h]; !seen {
						out[h] = fmt.Sprintf("%s %s", a.route.key.Kind, types.NamespacedName{Namespace: a.route.key.Namespace, Name: a.route.key.Name})
					}
				}
			}
		}
	}
	return out
}

// claimedBy reports whether hostname h is taken by an entry of claimed: the same name, or a
// wildcard of Gateway API (any number of labels) that covers it. An Ingress wildcard loses to
// the same wildcard only.
func claimedBy(claimed map[string]string, h string) (string, bool) {
	if by, ok := claimed[h]; ok {
		return by, true
	}
	names := make([]string, 0, len(claimed))
	for c := range claimed {
		names = append(names, c)
	}
	sort.Strings(names)
	for _, c := range names {
		if strings.HasPrefix(c, "*.") && !strings.HasPrefix(h, "*.") && strings.HasSuffix(h, c[1:]) {
			return claimed[c], true
		}
	}
	return "", false
}

// coveredBy lists the claimed names inside wildcard h ("*.example.com" covers
// "a.example.com"), sorted: the implicit route keeps h, and those names go to Gateway API.
func coveredBy(claimed map[string]string, h string) []string {
	if !strings.HasPrefix(h, "*.") {
		return nil
	}
	var out []string
	for c := range claimed {
		if c != h && strings.HasSuffix(c, h[1:]) {
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return out
}

// sharesAddress reports whether two Gateways' bind addresses overlap ("" is every address).
func sharesAddress(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y || x == "" || y == "" {
				return true
			}
		}
	}
	return false
}
