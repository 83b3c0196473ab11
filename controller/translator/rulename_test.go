package translator_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/coxswain-labs/coxswain/controller/standalone"
	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/core"
	httptranslate "github.com/coxswain-labs/coxswain/modules/httproute/translate"
	"github.com/coxswain-labs/coxswain/modules/lb/roundrobin"
	tcptranslate "github.com/coxswain-labs/coxswain/modules/tcproute/translate"
	udptranslate "github.com/coxswain-labs/coxswain/modules/udproute/translate"
)

// TestRuleNames: the name of an HTTPRoute rule reaches the IR routes of each of its matches, and
// the name of the one rule of a TCPRoute or UDPRoute reaches its IR route, as Route.rule_name;
// an unnamed rule has none.
func TestRuleNames(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "routes.yaml")
	if err := os.WriteFile(in, []byte(`apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: coxswain}
spec: {controllerName: coxswain-labs.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: coxswain
  listeners:
  - {name: http, port: 8080, protocol: HTTP}
  - {name: tcp, port: 5432, protocol: TCP}
  - {name: udp, port: 5353, protocol: UDP}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web}
spec:
  parentRefs: [{name: gw, sectionName: http}]
  rules:
  - name: api
    matches: [{path: {value: /api}}, {path: {value: /v2}}]
    backendRefs: [{name: web, port: 80}]
  - backendRefs: [{name: web, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TCPRoute
metadata: {name: pg}
spec:
  parentRefs: [{name: gw, sectionName: tcp}]
  rules:
  - name: postgres
    backendRefs: [{name: web, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: UDPRoute
metadata: {name: dns}
spec:
  parentRefs: [{name: gw, sectionName: udp}]
  rules:
  - name: resolver
    backendRefs: [{name: web, port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec: {ports: [{name: http, port: 80}]}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	reg := core.NewRegistry(httptranslate.Kind{}, tcptranslate.Kind, udptranslate.Kind, &roundrobin.RoundRobin{})
	loaded, err := standalone.Load(context.Background(), in, reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range loaded.Errors {
		t.Errorf("load: %v", e)
	}
	res := translator.Translate(context.Background(), loaded.Store, translator.Options{Registry: reg})
	got := map[string]string{}
	for _, l := range res.Snapshot.GetListeners() {
		for _, s := range l.GetServers() {
			for _, vh := range s.GetVirtualHosts() {
				for _, r := range vh.GetRoutes() {
					got[r.GetName()] = r.GetRuleName()
				}
			}
		}
	}
	want := map[string]string{
		"HTTPRoute/default/web/rule/0/match/0": "api",
		"HTTPRoute/default/web/rule/0/match/1": "api",
		"HTTPRoute/default/web/rule/1/match/0": "",
		"TCPRoute/default/pg/rule/0/match/0":   "postgres",
		"UDPRoute/default/dns/rule/0/match/0":  "resolver",
	}
	for name, rule := range want {
		if r, ok := got[name]; !ok || r != rule {
			t.Errorf("route %s: rule name %q (present %t), want %q; all: %v", name, r, ok, rule, got)
		}
	}
}
