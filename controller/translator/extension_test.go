package translator

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1b1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// signFilter is an ExtensionRef filter module as a third party writes one: its JSON fields are
// its resource's spec.
type signFilter struct {
	Header string `json:"header"`
	Key    string `json:"key"`
}

func (signFilter) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: "filter.ext.example.com.Sign", New: func() core.Module { return &signFilter{} }}
}

func (signFilter) ExtensionAPI() core.ExtensionAPI {
	return core.ExtensionAPI{Group: "example.com", Kind: "Sign", Version: "v1", Resource: "signs"}
}

func (f *signFilter) CheckConfig() error {
	if f.Key == "" {
		return errors.New("key is required")
	}
	return nil
}

// extRoute is a route kind whose rule 0 has the filters given: the extension path is the
// core's, not the route kind's.
type extRoute struct {
	streamRoute
	filters []gwapiv1.HTTPRouteFilter
}

func (r *extRoute) Build(rc translation.RouteContext) []*translation.Entry {
	route := &irv1.Route{Match: &irv1.ModuleConfig{Id: "route.stream"}}
	fs, fail := rc.Filters("spec.rules[0].filters", r.filters, translation.FilterEnv{Kind: "StreamRoute"})
	if fail != nil {
		fail.Report(rc, 0)
		route.Backends = []*irv1.Backend{translation.ErrorBackend(fail.Error())}
	} else {
		route.Filters = fs
		route.Backends = []*irv1.Backend{rc.Backend("spec.rules[0].backendRefs[0]", r.backend, nil)}
	}
	return []*translation.Entry{{Route: route}}
}

type extKind struct{ streamKind }

func (extKind) Route(o translation.Object) (translation.Route, bool) {
	r, ok := o.(*extRoute)
	return r, ok
}

func (extKind) API() translation.RouteAPI {
	return translation.NewAPI(streamGVK, "streamroutes", nil, func(r *extRoute) *gwapiv1.RouteStatus { return &r.status }, nil)
}

func (k extKind) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: "translate.route.stream", New: func() core.Module { return k }}
}

func signObject(name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Sign",
		"metadata": map[string]any{"namespace": "db", "name": name}, "spec": spec}}
	return u
}

func TestExtensionRef(t *testing.T) {
	ref := func(kind, name string) []gwapiv1.HTTPRouteFilter {
		return []gwapiv1.HTTPRouteFilter{extRef(kind, name)}
	}
	for _, tc := range []struct {
		name    string
		filters []gwapiv1.HTTPRouteFilter
		// config is the filter's module config when it translates; else reason and msg are the
		// ResolvedRefs=False condition's.
		config, reason, msg string
	}{
		{name: "spec becomes the config", filters: ref("Sign", "good"), config: `{"header":"x-sig","key":"k1"}`},
		{name: "unknown kind", filters: ref("Teleport", "x"), reason: "InvalidKind",
			msg: "no module filter.ext.example.com.Teleport handles that kind in this build"},
		{name: "missing object", filters: ref("Sign", "nope"), reason: "FilterNotFound", msg: "Sign db/nope does not exist"},
		{name: "unknown spec field", filters: ref("Sign", "typo"), reason: "UnsupportedValue", msg: `unknown field "hedaer"`},
		{name: "config check", filters: ref("Sign", "nokey"), reason: "UnsupportedValue", msg: "key is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := tcpStore()
			store.Add(schema.GroupKind{Group: "example.com", Kind: "Sign"},
				signObject("good", map[string]any{"key": "k1", "header": "x-sig"}),
				signObject("typo", map[string]any{"key": "k1", "hedaer": "x"}),
				signObject("nokey", map[string]any{"header": "x"}))
			store.Add(streamGVK.GroupKind(), pgRoute(tc.filters...))
			res := Translate(context.Background(), store, Options{Registry: core.NewRegistry(extKind{}, signFilter{})})
			rs := res.Routes.Get(RouteKey{Group: "example.com", Kind: "StreamRoute", Namespace: "db", Name: "pg"})
			if rs == nil || len(rs.Parents) != 1 {
				t.Fatalf("route status %+v, problems %v", rs, res.Problems)
			}
			resolved := rs.Parents[0].Conditions[1]
			r := res.Snapshot.Listeners[0].Servers[0].VirtualHosts[0].Routes[0]
			if tc.config != "" {
				if len(r.Filters) != 1 || r.Filters[0].Id != "filter.ext.example.com.Sign" || string(r.Filters[0].Json) != tc.config {
					t.Errorf("filters %v, want the Sign module with %s", r.Filters, tc.config)
				}
				if resolved.Status != metav1.ConditionTrue || r.Backends[0].Cluster == "" {
					t.Errorf("ResolvedRefs %+v, backends %v", resolved, r.Backends)
				}
				return
			}
			if resolved.Status != metav1.ConditionFalse || resolved.Reason != tc.reason || !strings.Contains(resolved.Message, tc.msg) {
				t.Errorf("ResolvedRefs = %s %s %q, want False %s containing %q", resolved.Status, resolved.Reason, resolved.Message, tc.reason, tc.msg)
			}
			if len(r.Filters) != 0 || len(r.Backends) != 1 || r.Backends[0].Error == "" {
				t.Errorf("a rule whose filter cannot run must answer an error, not skip it: filters %v backends %v", r.Filters, r.Backends)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

// tcpStore is one Gateway with a TCP listener on 5432 (and the listeners given) and a Service
// with one endpoint, in namespace db.
func tcpStore(more ...gwapiv1.Listener) *Store {
	ready := true
	port := int32(5432)
	listeners := append([]gwapiv1.Listener{{Name: "tcp", Port: 5432, Protocol: gwapiv1.TCPProtocolType}}, more...)
	return &Store{
		GatewayClasses: []*gwapiv1.GatewayClass{{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: gwapiv1.GatewayClassSpec{ControllerName: DefaultControllerName}}},
		Gateways: []*gwapiv1.Gateway{{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "gw"}, Spec: gwapiv1.GatewaySpec{
			GatewayClassName: "c", Listeners: listeners,
		}}},
		Services: []*corev1.Service{{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "pg"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 5432}}}}},
		EndpointSlices: []*discoveryv1.EndpointSlice{{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "db", Name: "pg-1", Labels: map[string]string{discoveryv1.LabelServiceName: "pg"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Port: &port}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.5"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		}},
	}
}

// signResolver is the controller half of the Sign filter: it replaces spec.keyRef (a Secret in
// the route's namespace) by the key itself, so the proxy never reads the Secret.
type signResolver struct{}

func (signResolver) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: "translate.filter.ext.example.com.Sign", New: func() core.Module { return signResolver{} }}
}

