package translate_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/features"
	"github.com/coxswain-labs/coxswain/controller/standalone"
	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	headerstr "github.com/coxswain-labs/coxswain/modules/filters/headers/translate"
	"github.com/coxswain-labs/coxswain/modules/filters/pathregex"
	"github.com/coxswain-labs/coxswain/modules/grpcroute"
	grpctranslate "github.com/coxswain-labs/coxswain/modules/grpcroute/translate"
	httptranslate "github.com/coxswain-labs/coxswain/modules/httproute/translate"
)

// translateFile loads a manifest as `coxswain serve` would and translates it with the HTTPRoute
// and GRPCRoute kinds.
func translateFile(t *testing.T, path string) *translator.Result {
	t.Helper()
	res, err := standalone.Load(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Errors) > 0 {
		t.Fatalf("load errors: %v", res.Err())
	}
	reg := core.NewRegistry(httptranslate.Kind{}, grpctranslate.Kind{}, headerstr.Request{}, headerstr.Response{})
	return translator.Translate(context.Background(), res.Store, translator.Options{Registry: reg})
}

// snapshotView renders listeners as "name: server vhost -> route [backends]" lines, one per
// route in precedence order, and clusters as "cluster name protocol endpoints".
func snapshotView(s *irv1.Snapshot) []string {
	var out []string
	for _, l := range s.GetListeners() {
		for _, srv := range l.GetServers() {
			for _, vh := range srv.GetVirtualHosts() {
				for _, r := range vh.GetRoutes() {
					var bs []string
					for _, b := range r.GetBackends() {
						bs = append(bs, fmt.Sprintf("%s*%d", b.GetCluster(), b.GetWeight()))
					}
					out = append(out, fmt.Sprintf("%s %q %q: %s %s [%s]", l.GetName(), srv.GetHostname(), vh.GetHostname(),
						r.GetMatch().GetId(), r.GetName(), strings.Join(bs, " ")))
				}
			}
		}
	}
	for _, c := range s.GetClusters() {
		var eps []string
		for _, e := range c.GetEndpoints() {
			eps = append(eps, fmt.Sprintf("%s:%d", e.GetAddress(), e.GetPort()))
		}
		out = append(out, fmt.Sprintf("cluster %s %s %v", c.GetName(), c.GetProtocol(), eps))
	}
	return out
}

