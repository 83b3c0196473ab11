package translate_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

func clusterNamed(snap *irv1.Snapshot, name string) *irv1.Cluster {
	for _, c := range snap.Clusters {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func backendCluster(t *testing.T, snap *irv1.Snapshot, route string) *irv1.Cluster {
	t.Helper()
	r := routeNamed(snap, 80, route)
	if r == nil || len(r.Backends) != 1 {
		t.Fatalf("route %s: %v", route, r)
	}
	c := clusterNamed(snap, r.Backends[0].Cluster)
	if c == nil {
		t.Fatalf("route %s: no cluster %q", route, r.Backends[0].Cluster)
	}
	return c
}

const onePath = `  ingressClassName: coxswain
  rules: [{http: {paths: [{path: /p, pathType: Prefix, backend: {service: {name: s, port: {number: 80}}}}]}}]`

// TestLoadBalanceAndConnectTimeout: the annotations make a variant of the Service port's cluster
// with the algorithm and the connect timeout; another Ingress to the same Service keeps the plain
// cluster.
func TestLoadBalanceAndConnectTimeout(t *testing.T) {
	res := translate(t, class+services("s")+
		ingressYAML("a", `ingress.coxswain-labs.dev/load-balance: "hash:header=x-user", ingress.coxswain-labs.dev/connect-timeout: 2s`, onePath)+
		ingressYAML("b", ``, strings.ReplaceAll(onePath, "/p", "/q")))
	if p := problems(res); p != "" {
		t.Fatalf("problems: %s", p)
	}
	a := backendCluster(t, res.Snapshot, "Ingress/default/a/rule/0/match/0")
	if a.Name != "default/s:80/with=lb=hash:header=x-user,connect=2000ms" || a.ConnectTimeoutMs != 2000 ||
		a.GetBalancer().GetId() != "lb.hash" || !strings.Contains(string(a.GetBalancer().GetJson()), `"x-user"`) {
		t.Errorf("cluster of a: %v", a)
	}
	if len(a.Endpoints) != 1 {
		t.Errorf("variant cluster endpoints: %v", a.Endpoints)
	}
	b := backendCluster(t, res.Snapshot, "Ingress/default/b/rule/0/match/0")
	if b.Name != "default/s:80" || b.ConnectTimeoutMs != 0 || b.Balancer != nil {
		t.Errorf("cluster of b: %v", b)
	}
}

// TestLoadBalanceInvalid: an unknown algorithm or a bad duration is a warning naming the
// annotation, and the Ingress keeps serving with the plain cluster (fail open).
func TestLoadBalanceInvalid(t *testing.T) {
	res := translate(t, class+services("s")+
		ingressYAML("a", `ingress.coxswain-labs.dev/load-balance: fastest, ingress.coxswain-labs.dev/connect-timeout: soon`, onePath))
	p := problems(res)
	for _, a := range []string{"load-balance", "connect-timeout"} {
		if !strings.Contains(p, "metadata.annotations[ingress.coxswain-labs.dev/"+a+"]") {
			t.Errorf("no warning names %s:\n%s", a, p)
		}
	}
	if c := backendCluster(t, res.Snapshot, "Ingress/default/a/rule/0/match/0"); c.Name != "default/s:80" || c.Balancer != nil {
		t.Errorf("cluster: %v", c)
	}
}

// TestBackendPolicyWins: a CoxswainBackendPolicy on the Service that sets the algorithm and the
// connect timeout applies, and the Ingress is told its annotations are not.
func TestBackendPolicyWins(t *testing.T) {
	res := translate(t, class+services("s")+`apiVersion: gateway.coxswain-labs.dev/v1alpha1
kind: CoxswainBackendPolicy
metadata: {name: s}
spec:
  targetRefs: [{group: "", kind: Service, name: s}]
  timeouts: {connect: 500ms}
  loadBalancer: {algorithm: least_conn}
---
`+ingressYAML("a", `ingress.coxswain-labs.dev/load-balance: ewma, ingress.coxswain-labs.dev/connect-timeout: 2s`, onePath))
	p := problems(res)
	for _, a := range []string{"load-balance", "connect-timeout"} {
		if !strings.Contains(p, "metadata.annotations[ingress.coxswain-labs.dev/"+a+"]: CoxswainBackendPolicy default/s sets") {
			t.Errorf("no warning names %s:\n%s", a, p)
		}
	}
	c := backendCluster(t, res.Snapshot, "Ingress/default/a/rule/0/match/0")
	if c.Name != "default/s:80" || c.GetBalancer().GetId() != "lb.least_conn" || c.ConnectTimeoutMs != 500 {
		t.Errorf("cluster: %v", c)
	}
}

// TestAuthTLSFailsClosed: an auth-tls-secret that gives no CA closes every path of the Ingress
// (503, a warning naming the annotation); a usable one puts the Ingress's TLS host on a Gateway
// of its own whose frontend validation names the Secret.
func TestAuthTLSFailsClosed(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "ingress", "client-tls.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	res := translate(t, class+services("api")+string(b)+"\n---\n"+ingressYAML("gone", `ingress.coxswain-labs.dev/auth-tls-secret: nothing-here`, `  ingressClassName: coxswain
  tls: [{hosts: [gone.example.com], secretName: mtls-tls}]
  rules: [{host: gone.example.com, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: api, port: {number: 80}}}}]}}]`))
	p := problems(res)
	if !strings.Contains(p, "Ingress default/gone: metadata.annotations[ingress.coxswain-labs.dev/auth-tls-secret]: Secret default/nothing-here of auth-tls-secret does not exist") {
		t.Errorf("no warning for the missing Secret:\n%s", p)
	}
	if strings.Contains(p, "Ingress default/mtls") {
		t.Errorf("the usable one is warned about:\n%s", p)
	}
	var mtlsServer *irv1.Server
	for _, l := range res.Snapshot.Listeners {
		for _, s := range l.Servers {
			for _, vh := range s.VirtualHosts {
				for _, r := range vh.Routes {
					if strings.HasPrefix(r.Name, "Ingress/default/gone/") && (len(r.Backends) != 1 || r.Backends[0].Cluster != "" && !strings.Contains(filterIDs(r), `"closed"`)) {
						t.Errorf("%s on %s serves: %v", r.Name, l.Name, r)
					}
				}
			}
			if s.Hostname == "mtls.example.com" {
				mtlsServer = s
			}
		}
	}
	if mtlsServer == nil || len(mtlsServer.GetTls().GetClientValidation().GetCaPem()) == 0 {
		t.Fatalf("mtls.example.com has no client validation: %v", mtlsServer)
	}
}

// TestAuthTLSVerifyDepthAndCertificate: auth-tls-verify-depth and
// auth-tls-pass-certificate-to-upstream reach the IR client validation of the Ingress's TLS host
// (an implicit Gateway of their own, apart from the same CA without them); an invalid value closes
// the Ingress with a warning naming the annotation; either without auth-tls-secret is reported.
func TestAuthTLSVerifyDepthAndCertificate(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "ingress", "client-tls.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ing := func(name, ann string) string {
		return "\n---\n" + ingressYAML(name, ann, `  ingressClassName: coxswain
  tls: [{hosts: [`+name+`.example.com], secretName: mtls-tls}]
  rules: [{host: `+name+`.example.com, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: api, port: {number: 80}}}}]}}]`)
	}
	const secret = `ingress.coxswain-labs.dev/auth-tls-secret: mtls-tls, `
	res := translate(t, class+services("api")+string(b)+
		ing("deep", secret+`ingress.coxswain-labs.dev/auth-tls-verify-depth: "2", ingress.coxswain-labs.dev/auth-tls-pass-certificate-to-upstream: "true"`)+
		ing("zero", secret+`ingress.coxswain-labs.dev/auth-tls-verify-depth: "0"`)+
		ing("word", secret+`ingress.coxswain-labs.dev/auth-tls-pass-certificate-to-upstream: "yes"`)+
		ing("alone", `ingress.coxswain-labs.dev/auth-tls-verify-depth: "1"`)+
		ing("plain", `ingress.coxswain-labs.dev/auth-tls-secret: mtls-tls`))
	p := problems(res)
	for _, want := range []string{
		`Ingress default/zero: metadata.annotations[ingress.coxswain-labs.dev/auth-tls-verify-depth]: auth-tls-verify-depth "0" is not an integer of at least 1: its paths there answer 503`,
		`Ingress default/word: metadata.annotations[ingress.coxswain-labs.dev/auth-tls-pass-certificate-to-upstream]: auth-tls-pass-certificate-to-upstream "yes" is not true or false: its paths there answer 503`,
		`Ingress default/alone: metadata.annotations[ingress.coxswain-labs.dev/auth-tls-verify-depth]: invalid annotation, ignored: needs ingress.coxswain-labs.dev/auth-tls-secret`,
	} {
		if !strings.Contains(p, want) {
			t.Errorf("missing %q in:\n%s", want, p)
		}
	}
	if strings.Contains(p, "Ingress default/deep") || strings.Contains(p, "Ingress default/mtls") || strings.Contains(p, "Ingress default/plain") {
		t.Errorf("a valid one is warned about:\n%s", p)
	}
	servers := map[string]*irv1.Server{}
	for _, l := range res.Snapshot.Listeners {
		for _, s := range l.Servers {
			servers[s.Hostname] = s
			for _, vh := range s.VirtualHosts {
				for _, r := range vh.Routes {
					closed := len(r.Backends) == 1 && r.Backends[0].Cluster == "" || strings.Contains(filterIDs(r), `"closed"`)
					bad := strings.HasPrefix(r.Name, "Ingress/default/zero/") || strings.HasPrefix(r.Name, "Ingress/default/word/")
					if bad && !closed {
						t.Errorf("%s on %s serves: %v", r.Name, l.Name, r)
					}
					if strings.HasPrefix(r.Name, "Ingress/default/deep/") && l.Protocol == "HTTPS" && closed {
						t.Errorf("%s on %s is closed: %v", r.Name, l.Name, r)
					}
				}
			}
		}
	}
	deep := servers["deep.example.com"].GetTls().GetClientValidation()
	if len(deep.GetCaPem()) == 0 || deep.GetVerifyDepth() != 2 || deep.GetCertificateHeader() != "ssl-client-cert" {
		t.Errorf("deep.example.com validation: %v", deep)
	}
	mtls := servers["mtls.example.com"].GetTls().GetClientValidation() // the example: depth 1
	if len(mtls.GetCaPem()) == 0 || mtls.GetVerifyDepth() != 1 || mtls.GetCertificateHeader() != "ssl-client-cert" {
		t.Errorf("mtls.example.com validation: %v", mtls)
	}
	plain := servers["plain.example.com"].GetTls().GetClientValidation()
	if len(plain.GetCaPem()) == 0 || plain.GetVerifyDepth() != 0 || plain.GetCertificateHeader() != "" {
		t.Errorf("plain.example.com validation (same CA, no options): %v", plain)
	}
}
