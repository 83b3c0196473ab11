package adminapi

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// RoutingIndex is GET /api/v1/routing.
type RoutingIndex struct {
	Version      string           `json:"version"`
	TranslatedAt time.Time        `json:"translatedAt"`
	Gateways     []GatewaySummary `json:"gateways"`
}

// GatewaySummary is one Gateway in the index.
type GatewaySummary struct {
	Namespace    string                         `json:"namespace"`
	Name         string                         `json:"name"`
	GatewayClass string                         `json:"gatewayClass"`
	Addresses    []gwapiv1.GatewayStatusAddress `json:"addresses"`
	Listeners    int                            `json:"listeners"`
	Routes       int                            `json:"routes"`
	Conditions   []metav1.Condition             `json:"conditions"`
}

// GatewayRouting is GET /api/v1/routing/{namespace}/{gateway}.
type GatewayRouting struct {
	Namespace    string                         `json:"namespace"`
	Name         string                         `json:"name"`
	GatewayClass string                         `json:"gatewayClass"`
	Generation   int64                          `json:"generation"`
	Addresses    []gwapiv1.GatewayStatusAddress `json:"addresses"`
	Conditions   []metav1.Condition             `json:"conditions"`
	Listeners    []ListenerView                 `json:"listeners"`
	Routes       []RouteView                    `json:"routes"`
}

// ListenerView is one Gateway listener with its status and the proxy sockets serving it.
type ListenerView struct {
	Name           string                   `json:"name"`
	Protocol       string                   `json:"protocol"`
	Port           int32                    `json:"port"`
	Hostname       string                   `json:"hostname,omitempty"`
	AttachedRoutes int32                    `json:"attachedRoutes"`
	SupportedKinds []gwapiv1.RouteGroupKind `json:"supportedKinds"`
	Conditions     []metav1.Condition       `json:"conditions"`
	Binds          []string                 `json:"binds"`
	TLS            *TLSView                 `json:"tls,omitempty"`
	Filters        []ModuleView             `json:"filters,omitempty"`
}

// TLSView is a listener's TLS as the proxy runs it (names of certificates, no key material).
type TLSView struct {
	Mode         string   `json:"mode"`
	Certificates []string `json:"certificates,omitempty"`
}

// RouteView is one route with a parent status for the Gateway.
type RouteView struct {
	Kind       string             `json:"kind"`
	Namespace  string             `json:"namespace"`
	Name       string             `json:"name"`
	Sections   []string           `json:"sections,omitempty"`
	Conditions []metav1.Condition `json:"conditions"`
	Rules      []RuleView         `json:"rules"`
	Clusters   []ClusterView      `json:"clusters"`
	Policies   []PolicyView       `json:"policies"`
}

// RuleView is one compiled IR route: one match of one rule, on one proxy socket and host.
type RuleView struct {
	Name string `json:"name"`
	// RuleName is the Gateway API rule's own name (spec.rules[].name), omitted when it has none.
	RuleName string          `json:"ruleName,omitempty"`
	Hostname string          `json:"hostname"`
	Listener string          `json:"listener"`
	Match    ModuleView      `json:"match"`
	Filters  []ModuleView    `json:"filters"`
	Backends []BackendView   `json:"backends"`
	Timeouts json.RawMessage `json:"timeouts,omitempty"`
	Retry    json.RawMessage `json:"retry,omitempty"`
}

// BackendView is one weighted backend of a rule.
type BackendView struct {
	Cluster string       `json:"cluster"`
	Weight  uint32       `json:"weight"`
	Filters []ModuleView `json:"filters,omitempty"`
	Error   string       `json:"error,omitempty"`
}

// ClusterView is an IR cluster with its effective backend settings, without key material.
type ClusterView struct {
	Name               string            `json:"name"`
	Protocol           string            `json:"protocol"`
	Balancer           *ModuleView       `json:"balancer,omitempty"`
	ConnectTimeoutMS   uint32            `json:"connect_timeout_ms,omitempty"`
	IdleTimeoutMS      uint32            `json:"idle_timeout_ms,omitempty"`
	CircuitBreaker     json.RawMessage   `json:"circuit_breaker,omitempty"`
	SessionPersistence *SessionView      `json:"session_persistence,omitempty"`
	TLS                *UpstreamTLSView  `json:"tls,omitempty"`
	Endpoints          []json.RawMessage `json:"endpoints"`
}

