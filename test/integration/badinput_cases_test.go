package integration

import (
	"fmt"
	"strings"
)

// badCase is one kind of invalid object, made badCopies times (index k) by the bad-input test.
// Its yaml is a template: %[1]s the test namespace, %[2]s the other namespace (cross-namespace
// references nobody granted), %[3]d the copy's index and %[4]d a port of its own.
type badCase struct {
	name string
	kind string
	yaml string
	// want is what the controller must say about the object; refused instead means the API
	// server must refuse it (CRD validation) with a message naming refused.
	want    badWant
	refused string
}

// badWant is a condition the object's status must carry, False (Conflicted: True), with one of
// reasons and a message naming field; inStatus false for kinds without conditions, whose
// problem is looked for in /api/v1/problems (problems or, for what is ignored and served
// anyway, warnings) instead.
type badWant struct {
	reasons  []string
	field    string
	inStatus bool
	warning  bool
}

const badCopies = 4

// Ports of the bad-input test: the Gateway's own listeners, then a block for the Gateways that
// are broken on purpose (one port per copy).
const (
	badHTTPPort = 18920 + iota
	badTCPPort
	badUDPPort
	badTLSPort
	badIngressPort
	badIngressTLSPort
	badGatewayPorts = 18940
)

func routeHead(kind, name, section string) string {
	return fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: %s
metadata: {name: %s-%%[3]d, namespace: %%[1]s}
spec:
  parentRefs: [{name: gw, sectionName: %s}]
`, kind, name, section)
}

func badCond(reasons string, field string) badWant {
	return badWant{reasons: strings.Split(reasons, ","), field: field, inStatus: true}
}

var badCases = []badCase{
	{name: "bad-regex", kind: "HTTPRoute", yaml: routeHead("HTTPRoute", "bad-regex", "http") + `  hostnames: [bad-regex-%[3]d.bad.example]
  rules:
  - matches: [{path: {type: RegularExpression, value: "/bad/[("}}]
    backendRefs: [{name: web-0, port: 80}]
`, want: badCond("UnsupportedValue", "spec.rules[0].matches[0].path.value")},
	{name: "huge-regex", kind: "HTTPRoute", yaml: routeHead("HTTPRoute", "huge-regex", "http") + `  hostnames: [huge-regex-%[3]d.bad.example]
  rules:
  - matches: [{path: {type: RegularExpression, value: "/(x{1000}){1000}"}}]
    backendRefs: [{name: web-0, port: 80}]
`, want: badCond("UnsupportedValue", "spec.rules[0].matches[0].path.value")},
	{name: "bad-header-regex", kind: "HTTPRoute", yaml: routeHead("HTTPRoute", "bad-header-regex", "http") + `  hostnames: [bad-header-regex-%[3]d.bad.example]
  rules:
  - matches: [{headers: [{name: x, type: RegularExpression, value: "(("}]}]
    backendRefs: [{name: web-0, port: 80}]
`, want: badCond("UnsupportedValue", "spec.rules[0].matches[0].headers[0].value")},
	{name: "missing-service", kind: "HTTPRoute", yaml: routeHead("HTTPRoute", "missing-service", "http") + `  hostnames: [missing-service-%[3]d.bad.example]
  rules:
  - backendRefs: [{name: nosuch, port: 80}]
`, want: badCond("BackendNotFound", "spec.rules[0].backendRefs[0]")},
	{name: "ungranted-backend", kind: "HTTPRoute", yaml: routeHead("HTTPRoute", "ungranted-backend", "http") + `  hostnames: [ungranted-backend-%[3]d.bad.example]
  rules:
  - backendRefs: [{name: web-0, namespace: %[2]s, port: 80}]
`, want: badCond("RefNotPermitted", "spec.rules[0].backendRefs[0]")},
	{name: "unknown-filter-kind", kind: "HTTPRoute", yaml: routeHead("HTTPRoute", "unknown-filter-kind", "http") + `  hostnames: [unknown-filter-kind-%[3]d.bad.example]
  rules:
  - filters: [{type: ExtensionRef, extensionRef: {group: example.com, kind: Mystery, name: x}}]
    backendRefs: [{name: web-0, port: 80}]
`, want: badCond("InvalidKind", "spec.rules[0].filters[0].extensionRef")},
	{name: "missing-filter", kind: "HTTPRoute", yaml: routeHead("HTTPRoute", "missing-filter", "http") + `  hostnames: [missing-filter-%[3]d.bad.example]
  rules:
  - filters: [{type: ExtensionRef, extensionRef: {group: gateway.coxswain-labs.dev, kind: RateLimit, name: nosuch}}]
    backendRefs: [{name: spare-%[3]d, port: 80}] # served without the filter: the bad policies' targets are in use
`, want: badCond("FilterNotFound", "spec.rules[0].filters[0].extensionRef")},
	{name: "no-such-listener", kind: "HTTPRoute", yaml: routeHead("HTTPRoute", "no-such-listener", "nosuch") + `  rules:
  - backendRefs: [{name: web-0, port: 80}]
`, want: badWant{reasons: []string{"NoMatchingParent"}, field: "spec.parentRefs[0].sectionName", inStatus: true}},
	{name: "invalid-hostname", kind: "HTTPRoute", yaml: routeHead("HTTPRoute", "invalid-hostname", "http") + `  hostnames: ["Bad_Host..%[3]d.example"]
  rules:
  - backendRefs: [{name: web-0, port: 80}]
`, refused: "spec.hostnames[0]"},
	{name: "oversized-path", kind: "HTTPRoute", yaml: routeHead("HTTPRoute", "oversized-path", "http") + `  rules:
  - matches: [{path: {type: PathPrefix, value: "/` + strings.Repeat("x", 2000) + `"}}]
    backendRefs: [{name: web-0, port: 80}]
`, refused: "spec.rules[0].matches[0].path.value"},
	{name: "grpc-missing-service", kind: "GRPCRoute", yaml: routeHead("GRPCRoute", "grpc-missing-service", "http") + `  hostnames: [grpc-missing-service-%[3]d.bad.example]
  rules:
  - backendRefs: [{name: nosuch, port: 80}]
`, want: badCond("BackendNotFound", "spec.rules[0].backendRefs[0]")},
	{name: "grpc-ungranted", kind: "GRPCRoute", yaml: routeHead("GRPCRoute", "grpc-ungranted", "http") + `  hostnames: [grpc-ungranted-%[3]d.bad.example]
  rules:
  - backendRefs: [{name: web-0, namespace: %[2]s, port: 80}]
`, want: badCond("RefNotPermitted", "spec.rules[0].backendRefs[0]")},
	{name: "tcp-ungranted", kind: "TCPRoute", yaml: routeHead("TCPRoute", "tcp-ungranted", "tcp") + `  rules:
  - backendRefs: [{name: web-0, namespace: %[2]s, port: 80}]
`, want: badCond("RefNotPermitted", "spec.rules[0].backendRefs[0]")},
	{name: "udp-missing-service", kind: "UDPRoute", yaml: routeHead("UDPRoute", "udp-missing-service", "udp") + `  rules:
  - backendRefs: [{name: nosuch, port: 80}]
`, want: badCond("BackendNotFound", "spec.rules[0].backendRefs[0]")},
	{name: "tls-missing-service", kind: "TLSRoute", yaml: routeHead("TLSRoute", "tls-missing-service", "tls") + `  hostnames: [tls-missing-service-%[3]d.tls.example]
  rules:
  - backendRefs: [{name: nosuch, port: 443}]
`, want: badCond("BackendNotFound", "spec.rules[0].backendRefs[0]")},
	{name: "conflicting-listeners", kind: "Gateway", yaml: `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: conflicting-listeners-%[3]d, namespace: %[1]s}