func (signResolver) Resolve(rc translation.ResolveContext, _ translation.Object, spec json.RawMessage) (json.RawMessage, error) {
	var in struct {
		Header string                           `json:"header"`
		KeyRef struct{ Namespace, Name string } `json:"keyRef"`
	}
	if err := json.Unmarshal(spec, &in); err != nil {
		return nil, err
	}
	sec, err := rc.Secret(in.KeyRef.Namespace, in.KeyRef.Name)
	if err != nil {
		return nil, err
	}
	return json.Marshal(signFilter{Header: in.Header, Key: string(sec.Data["key"])})
}

func TestExtensionResolver(t *testing.T) {
	for _, tc := range []struct {
		name           string
		keyNS          string
		grant          bool
		config, reason string
	}{
		{name: "same namespace", keyNS: "db", config: `{"header":"x-sig","key":"s3cret"}`},
		{name: "other namespace without a grant", keyNS: "keys", reason: "RefNotPermitted"},
		{name: "other namespace with a grant", keyNS: "keys", grant: true, config: `{"header":"x-sig","key":"s3cret"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := tcpStore()
			store.Secrets = []*corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Namespace: tc.keyNS, Name: "k"}, Data: map[string][]byte{"key": []byte("s3cret")}}}
			if tc.grant {
				store.ReferenceGrants = []*gwapiv1b1.ReferenceGrant{{ObjectMeta: metav1.ObjectMeta{Namespace: "keys", Name: "g"},
					Spec: gwapiv1b1.ReferenceGrantSpec{
						From: []gwapiv1b1.ReferenceGrantFrom{{Group: "example.com", Kind: "Sign", Namespace: "db"}},
						To:   []gwapiv1b1.ReferenceGrantTo{{Group: "", Kind: "Secret"}},
					}}}
			}
			store.Add(schema.GroupKind{Group: "example.com", Kind: "Sign"},
				signObject("s", map[string]any{"header": "x-sig", "keyRef": map[string]any{"namespace": tc.keyNS, "name": "k"}}))
			store.Add(streamGVK.GroupKind(), pgRoute(extRef("Sign", "s")))
			res := Translate(context.Background(), store, Options{Registry: core.NewRegistry(extKind{}, signFilter{}, signResolver{})})
			r := res.Snapshot.Listeners[0].Servers[0].VirtualHosts[0].Routes[0]
			resolved := res.Routes.Get(RouteKey{Group: "example.com", Kind: "StreamRoute", Namespace: "db", Name: "pg"}).Parents[0].Conditions[1]
			if tc.config != "" {
				if len(r.Filters) != 1 || string(r.Filters[0].Json) != tc.config {
					t.Errorf("filters %v, want config %s", r.Filters, tc.config)
				}
				return
			}
			if resolved.Reason != tc.reason || len(r.Filters) != 0 || r.Backends[0].Error == "" {
				t.Errorf("ResolvedRefs %+v, filters %v, backends %v; want %s and an error answer", resolved, r.Filters, r.Backends, tc.reason)
			}
		})
	}
}

// undeclared is a filter.ext module that forgot core.ExtensionKind.
type undeclared struct{}

func (undeclared) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: "filter.ext.example.com.Lost", New: func() core.Module { return undeclared{} }}
}

func TestUndeclaredExtensionModuleIsAProblem(t *testing.T) {
	res := Translate(context.Background(), tcpStore(), Options{Registry: core.NewRegistry(extKind{}, undeclared{})})
	for _, p := range res.Problems {
		if p.Reason == "InvalidFilterModule" && strings.Contains(p.Message, "filter.ext.example.com.Lost") {
			return
		}
	}
	t.Errorf("problems %v: want InvalidFilterModule naming filter.ext.example.com.Lost", res.Problems)
}

// openFilter serves its rule without the filter when the referenced object is missing.
type openFilter struct{}

func (openFilter) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: "filter.ext.example.com.Open", New: func() core.Module { return &openFilter{} }}
}

func (openFilter) ExtensionAPI() core.ExtensionAPI {
	return core.ExtensionAPI{Group: "example.com", Kind: "Open", Version: "v1", Resource: "opens", FailOpen: true}
}

func TestExtensionRefFailOpen(t *testing.T) {
	store := tcpStore()
	store.Add(streamGVK.GroupKind(), pgRoute(extRef("Open", "gone")))
	res := Translate(context.Background(), store, Options{Registry: core.NewRegistry(extKind{}, openFilter{})})
	r := res.Snapshot.Listeners[0].Servers[0].VirtualHosts[0].Routes[0]
	if len(r.Filters) != 0 || len(r.Backends) != 1 || r.Backends[0].Error != "" || r.Backends[0].Cluster == "" {
		t.Errorf("a fail-open filter whose object is missing must leave the rule served without it: filters %v backends %v", r.Filters, r.Backends)
	}
	resolved := res.Routes.Get(RouteKey{Group: "example.com", Kind: "StreamRoute", Namespace: "db", Name: "pg"}).Parents[0].Conditions[1]
	if resolved.Status != metav1.ConditionFalse || resolved.Reason != string(RouteReasonFilterNotFound) ||
		!strings.Contains(resolved.Message, "served without the filter") {
		t.Errorf("ResolvedRefs %+v: want False FilterNotFound saying the rule is served without the filter", resolved)
	}
}

// twinRewrite is a second translator of URLRewrite.
type twinRewrite struct{ id core.ModuleID }

func (m twinRewrite) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: m.id, New: func() core.Module { return m }}
}
func (twinRewrite) FilterType() gwapiv1.HTTPRouteFilterType { return gwapiv1.HTTPRouteFilterURLRewrite }
func (twinRewrite) TranslateFilter(translation.FilterEnv, gwapiv1.HTTPRouteFilter, string) (*irv1.ModuleConfig, *translation.Failure) {
	return nil, nil
}

func TestDuplicateFilterTranslatorIsAProblem(t *testing.T) {
	reg := core.NewRegistry(extKind{}, twinRewrite{"translate.filter.a_rewrite"}, twinRewrite{"translate.filter.b_rewrite"})
	res := Translate(context.Background(), tcpStore(), Options{Registry: reg})
	for _, p := range res.Problems {
		if p.Reason == "InvalidFilterModule" && strings.Contains(p.Message, "translate.filter.a_rewrite and translate.filter.b_rewrite") {
			return
		}
	}
	t.Errorf("problems %v: want InvalidFilterModule naming both translators", res.Problems)
}

// kindBound is a filter for some route kinds only, which warns about its config.
type kindBound struct {
	api                core.ExtensionAPI
	supported, ignored []string
	Skip               []string `json:"skip"`
}

func (m kindBound) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: core.ExtensionModuleID(m.api.Group, m.api.Kind), New: func() core.Module { return &kindBound{api: m.api, supported: m.supported, ignored: m.ignored} }}
}
func (m *kindBound) ExtensionAPI() core.ExtensionAPI { return m.api }
func (m *kindBound) ExtensionRouteKinds() (supported, ignored []string) {
	if m.supported == nil {
		return []string{"StreamRoute"}, nil
	}
	return m.supported, m.ignored
}
func (m *kindBound) ConfigWarnings() []string {
	var out []string
	for _, s := range m.Skip {
		out = append(out, "entry "+s+" is skipped")
	}
	return out
}

func extStore(t *testing.T, kind string, spec map[string]any, more ...gwapiv1.Listener) *Store {
	t.Helper()
	store := tcpStore(more...)
	if spec != nil {
		store.Add(schema.GroupKind{Group: "example.com", Kind: kind}, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.com/v1", "kind": kind, "metadata": map[string]any{"namespace": "db", "name": "f"}, "spec": spec}})
	}
	store.Add(streamGVK.GroupKind(), pgRoute(extRef(kind, "f")))
	return store
}

// pgRoute is route db/pg on Gateway gw, to Service pg:5432, its one rule with filters.
func pgRoute(filters ...gwapiv1.HTTPRouteFilter) *extRoute {
	return &extRoute{filters: filters, streamRoute: streamRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "pg"},
		parents: []gwapiv1.ParentReference{{Name: "gw"}},
		backend: gwapiv1.BackendRef{BackendObjectReference: gwapiv1.BackendObjectReference{Name: "pg", Port: ptrTo(gwapiv1.PortNumber(5432))}}}}
}

// extRef is an ExtensionRef filter naming the example.com object kind/name.
func extRef(kind, name string) gwapiv1.HTTPRouteFilter {
	return gwapiv1.HTTPRouteFilter{Type: gwapiv1.HTTPRouteFilterExtensionRef,
		ExtensionRef: &gwapiv1.LocalObjectReference{Group: "example.com", Kind: gwapiv1.Kind(kind), Name: gwapiv1.ObjectName(name)}}
}

var pgKey = RouteKey{Group: "example.com", Kind: "StreamRoute", Namespace: "db", Name: "pg"}

// A filter declared for other route kinds fails the rule, or — on a kind it is "accepted, not
// enforced" on — is left out with a warning on the route.
func TestExtensionRefRouteKinds(t *testing.T) {
	only := kindBound{api: core.ExtensionAPI{Group: "example.com", Kind: "Only", Version: "v1", Resource: "onlys"}, supported: []string{"HTTPRoute"}}
	ignored := kindBound{api: core.ExtensionAPI{Group: "example.com", Kind: "Lax", Version: "v1", Resource: "laxes"},
		supported: []string{"HTTPRoute"}, ignored: []string{"StreamRoute"}}
	reg := core.NewRegistry(extKind{}, only, ignored)

	res := Translate(context.Background(), extStore(t, "Only", map[string]any{}), Options{Registry: reg})
	// The route's one rule fails, so the route is not accepted (a route with other rules would
	// be PartiallyInvalid, the failed rule answering 500).
	if accepted := res.Routes.Get(pgKey).Parents[0].Conditions[0]; accepted.Status != metav1.ConditionFalse ||
		!strings.Contains(accepted.Message, "Only filters are not supported on StreamRoute (only on HTTPRoute)") {
		t.Errorf("a filter used on a route kind it does not support must fail its rule: Accepted %+v", accepted)
	}
	if len(res.Problems) != 1 || res.Problems[0].Reason != "UnsupportedValue" {
		t.Errorf("problems %v, want one UnsupportedValue", res.Problems)
	}

	res = Translate(context.Background(), extStore(t, "Lax", map[string]any{}), Options{Registry: reg})
	r := res.Snapshot.Listeners[0].Servers[0].VirtualHosts[0].Routes[0]
	if len(r.Filters) != 0 || r.Backends[0].Error != "" {
		t.Errorf("an accepted-not-enforced filter must leave the rule served: filters %v backends %v", r.Filters, r.Backends)
	}
	resolved := res.Routes.Get(pgKey).Parents[0].Conditions[1]
	if resolved.Status != metav1.ConditionTrue || !strings.Contains(resolved.Message, "accepted with warnings") ||
		!strings.Contains(resolved.Message, "is not enforced on StreamRoute") {
		t.Errorf("ResolvedRefs %+v: want True with the warning", resolved)
	}
	if len(res.Warnings) != 1 || len(res.Problems) != 0 {
		t.Errorf("warnings %v problems %v: want one warning and no problem", res.Warnings, res.Problems)
	}
}

// A module's ConfigWarnings show on the route, which stays resolved, once however many
// listeners the route is built for.
func TestConfigWarnings(t *testing.T) {
	m := kindBound{api: core.ExtensionAPI{Group: "example.com", Kind: "Warny", Version: "v1", Resource: "warnys"}}
	store := extStore(t, "Warny", map[string]any{"skip": []any{"a", "b"}}, gwapiv1.Listener{Name: "tcp2", Port: 5433, Protocol: gwapiv1.TCPProtocolType})
	res := Translate(context.Background(), store, Options{Registry: core.NewRegistry(extKind{}, m)})
	resolved := res.Routes.Get(pgKey).Parents[0].Conditions[1]
	want := "accepted with warnings: spec.rules[0].filters[0].extensionRef: ExtensionRef Warny.example.com f: entry a is skipped; " +
		"spec.rules[0].filters[0].extensionRef: ExtensionRef Warny.example.com f: entry b is skipped"
	if resolved.Status != metav1.ConditionTrue || !strings.HasSuffix(resolved.Message, want) {
		t.Errorf("ResolvedRefs message %q, want it to end with %q", resolved.Message, want)
	}
	if len(res.Warnings) != 2 || res.Warnings[0].Reason != ReasonWarning {
		t.Errorf("warnings %v, want 2", res.Warnings)
	}
	if r := res.Snapshot.Listeners[0].Servers[0].VirtualHosts[0].Routes[0]; len(r.Filters) != 1 {
		t.Errorf("filters %v: a warning must not drop the filter", r.Filters)
	}
}

// Each ExtensionRef to a missing object counts once per translation, not once per listener.
func TestUnresolvedFiltersCounted(t *testing.T) {
	store := extStore(t, "Open", nil, gwapiv1.Listener{Name: "tcp2", Port: 5433, Protocol: gwapiv1.TCPProtocolType})
	res := Translate(context.Background(), store, Options{Registry: core.NewRegistry(extKind{}, openFilter{})})
	if res.UnresolvedFilters["Open"] != 1 || len(res.UnresolvedFilters) != 1 {
		t.Errorf("UnresolvedFilters = %v, want Open: 1", res.UnresolvedFilters)
	}
}

// docResolver reads a remote document and warns about it.
type docResolver struct{}

func (docResolver) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: "translate.filter.ext.example.com.Warny", New: func() core.Module { return docResolver{} }}
}

func (docResolver) Resolve(rc translation.ResolveContext, _ translation.Object, _ json.RawMessage) (json.RawMessage, error) {
	body, err := rc.Document("https://keys.example/jwks", time.Minute)
	if err != nil {
		return nil, err
	}
	rc.Warn("document is %d bytes", len(body))
	return json.RawMessage(`{}`), nil
}

type docs map[string]string

func (d docs) Document(uri string, _ time.Duration) ([]byte, error) {
	if b, ok := d[uri]; ok {
		return []byte(b), nil
	}
	return nil, errors.New("not fetched yet")
}

func TestResolverDocumentsAndWarnings(t *testing.T) {
	m := kindBound{api: core.ExtensionAPI{Group: "example.com", Kind: "Warny", Version: "v1", Resource: "warnys"}}
	reg := core.NewRegistry(extKind{}, m, docResolver{})
	res := Translate(context.Background(), extStore(t, "Warny", map[string]any{}), Options{Registry: reg})
	if resolved := res.Routes.Get(pgKey).Parents[0].Conditions[1]; resolved.Status != metav1.ConditionFalse ||
		!strings.Contains(resolved.Message, "not fetched in this process") {
		t.Errorf("without Documents: ResolvedRefs %+v, want False saying documents are not fetched", resolved)
	}
	res = Translate(context.Background(), extStore(t, "Warny", map[string]any{}),
		Options{Registry: reg, Documents: docs{"https://keys.example/jwks": "{\"keys\":[]}"}})
	if resolved := res.Routes.Get(pgKey).Parents[0].Conditions[1]; resolved.Status != metav1.ConditionTrue ||
		!strings.HasSuffix(resolved.Message, "ExtensionRef Warny.example.com f: document is 11 bytes") {
		t.Errorf("with the document: ResolvedRefs %+v, want True with the resolver's warning", resolved)
	}
}