// SessionView is a cluster's session persistence without its key.
type SessionView struct {
	Type string `json:"type"`
	Name string `json:"name,omitempty"`
}

// UpstreamTLSView is how the proxy connects to a TLS backend.
type UpstreamTLSView struct {
	ServerName        string            `json:"server_name,omitempty"`
	SystemRoots       bool              `json:"system_roots,omitempty"`
	CustomCA          bool              `json:"custom_ca,omitempty"`
	SubjectAltNames   []json.RawMessage `json:"subject_alt_names,omitempty"`
	ClientCertificate string            `json:"client_certificate,omitempty"`
}

// PolicyView is a policy whose status names the Gateway as an ancestor.
type PolicyView struct {
	Kind       string             `json:"kind"`
	Namespace  string             `json:"namespace"`
	Name       string             `json:"name"`
	Conditions []metav1.Condition `json:"conditions"`
}

// ModuleView is a module ID and its configuration.
type ModuleView struct {
	ID     string          `json:"id"`
	Config json.RawMessage `json:"config,omitempty"`
}

func moduleView(m *irv1.ModuleConfig) ModuleView {
	v := ModuleView{ID: m.GetId()}
	if j := m.GetJson(); len(j) > 0 && json.Valid(j) {
		v.Config = json.RawMessage(j)
	}
	return v
}

func moduleViews(ms []*irv1.ModuleConfig) []ModuleView {
	out := make([]ModuleView, 0, len(ms))
	for _, m := range ms {
		out = append(out, moduleView(m))
	}
	return out
}

// Index is the routing index of t.
func Index(t *Translation) RoutingIndex {
	idx := RoutingIndex{Version: t.Result.Snapshot.GetVersion(), TranslatedAt: t.At, Gateways: []GatewaySummary{}}
	for _, g := range ourGateways(t) {
		st := t.Result.Gateways[types.NamespacedName{Namespace: g.Namespace, Name: g.Name}]
		idx.Gateways = append(idx.Gateways, GatewaySummary{
			Namespace: g.Namespace, Name: g.Name, GatewayClass: string(g.Spec.GatewayClassName),
			Addresses: nonNil(st.Addresses), Listeners: len(g.Spec.Listeners),
			Routes: len(routesOf(t, g)), Conditions: nonNil(st.Conditions),
		})
	}
	return idx
}