spec:
  gatewayClassName: coxswain
  listeners:
  - {name: a, protocol: HTTP, port: %[4]d}
  - {name: b, protocol: TCP, port: %[4]d}
`, want: badWant{reasons: []string{"ProtocolConflict", "Invalid"}, field: "spec.listeners[0]", inStatus: true}},
	// (Two listeners of one port, protocol and hostname never reach the controller: the Gateway
	// CRD's own rule refuses them.)
	{name: "missing-certificate", kind: "Gateway", yaml: `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: missing-certificate-%[3]d, namespace: %[1]s}
spec:
  gatewayClassName: coxswain
  listeners:
  - {name: https, protocol: HTTPS, port: %[4]d, tls: {certificateRefs: [{name: nosuch}]}}
`, want: badWant{reasons: []string{"InvalidCertificateRef"}, field: "spec.listeners[0].tls.certificateRefs[0]", inStatus: true}},
	{name: "ungranted-certificate", kind: "Gateway", yaml: `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: ungranted-certificate-%[3]d, namespace: %[1]s}
spec:
  gatewayClassName: coxswain
  listeners:
  - {name: https, protocol: HTTPS, port: %[4]d, tls: {certificateRefs: [{name: c, namespace: %[2]s}]}}
`, want: badWant{reasons: []string{"RefNotPermitted"}, field: "spec.listeners[0].tls.certificateRefs[0]", inStatus: true}},
	{name: "listenerset-conflict", kind: "ListenerSet", yaml: `apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {name: listenerset-conflict-%[3]d, namespace: %[1]s}
