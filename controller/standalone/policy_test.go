package standalone

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

const policyFiles = `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: coxswain
  listeners: [{name: http, port: 8080, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: api, port: 80}]}]
---
apiVersion: v1
kind: Service
metadata: {name: api}
spec: {ports: [{port: 80}]}
`

const policyDocs = `apiVersion: gateway.coxswain-labs.dev/v1alpha1
kind: CoxswainBackendPolicy
metadata: {name: first, creationTimestamp: "2024-01-01T00:00:00Z"}
spec:
  targetRefs: [{group: "", kind: Service, name: api}]
  loadBalancer: {algorithm: fastest}
---
apiVersion: gateway.coxswain-labs.dev/v1alpha1
kind: CoxswainBackendPolicy
metadata: {name: second, creationTimestamp: "2024-02-01T00:00:00Z"}
spec:
  targetRefs:
  - {group: "", kind: Service, name: api}
  - {group: "", kind: Service, name: nope}
---
apiVersion: gateway.coxswain-labs.dev/v1alpha1
kind: CoxswainBackendPolicy
metadata: {name: typo}
spec:
  targetRefs: [{group: "", kind: Service, name: api}]
  timeout: {connect: 1s}
`

// TestPolicyReport: what a standalone user sees of policies. A Conflicted policy and a missing
// target are failures in the report (so `validate` fails) and problems in the log with their
// file; an ignored field is a warning in both; a field the schema does not have leaves the
// document out, as the API server would refuse it.
func TestPolicyReport(t *testing.T) {
	dir := writeFiles(t, map[string]string{"class.yaml": classDoc, "app.yaml": policyFiles, "policies.yaml": policyDocs})
	core, logs := observer.New(zapcore.InfoLevel)
	r := NewRunner(Options{Path: dir, Log: zap.New(core), Engine: &recordingEngine{}})
	must(t, r.Reload(context.Background()))
	rep := r.State().Report

	if len(rep.LoadErrors) != 1 || rep.LoadErrors[0].Object.Name != "typo" || rep.LoadErrors[0].Reason != ReasonUnknownField {
		t.Errorf("load errors %v, want the typo policy's unknown field", rep.LoadErrors)
	}
	if len(rep.Policies) != 2 || rep.Policies[0].Kind != "CoxswainBackendPolicy" || rep.Policies[0].Name != "first" ||
		!strings.HasSuffix(rep.Policies[0].Source, "policies.yaml:1 (document 1)") {
		t.Fatalf("policies %+v", rep.Policies)
	}
	if st := rep.Policies[1].Status.(*gwapiv1.PolicyStatus); len(st.Ancestors) != 2 {
		t.Errorf("second's status %+v", st)
	}
	failures := strings.Join(rep.Failures, "\n")
	for _, want := range []string{
		"CoxswainBackendPolicy default/second for Service default/api: Accepted=False (Conflicted): CoxswainBackendPolicy default/first is older",
		"CoxswainBackendPolicy default/second for Service default/nope: Accepted=False (TargetNotFound): spec.targetRefs[1]: Service default/nope does not exist",
	} {
		if !strings.Contains(failures, want) {
			t.Errorf("failures\n%s\nlack %q", failures, want)
		}
	}
	if !rep.HasErrors() {
		t.Error("a conflicted policy must make the report fail")
	}
	if len(rep.Warnings) != 1 || rep.Warnings[0].Field != "spec.loadBalancer.algorithm" || !strings.Contains(rep.Warnings[0].Source, "policies.yaml") {
		t.Errorf("warnings %+v", rep.Warnings)
	}

	logged := func(msg, contains string) bool {
		for _, e := range logs.FilterMessage(msg).All() {
			for _, f := range e.Context {
				if strings.Contains(f.String, contains) {
					return true
				}
			}
		}
		return false
	}
	if !logged("invalid configuration", "CoxswainBackendPolicy default/first is older") {
		t.Error("the conflict is not logged")
	}
	if !logged("invalid configuration", "Service default/nope does not exist") {
		t.Error("the missing target is not logged")
	}
	if !logged("accepted with a warning", `unknown algorithm "fastest"`) {
		t.Error("the ignored algorithm is not logged")
	}
}

const clientTrafficDocs = `apiVersion: gateway.coxswain-labs.dev/v1alpha1
kind: ClientTrafficPolicy
metadata: {name: edge, creationTimestamp: "2024-01-01T00:00:00Z"}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw}]
  proxyProtocol: {enabled: true, versions: [V2]}
  clientIPDetection: {xForwardedFor: {numTrustedHops: 1}}
---
apiVersion: gateway.coxswain-labs.dev/v1alpha1
kind: ClientTrafficPolicy
metadata: {name: late, creationTimestamp: "2024-02-01T00:00:00Z"}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw}]
  proxyProtocol: {enabled: true}
`

// TestClientTrafficPolicyReport: `serve` and `validate` read ClientTrafficPolicy; the socket takes
// the older policy's settings and the newer one is a failure naming it.
func TestClientTrafficPolicyReport(t *testing.T) {
	dir := writeFiles(t, map[string]string{"class.yaml": classDoc, "app.yaml": policyFiles, "ctp.yaml": clientTrafficDocs})
	eng := &recordingEngine{}
	r := NewRunner(Options{Path: dir, Log: zap.NewNop(), Engine: eng})
	must(t, r.Reload(context.Background()))
	rep := r.State().Report
	if len(rep.LoadErrors) != 0 || len(rep.Policies) != 2 || rep.Policies[0].Name != "edge" {
		t.Fatalf("load errors %v, policies %+v", rep.LoadErrors, rep.Policies)
	}
	failures := strings.Join(rep.Failures, "\n")
	if want := "ClientTrafficPolicy default/late for Gateway default/gw: Accepted=False (Conflicted): ClientTrafficPolicy default/edge is older"; !strings.Contains(failures, want) {
		t.Errorf("failures\n%s\nlack %q", failures, want)
	}
	snap := r.State().snap
	if snap == nil || len(snap.GetListeners()) != 1 {
		t.Fatalf("snapshot %v", snap)
	}
	l := snap.GetListeners()[0]
	if !l.GetProxyProtocol().GetV2() || l.GetProxyProtocol().GetV1() || l.GetClientIpDetection().GetXffNumTrustedHops() != 1 {
		t.Errorf("listener %v, want PROXY v2 and 1 trusted hop", l)
	}
}
