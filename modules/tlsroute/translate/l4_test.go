package translate_test

import (
	"context"
	"fmt"
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
	httptranslate "github.com/coxswain-labs/coxswain/modules/httproute/translate"
	tcptranslate "github.com/coxswain-labs/coxswain/modules/tcproute/translate"
	tlstranslate "github.com/coxswain-labs/coxswain/modules/tlsroute/translate"
	udptranslate "github.com/coxswain-labs/coxswain/modules/udproute/translate"
)

// translateL4 loads testdata/l4.yaml as `coxswain serve` would and translates it with the
// HTTPRoute and layer-4 kinds.
func translateL4(t *testing.T) *translator.Result {
	t.Helper()
	res, err := standalone.Load(context.Background(), "testdata/l4.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Errors) > 0 {
		t.Fatalf("load errors: %v", res.Err())
	}
	reg := core.NewRegistry(httptranslate.Kind{}, tcptranslate.Kind, tlstranslate.Kind, udptranslate.Kind)
	return translator.Translate(context.Background(), res.Store, translator.Options{Registry: reg})
}

// snapshotView renders the snapshot's listeners as "name: server(mode) vhost→routes→backends"
// lines and its clusters as "name protocol endpoints".
func snapshotView(s *irv1.Snapshot) []string {
	var out []string
	for _, l := range s.GetListeners() {
		for _, srv := range l.GetServers() {
			mode := "plain"
			if srv.GetTls() != nil {
				mode = srv.GetTls().GetMode().String()
			}
			if len(srv.GetVirtualHosts()) == 0 {
				out = append(out, fmt.Sprintf("%s: %q %s (no routes)", l.GetName(), srv.GetHostname(), mode))
			}
			for _, vh := range srv.GetVirtualHosts() {
				var rs []string
				for _, r := range vh.GetRoutes() {
					var bs []string
					for _, b := range r.GetBackends() {
						bs = append(bs, fmt.Sprintf("%s*%d", b.GetCluster(), b.GetWeight()))
					}
					rs = append(rs, r.GetMatch().GetId()+" "+r.GetName()+" ["+strings.Join(bs, " ")+"]")
				}
				out = append(out, fmt.Sprintf("%s: %q %s %q -> %s", l.GetName(), srv.GetHostname(), mode, vh.GetHostname(), strings.Join(rs, "; ")))
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

func TestL4Snapshot(t *testing.T) {
	got := snapshotView(translateL4(t).Snapshot)
	want := []string{
		`:53/TCP: "" plain "" -> route.tcp TCPRoute/default/dns/rule/0/match/0 [default/dns:53/tcp*1]`,
		`:53/UDP: "" plain "" -> route.udp UDPRoute/default/dns/rule/0/match/0 [default/dns:53/udp*1]`,
		`:8443/TLS: "term.example.org" TERMINATE "term.example.org" -> route.tls TLSRoute/default/term/rule/0/match/0 [default/app:9000/tcp*1]`,
		`:8443/TLS: "*.example.com" PASSTHROUGH "a.example.com" -> route.tls TLSRoute/default/a/rule/0/match/0 [default/app:9000/tcp*1]`,
		`:8443/TLS: "*.example.com" PASSTHROUGH "*.example.com" -> route.tls TLSRoute/default/a-again/rule/0/match/0 [default/app:9000/tcp*1]`,
		`:9000/TCP: "" plain "" -> route.tcp TCPRoute/default/tcp-older/rule/0/match/0 [default/app:9000/tcp*3 *1]`,
		`:9443/TLS: "" PASSTHROUGH (no routes)`,
		`cluster default/app:9000/tcp TCP [10.0.0.1:19000]`,
		`cluster default/dns:53/tcp TCP [10.0.0.2:1053]`,
		`cluster default/dns:53/udp UDP [10.0.0.2:2053]`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("snapshot:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestL4Status(t *testing.T) {
	res := translateL4(t)
	route := func(kind, name string) []string {
		st := res.Routes.Get(translator.RouteKey{Group: gwapiv1.GroupName, Kind: kind, Namespace: "default", Name: name})
		if st == nil || len(st.Parents) != 1 {
			t.Fatalf("%s %s: status %v", kind, name, st)
		}
		var out []string
		for _, c := range st.Parents[0].Conditions {
			out = append(out, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
		}
		return out
	}
	routeCases := []struct {
		kind, name string
		want       []string
	}{
		{"TCPRoute", "tcp-older", []string{"Accepted=True/Accepted", "ResolvedRefs=False/BackendNotFound"}},
		{"TCPRoute", "tcp-newer", []string{"Accepted=True/Accepted", "ResolvedRefs=True/ResolvedRefs", "Conflicted=True/ShadowedByOlderRoute"}},
		{"TCPRoute", "tcp-on-tls", []string{"Accepted=False/NotAllowedByListeners", "ResolvedRefs=True/ResolvedRefs"}},
		{"TLSRoute", "a", []string{"Accepted=True/Accepted", "ResolvedRefs=True/ResolvedRefs"}},
		{"TLSRoute", "a-again", []string{"Accepted=True/Accepted", "ResolvedRefs=True/ResolvedRefs", "Conflicted=True/ShadowedByOlderRoute"}},
		{"TLSRoute", "term", []string{"Accepted=True/Accepted", "ResolvedRefs=True/ResolvedRefs"}},
		{"UDPRoute", "dns", []string{"Accepted=True/Accepted", "ResolvedRefs=True/ResolvedRefs", "PartiallyInvalid=True/UnsupportedValue"}},
		{"TCPRoute", "dns", []string{"Accepted=True/Accepted", "ResolvedRefs=True/ResolvedRefs"}},
	}
	for _, tc := range routeCases {
		t.Run(tc.kind+"/"+tc.name, func(t *testing.T) {
			if got := route(tc.kind, tc.name); !slices.Equal(got, tc.want) {
				t.Errorf("conditions %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("the shadowed TLSRoute says which hostname it lost", func(t *testing.T) {
		st := res.Routes.Get(translator.RouteKey{Group: gwapiv1.GroupName, Kind: "TLSRoute", Namespace: "default", Name: "a-again"})
		msg := st.Parents[0].Conditions[2].Message
		if !strings.Contains(msg, `TLSRoute default/a is older and serves hostname "a.example.com"`) {
			t.Errorf("message %q", msg)
		}
	})

	gw := res.Gateways[types.NamespacedName{Namespace: "default", Name: "gw"}]
	listeners := map[string]gwapiv1.ListenerStatus{}
	for _, l := range gw.Listeners {
		listeners[string(l.Name)] = l
	}
	listenerCases := []struct {
		name     string
		kinds    []string
		attached int32
		conds    map[string]string // type → status/reason
	}{
		{"tcp", []string{"TCPRoute"}, 2, map[string]string{"Accepted": "True/Accepted", "Programmed": "True/Programmed"}},
		{"pass", []string{"TLSRoute"}, 2, map[string]string{"Accepted": "True/Accepted", "Conflicted": "False/NoConflicts"}},
		{"term", []string{"TLSRoute"}, 1, map[string]string{"Accepted": "True/Accepted", "Programmed": "True/Programmed"}},
		{"https", []string{"HTTPRoute"}, 0, map[string]string{"Accepted": "False/Invalid", "Conflicted": "True/ProtocolConflict"}},
		{"tls-on-https-port", []string{"TLSRoute"}, 0, map[string]string{"Conflicted": "True/ProtocolConflict"}},
		{"kinds", []string{"TLSRoute"}, 0, map[string]string{"Accepted": "True/Accepted", "ResolvedRefs": "False/InvalidRouteKinds"}},
		{"dns-udp", []string{"UDPRoute"}, 1, map[string]string{"Accepted": "True/Accepted"}},
		{"dns-tcp", []string{"TCPRoute"}, 1, map[string]string{"Accepted": "True/Accepted"}},
	}
	for _, tc := range listenerCases {
		t.Run("listener "+tc.name, func(t *testing.T) {
			l, ok := listeners[tc.name]
			if !ok {
				t.Fatal("no status")
			}
			var kinds []string
			for _, k := range l.SupportedKinds {
				kinds = append(kinds, string(k.Kind))
			}
			if !slices.Equal(kinds, tc.kinds) || l.AttachedRoutes != tc.attached {
				t.Errorf("supportedKinds %v attachedRoutes %d, want %v %d", kinds, l.AttachedRoutes, tc.kinds, tc.attached)
			}
			for _, c := range l.Conditions {
				if want, ok := tc.conds[c.Type]; ok && want != string(c.Status)+"/"+c.Reason {
					t.Errorf("%s=%s/%s, want %s", c.Type, c.Status, c.Reason, want)
				}
			}
		})
	}
}

func TestL4Features(t *testing.T) {
	reg := core.NewRegistry(tcptranslate.Kind, tlstranslate.Kind, udptranslate.Kind)
	if got := features.Supported(reg); len(got) != 0 {
		t.Errorf("features without the proxy modules: %v", got)
	}
	full := core.NewRegistry(tcptranslate.Kind, tlstranslate.Kind, udptranslate.Kind,
		module("route.tcp"), module("route.tls"), module("route.udp"),
		module("listener.tcp"), module("listener.tls"), module("listener.udp"))
	var names []string
	for _, f := range features.Supported(full) {
		names = append(names, string(f.Name))
	}
	want := []string{"TCPRoute", "TLSRoute", "TLSRouteModeMixed", "TLSRouteModeTerminate", "UDPRoute"}
	if !slices.Equal(names, want) {
		t.Errorf("features %v, want %v", names, want)
	}
}

// module is a stand-in for a proxy module of the given ID: features only look at IDs.
type module core.ModuleID

func (m module) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: core.ModuleID(m), New: func() core.Module { return m }}
}