spec:
  parentRef: {name: gw}
  listeners:
  - {name: http, protocol: HTTP, port: ` + fmt.Sprint(badHTTPPort) + `}
`, want: badWant{reasons: []string{"HostnameConflict", "ListenersNotValid"}, field: "spec.listeners[0]", inStatus: true}},
	{name: "backend-policy-missing-target", kind: "CoxswainBackendPolicy", yaml: `apiVersion: gateway.coxswain-labs.dev/v1alpha1
kind: CoxswainBackendPolicy
metadata: {name: backend-policy-missing-target-%[3]d, namespace: %[1]s}
spec:
  targetRefs: [{group: "", kind: Service, name: nosuch-%[3]d}]
  loadBalancer: {algorithm: round_robin}
`, want: badWant{reasons: []string{"TargetNotFound"}, field: "spec.targetRefs[0]", inStatus: true}},
	{name: "backend-policy-bad-values", kind: "CoxswainBackendPolicy", yaml: `apiVersion: gateway.coxswain-labs.dev/v1alpha1
kind: CoxswainBackendPolicy
metadata: {name: backend-policy-bad-values-%[3]d, namespace: %[1]s}
spec:
  targetRefs: [{group: "", kind: Service, name: spare-%[3]d}]
  timeouts: {connect: 5 seconds}
  loadBalancer: {algorithm: fastest}
`, want: badWant{field: "spec.loadBalancer.algorithm", warning: true}},
	{name: "client-traffic-missing-listener", kind: "ClientTrafficPolicy", yaml: `apiVersion: gateway.coxswain-labs.dev/v1alpha1
kind: ClientTrafficPolicy
metadata: {name: client-traffic-missing-listener-%[3]d, namespace: %[1]s}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: gw, sectionName: nosuch-%[3]d}]
  clientIPDetection: {xForwardedFor: {numTrustedHops: 1}}
`, want: badWant{reasons: []string{"TargetNotFound"}, field: "spec.targetRefs[0].sectionName", inStatus: true}},
	{name: "backend-tls-missing-ca", kind: "BackendTLSPolicy", yaml: `apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: backend-tls-missing-ca-%[3]d, namespace: %[1]s}
spec:
  targetRefs: [{group: "", kind: Service, name: spare-%[3]d}]
  validation:
    caCertificateRefs: [{group: "", kind: ConfigMap, name: nosuch}]
    hostname: spare.example
`, want: badWant{reasons: []string{"InvalidCACertificateRef", "NoValidCACertificate"}, field: "caCertificateRefs[0]", inStatus: true}},
	{name: "ratelimit-bad-value", kind: "RateLimit", yaml: `apiVersion: gateway.coxswain-labs.dev/v1alpha1
kind: RateLimit
metadata: {name: ratelimit-bad-value-%[3]d, namespace: %[1]s}
spec: {requests: 0, unit: Minute}
`, refused: "spec.requests"},
	{name: "ingress-bad-annotations", kind: "Ingress", yaml: `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: ingress-bad-annotations-%[3]d
  namespace: %[1]s
  annotations:
    ingress.coxswain-labs.dev/read-timeout: soon
spec:
  ingressClassName: coxswain-badin
  rules:
  - host: ingress-bad-annotations-%[3]d.bad.example
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web-0, port: {number: 80}}}}
`, want: badWant{field: "metadata.annotations[ingress.coxswain-labs.dev/read-timeout]", warning: true}},
}