// ourGateways are the Gateways the translation has status for, by namespace and name.
func ourGateways(t *Translation) []*gwapiv1.Gateway {
	var out []*gwapiv1.Gateway
	for _, g := range t.Store.Gateways {
		if _, ok := t.Result.Gateways[types.NamespacedName{Namespace: g.Namespace, Name: g.Name}]; ok {
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Gateway is the routing of one Gateway; false when the translation has no status for it.
func Gateway(t *Translation, namespace, name string) (GatewayRouting, bool) {
	var g *gwapiv1.Gateway
	for _, c := range ourGateways(t) {
		if c.Namespace == namespace && c.Name == name {
			g = c
		}
	}
	if g == nil {
		return GatewayRouting{}, false
	}
	st := t.Result.Gateways[types.NamespacedName{Namespace: namespace, Name: name}]
	out := GatewayRouting{Namespace: namespace, Name: name, GatewayClass: string(g.Spec.GatewayClassName),
		Generation: g.Generation, Addresses: nonNil(st.Addresses), Conditions: nonNil(st.Conditions),
		Listeners: listenerViews(t, g, st), Routes: []RouteView{}}
	for _, r := range routesOf(t, g) {
		out.Routes = append(out.Routes, routeView(t, g, r))
	}
	return out, true
}

func listenerViews(t *Translation, g *gwapiv1.Gateway, st *gwapiv1.GatewayStatus) []ListenerView {
	out := []ListenerView{}
	for _, l := range g.Spec.Listeners {
		v := ListenerView{Name: string(l.Name), Protocol: string(l.Protocol), Port: int32(l.Port),
			SupportedKinds: []gwapiv1.RouteGroupKind{}, Conditions: []metav1.Condition{}, Binds: []string{}}
		if l.Hostname != nil {
			v.Hostname = string(*l.Hostname)
		}
		for _, ls := range st.Listeners {
			if ls.Name == l.Name {
				v.AttachedRoutes, v.SupportedKinds, v.Conditions = ls.AttachedRoutes, nonNil(ls.SupportedKinds), nonNil(ls.Conditions)
			}
		}
		source := g.Namespace + "/" + g.Name + "/" + string(l.Name)
		for _, il := range t.Result.Snapshot.GetListeners() {
			for _, srv := range il.GetServers() {
				if !slices.Contains(srv.GetSources(), source) {
					continue
				}
				v.Binds = append(v.Binds, il.GetName())
				if tls := srv.GetTls(); tls != nil && v.TLS == nil {
					v.TLS = &TLSView{Mode: tls.GetMode().String(), Certificates: tls.GetCertificates()}
				}
				if len(srv.GetFilters()) > 0 && v.Filters == nil {
					v.Filters = moduleViews(srv.GetFilters())
				}
			}
		}
		out = append(out, v)
	}
	return out
}

// attachedRoute is a route with its parent statuses for one Gateway.
type attachedRoute struct {
	kind, namespace, name string
	parents               []gwapiv1.RouteParentStatus
}

// routesOf are the routes whose status has a parent entry for g, by kind, namespace and name.
func routesOf(t *Translation, g *gwapiv1.Gateway) []attachedRoute {
	var out []attachedRoute
	for k, rs := range t.Result.Routes.All() {
		var ps []gwapiv1.RouteParentStatus
		for _, p := range rs.Parents {
			if refersTo(p.ParentRef, k.Namespace, g) {
				ps = append(ps, p)
			}
		}
		if len(ps) > 0 {
			out = append(out, attachedRoute{kind: k.Kind, namespace: k.Namespace, name: k.Name, parents: ps})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.kind != b.kind {
			return a.kind < b.kind
		}
		if a.namespace != b.namespace {
			return a.namespace < b.namespace
		}
		return a.name < b.name
	})
	return out
}

// refersTo says whether a parentRef of an object in namespace ns names Gateway g.
func refersTo(ref gwapiv1.ParentReference, ns string, g *gwapiv1.Gateway) bool {
	if ref.Kind != nil && *ref.Kind != "Gateway" {
		return false
	}
	if ref.Group != nil && *ref.Group != gwapiv1.GroupName {
		return false
	}
	if ref.Namespace != nil {
		ns = string(*ref.Namespace)
	}
	return ns == g.Namespace && string(ref.Name) == g.Name
}

func routeView(t *Translation, g *gwapiv1.Gateway, r attachedRoute) RouteView {
	v := RouteView{Kind: r.kind, Namespace: r.namespace, Name: r.name, Conditions: []metav1.Condition{},
		Rules: []RuleView{}, Clusters: []ClusterView{}}
	for _, p := range r.parents {
		if p.ParentRef.SectionName != nil {
			v.Sections = append(v.Sections, string(*p.ParentRef.SectionName))
		}
		v.Conditions = append(v.Conditions, p.Conditions...)
	}
	prefix := r.kind + "/" + r.namespace + "/" + r.name + "/rule/"
	gwPrefix := g.Namespace + "/" + g.Name + "/"
	clusters := map[string]bool{}
	for _, il := range t.Result.Snapshot.GetListeners() {
		for _, srv := range il.GetServers() {
			if !anyHasPrefix(srv.GetSources(), gwPrefix) {
				continue
			}
			for _, vh := range srv.GetVirtualHosts() {
				for _, rt := range vh.GetRoutes() {
					if !strings.HasPrefix(rt.GetName(), prefix) {
						continue
					}
					rule := RuleView{Name: rt.GetName(), RuleName: rt.GetRuleName(), Hostname: vh.GetHostname(), Listener: il.GetName(),
						Match: moduleView(rt.GetMatch()), Filters: moduleViews(rt.GetFilters()), Backends: []BackendView{},
						Timeouts: protoRaw(rt.GetTimeouts()), Retry: protoRaw(rt.GetRetry())}
					for _, b := range rt.GetBackends() {
						bv := BackendView{Cluster: b.GetCluster(), Weight: b.GetWeight(), Error: b.GetError()}
						if len(b.GetFilters()) > 0 {
							bv.Filters = moduleViews(b.GetFilters())
						}
						rule.Backends = append(rule.Backends, bv)
						if b.GetCluster() != "" {
							clusters[b.GetCluster()] = true
						}
					}
					v.Rules = append(v.Rules, rule)
				}
			}
		}
	}
	services := map[string]bool{} // "<namespace>/<name>" of the Services the rules send to
	for _, c := range t.Result.Snapshot.GetClusters() {
		if clusters[c.GetName()] {
			v.Clusters = append(v.Clusters, clusterView(c))
			if svc, _, ok := strings.Cut(c.GetName(), ":"); ok {
				services[svc] = true
			}
		}
	}
	v.Policies = policiesOf(t, g, services)
	return v
}

// servicePolicyTargets are the Services each Service-targeting policy of the store names, as
// "<namespace>/<name>", by policy.
func servicePolicyTargets(t *Translation) map[PolicyRef][]string {
	out := map[PolicyRef][]string{}
	for _, p := range t.Store.BackendPolicies {
		ref := PolicyRef{Kind: "CoxswainBackendPolicy", Namespace: p.Namespace, Name: p.Name}
		out[ref] = []string{}
		for _, tg := range p.Spec.TargetRefs {
			if tg.Group == "" && tg.Kind == "Service" {
				out[ref] = append(out[ref], p.Namespace+"/"+string(tg.Name))
			}
		}
	}
	for _, p := range t.Store.BackendTLSPolicies {
		ref := PolicyRef{Kind: "BackendTLSPolicy", Namespace: p.Namespace, Name: p.Name}
		out[ref] = []string{}
		for _, tg := range p.Spec.TargetRefs {
			if tg.Group == "" && tg.Kind == "Service" {
				out[ref] = append(out[ref], p.Namespace+"/"+string(tg.Name))
			}
		}
	}
	return out
}

// PolicyRef names a policy object.
type PolicyRef struct{ Kind, Namespace, Name string }

func clusterView(c *irv1.Cluster) ClusterView {
	v := ClusterView{Name: c.GetName(), Protocol: c.GetProtocol().String(), ConnectTimeoutMS: c.GetConnectTimeoutMs(),
		IdleTimeoutMS: c.GetIdleTimeoutMs(), CircuitBreaker: protoRaw(c.GetCircuitBreaker()), Endpoints: []json.RawMessage{}}
	if b := c.GetBalancer(); b != nil {
		mv := moduleView(b)
		v.Balancer = &mv
	}
	if sp := c.GetSessionPersistence(); sp != nil {
		v.SessionPersistence = &SessionView{Type: sp.GetType().String(), Name: sp.GetName()}
	}
	if tls := c.GetTls(); tls != nil {
		tv := &UpstreamTLSView{ServerName: tls.GetServerName(), SystemRoots: tls.GetSystemRoots(), CustomCA: len(tls.GetCaPem()) > 0,
			ClientCertificate: tls.GetClientCertificate()}
		for _, san := range tls.GetSubjectAltNames() {
			tv.SubjectAltNames = append(tv.SubjectAltNames, protoRaw(san))
		}
		v.TLS = tv
	}
	for _, e := range c.GetEndpoints() {
		v.Endpoints = append(v.Endpoints, protoRaw(e))
	}
	return v
}

// policiesOf are the policies with an ancestor status for g that bear on a route sending to
// services: a Service-targeting policy only when it targets one of them, any other (a
// ClientTrafficPolicy, a Gateway-wide filter policy) always.
func policiesOf(t *Translation, g *gwapiv1.Gateway, services map[string]bool) []PolicyView {
	out := []PolicyView{}
	targets := servicePolicyTargets(t)
	for k, ps := range t.Result.Policies {
		if svcs, ok := targets[PolicyRef{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name}]; ok &&
			!slices.ContainsFunc(svcs, func(s string) bool { return services[s] }) {
			continue
		}
		for _, a := range ps.Ancestors {
			if refersTo(a.AncestorRef, k.Namespace, g) {
				out = append(out, PolicyView{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name, Conditions: nonNil(a.Conditions)})
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return out
}

func anyHasPrefix(ss []string, p string) bool {
	for _, x := range ss {
		if strings.HasPrefix(x, p) {
			return true
		}
	}
	return false
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