func TestSnapshot(t *testing.T) {
	got := snapshotView(translateFile(t, "testdata/grpc.yaml").Snapshot)
	want := []string{
		`:80/HTTP "" "api.example.com": route.http HTTPRoute/default/api-web/rule/0/match/0 [default/plain:50051*1]`,
		`:80/HTTP "" "www.example.com": route.http HTTPRoute/default/site/rule/0/match/0 [default/plain:50051*1]`,
		`:81/HTTP "" "api.example.com": route.grpc GRPCRoute/default/api/rule/0/match/0 [default/h2c:50051*1]`,
		`:81/HTTP "" "rpc.example.org": route.grpc GRPCRoute/default/other/rule/0/match/0 [default/h2c:50051*1]`,
		`:8080/HTTP "grpc.example.com" "grpc.example.com": route.grpc GRPCRoute/default/echo/rule/6/match/0 [*1]`,
		`:8080/HTTP "grpc.example.com" "grpc.example.com": route.grpc GRPCRoute/default/echo/rule/2/match/0 [default/plain:50051/h2c*3 default/h2c:50051*1]`,
		`:8080/HTTP "grpc.example.com" "grpc.example.com": route.grpc GRPCRoute/default/echo/rule/1/match/0 [default/h2c:50051*1]`,
		`:8080/HTTP "grpc.example.com" "grpc.example.com": route.grpc GRPCRoute/default/echo/rule/3/match/0 [default/h2c:50051*1]`,
		`:8080/HTTP "grpc.example.com" "grpc.example.com": route.grpc GRPCRoute/default/echo/rule/2/match/1 [default/plain:50051/h2c*3 default/h2c:50051*1]`,
		`:8080/HTTP "grpc.example.com" "grpc.example.com": route.grpc GRPCRoute/default/echo/rule/4/match/0 [*1]`,
		`:8080/HTTP "grpc.example.com" "grpc.example.com": route.grpc GRPCRoute/default/echo/rule/0/match/0 [default/h2c:50051*1]`,
		`cluster default/h2c:50051 H2C [10.0.0.1:9000]`,
		`cluster default/plain:50051 HTTP1 [10.0.0.2:9001]`,
		`cluster default/plain:50051/h2c H2C [10.0.0.2:9001]`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("snapshot:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// routeNamed finds the IR route of that name.
func routeNamed(t *testing.T, s *irv1.Snapshot, name string) *irv1.Route {
	t.Helper()
	for _, l := range s.GetListeners() {
		for _, srv := range l.GetServers() {
			for _, vh := range srv.GetVirtualHosts() {
				for _, r := range vh.GetRoutes() {
					if r.GetName() == name {
						return r
					}
				}
			}
		}
	}
	t.Fatalf("no route %s", name)
	return nil
}

func TestMatchConfig(t *testing.T) {
	snap := translateFile(t, "testdata/grpc.yaml").Snapshot
	cases := map[string]string{
		"rule/2/match/0": `{"method":{"type":"Exact","service":"pkg.Echo","method":"Say"}}`,
		"rule/2/match/1": `{"method":{"type":"Exact","method":"Say"},"headers":[{"type":"Exact","name":"version","value":"two"}]}`,
		"rule/3/match/0": `{"method":{"type":"RegularExpression","service":"pkg\\..*","method":"S.*"}}`,
		"rule/4/match/0": `{"headers":[{"type":"RegularExpression","name":"tier","value":"gold|silver"}]}`,
		"rule/0/match/0": `{}`,
	}
	for suffix, want := range cases {
		r := routeNamed(t, snap, "GRPCRoute/default/echo/"+suffix)
		if got := string(r.GetMatch().GetJson()); got != want {
			t.Errorf("%s: match %s, want %s", suffix, got, want)
		}
		// The proxy half must accept what the translator emits.
		var m grpcroute.Match
		if err := core.DecodeStrict(r.GetMatch().GetJson(), &m); err != nil {
			t.Errorf("%s: %v", suffix, err)
		} else if _, err := grpcroute.New(m); err != nil {
			t.Errorf("%s: %v", suffix, err)
		}
	}
	filters := routeNamed(t, snap, "GRPCRoute/default/echo/rule/3/match/0").GetFilters()
	var ids []string
	for _, f := range filters {
		ids = append(ids, f.GetId()+" "+string(f.GetJson()))
	}
	wantFilters := []string{
		`filter.http.request_header_modifier {"set":[{"name":"x-route","value":"echo"}],"remove":["x-drop"]}`,
		`filter.http.response_header_modifier {"add":[{"name":"x-served-by","value":"gateway"}]}`,
	}
	if !slices.Equal(ids, wantFilters) {
		t.Errorf("filters %v, want %v", ids, wantFilters)
	}
}

func conditions(t *testing.T, res *translator.Result, kind, name string) [][]string {
	t.Helper()
	st := res.Routes.Get(translator.RouteKey{Group: gwapiv1.GroupName, Kind: kind, Namespace: "default", Name: name})
	if st == nil {
		t.Fatalf("%s %s: no status", kind, name)
	}
	var out [][]string
	for _, p := range st.Parents {
		var cs []string
		for _, c := range p.Conditions {
			cs = append(cs, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
		}
		out = append(out, cs)
	}
	return out
}

func TestStatus(t *testing.T) {
	res := translateFile(t, "testdata/grpc.yaml")
	cases := []struct {
		kind, name string
		want       [][]string
	}{
		{"GRPCRoute", "echo", [][]string{{"Accepted=True/Accepted", "ResolvedRefs=False/UnsupportedProtocol", "PartiallyInvalid=True/UnsupportedValue"}}},
		{"GRPCRoute", "late", [][]string{{"Accepted=False/HostnameConflict", "ResolvedRefs=True/ResolvedRefs"}}},
		{"HTTPRoute", "site", [][]string{{"Accepted=True/Accepted", "ResolvedRefs=True/ResolvedRefs"}}},
		{"GRPCRoute", "api", [][]string{{"Accepted=True/Accepted", "ResolvedRefs=True/ResolvedRefs"}}},
		{"HTTPRoute", "api-web", [][]string{{"Accepted=True/Accepted", "ResolvedRefs=True/ResolvedRefs", "Conflicted=True/HostnameConflict"}}},
		{"GRPCRoute", "other", [][]string{{"Accepted=True/Accepted", "ResolvedRefs=True/ResolvedRefs"}}},
	}
	for _, tc := range cases {
		t.Run(tc.kind+"/"+tc.name, func(t *testing.T) {
			if got := conditions(t, res, tc.kind, tc.name); !slices.EqualFunc(got, tc.want, slices.Equal) {
				t.Errorf("conditions %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("messages", func(t *testing.T) {
		late := res.Routes.Get(translator.RouteKey{Group: gwapiv1.GroupName, Kind: "GRPCRoute", Namespace: "default", Name: "late"})
		if msg := late.Parents[0].Conditions[0].Message; !strings.Contains(msg, "HTTPRoute default/site is older") {
			t.Errorf("late: %q", msg)
		}
		echo := res.Routes.Get(translator.RouteKey{Group: gwapiv1.GroupName, Kind: "GRPCRoute", Namespace: "default", Name: "echo"})
		msgs := ""
		for _, c := range echo.Parents[0].Conditions {
			msgs += c.Message + "\n"
		}
		for _, want := range []string{"Dropped Rule 5", "bad/service", "Dropped Rule 6 (it answers gRPC status UNAVAILABLE)", "RequestMirror", `appProtocol "kubernetes.io/ws"`} {
			if !strings.Contains(msgs, want) {
				t.Errorf("echo conditions do not say %q:\n%s", want, msgs)
			}
		}
	})
	gw := res.Gateways[types.NamespacedName{Namespace: "default", Name: "gw"}]
	for _, l := range gw.Listeners {
		var kinds []string
		for _, k := range l.SupportedKinds {
			kinds = append(kinds, string(k.Kind))
		}
		want := map[gwapiv1.SectionName]int32{"grpc": 1, "web": 3, "web2": 3}[l.Name]
		if l.AttachedRoutes != want || !slices.Equal(kinds, []string{"GRPCRoute", "HTTPRoute"}) {
			t.Errorf("listener %s: attachedRoutes %d (want %d), supportedKinds %v", l.Name, l.AttachedRoutes, want, kinds)
		}
	}
}

func TestFeatures(t *testing.T) {
	if got := features.Supported(core.NewRegistry(grpctranslate.Kind{}, module(grpcroute.ModuleID))); len(got) != 0 {
		t.Errorf("features without listeners and header filters: %v", got)
	}
	full := core.NewRegistry(grpctranslate.Kind{}, headerstr.Request{}, module(grpcroute.ModuleID), module("listener.http"), module("listener.https"),
		module("filter.http.request_header_modifier"), module("filter.http.response_header_modifier"))
	var names []string
	for _, f := range features.Supported(full) {
		names = append(names, string(f.Name))
	}
	// The request header modifier's translator claims the GRPCRoute feature, and without
	// route.http not the HTTPRoute one.
	want := []string{"ClusterTrustBundle", "GRPCRoute", "GRPCRouteNamedRouteRule", "GRPCRouteRequestHeaderModifier", "Gateway", "GatewayAddressEmpty", "GatewayAddressRoutability", "GatewayFrontendClientCertificateValidation", "GatewayFrontendClientCertificateValidationInsecureFallback", "GatewayHTTPListenerIsolation", "GatewayHTTPSListenerDetectMisdirectedRequests", "GatewayListenerFilters", "GatewayPort8080", "GatewayRouteHostnameIntersectionPrecedence", "GatewayStaticAddresses", "ListenerSet", "ReferenceGrant"}
	if !slices.Equal(names, want) {
		t.Errorf("features %v, want %v", names, want)
	}
}

// module stands in for a proxy module of the given ID: features only look at IDs.
type module core.ModuleID

func (m module) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: core.ModuleID(m), New: func() core.Module { return m }}
}

// TestRefreshEndpoints checks the endpoints fast path on GRPCRoute clusters, the "/h2c" ones
// included: it gives what a full translation gives.
func TestRefreshEndpoints(t *testing.T) {
	res, err := standalone.Load(context.Background(), "testdata/grpc.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := core.NewRegistry(httptranslate.Kind{}, grpctranslate.Kind{}, headerstr.Request{}, headerstr.Response{})
	opts := translator.Options{Registry: reg}
	prev := translator.Translate(context.Background(), res.Store, opts).Snapshot
	for _, es := range res.Store.EndpointSlices {
		es.Endpoints[0].Addresses = []string{"10.9.9.9"}
	}
	full := translator.Translate(context.Background(), res.Store, opts).Snapshot
	fast := translator.RefreshEndpoints(context.Background(), prev, res.Store, opts)
	if full.GetVersion() != fast.GetVersion() || full.GetVersion() == prev.GetVersion() {
		t.Errorf("versions: prev %s full %s fast %s", prev.GetVersion(), full.GetVersion(), fast.GetVersion())
	}
	for _, c := range fast.GetClusters() {
		if len(c.GetEndpoints()) != 1 || c.GetEndpoints()[0].GetAddress() != "10.9.9.9" {
			t.Errorf("cluster %s: %v", c.GetName(), c.GetEndpoints())
		}
	}
}

// A GRPCRoute rule that references an ExtensionRef filter for HTTPRoute only fails with a
// condition that says so; the route's other rules serve.
func TestHTTPOnlyExtensionRef(t *testing.T) {
	dir := t.TempDir()
	manifest := `apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: coxswain}
spec: {controllerName: coxswain-labs.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: default}
spec:
  gatewayClassName: coxswain
  listeners: [{name: grpc, protocol: HTTP, port: 8080}]
---
apiVersion: gateway.coxswain-labs.dev/v1alpha1
kind: PathRewriteRegex
metadata: {name: rw, namespace: default}
spec: {pattern: ^/a, substitution: /b}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: echo, namespace: default}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{method: {service: pkg.Echo}}]
    backendRefs: [{name: h2c, port: 50051}]
  - matches: [{method: {service: pkg.Other}}]
    filters: [{type: ExtensionRef, extensionRef: {group: gateway.coxswain-labs.dev, kind: PathRewriteRegex, name: rw}}]
    backendRefs: [{name: h2c, port: 50051}]
---
apiVersion: v1
kind: Service
metadata: {name: h2c, namespace: default}
spec: {ports: [{port: 50051, appProtocol: kubernetes.io/h2c}]}
`
	if err := os.WriteFile(filepath.Join(dir, "m.yaml"), []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	reg := core.NewRegistry(grpctranslate.Kind{}, (*pathregex.PathRewriteRegex)(nil))
	res, err := standalone.Load(context.Background(), dir, reg)
	if err != nil || len(res.Errors) > 0 {
		t.Fatalf("load: %v %v", err, res.Err())
	}
	tr := translator.Translate(context.Background(), res.Store, translator.Options{Registry: reg})
	rs := tr.Routes.Get(translator.RouteKey{Group: gwapiv1.GroupName, Kind: "GRPCRoute", Namespace: "default", Name: "echo"})
	if rs == nil || len(rs.Parents) != 1 {
		t.Fatalf("route status %+v", rs)
	}
	var partial string
	for _, c := range rs.Parents[0].Conditions {
		if c.Type == string(gwapiv1.RouteConditionPartiallyInvalid) {
			partial = c.Message
		}
	}
	if !strings.Contains(partial, "PathRewriteRegex filters are not supported on GRPCRoute (only on HTTPRoute, Ingress)") {
		t.Errorf("PartiallyInvalid message %q, want it to say PathRewriteRegex is not supported on GRPCRoute", partial)
	}
	answers := map[string]bool{} // rule → answers an error
	for _, r := range tr.Snapshot.GetListeners()[0].GetServers()[0].GetVirtualHosts()[0].GetRoutes() {
		answers[r.GetName()] = r.GetBackends()[0].GetError() != ""
	}
	want := map[string]bool{"GRPCRoute/default/echo/rule/0/match/0": false, "GRPCRoute/default/echo/rule/1/match/0": true}
	if !maps.Equal(answers, want) {
		t.Errorf("routes answering an error %v, want %v", answers, want)
	}
}
