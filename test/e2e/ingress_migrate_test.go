package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestIngressMigrate runs `coxswain validate -o gateway-api` on the basic Ingress example, serves
// what it prints (with the same backends and Secret, without the Ingress) and checks that every
// request the Ingress answered is answered alike — except the one difference the output notes: a
// Gateway API wildcard matches two labels too.
func TestIngressMigrate(t *testing.T) {
	httpPort, httpsPort := freePort(t), freePort(t)
	gwPort, gwTLSPort := freePort(t), freePort(t) // the converted Gateway's, so both serve at once
	ports := map[string]int{}
	for i, n := range []string{"api", "exact", "wild", "default"} {
		ports["port: "+strconv.Itoa(9101+i)] = startBackend(t, n).port
	}
	all := exampleFiles(t, "ingress", ports)
	in := map[string]string{}
	for _, f := range []string{"ingress.yaml", "backends.yaml", "tls-secret.yaml"} {
		in[f] = all[f]
	}
	dir := t.TempDir()
	for name, content := range in {
		writeFile(t, dir+"/"+name, content)
	}
	addrs := []string{"--ingress-http-address", fmt.Sprintf("127.0.0.1:%d", httpPort), "--ingress-https-address", fmt.Sprintf("127.0.0.1:%d", httpsPort)}
	out, errOut, code := runCLI(t, "validate", "-f", dir, "-o", "gateway-api",
		"--ingress-http-address", fmt.Sprintf("127.0.0.1:%d", gwPort), "--ingress-https-address", fmt.Sprintf("127.0.0.1:%d", gwTLSPort))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, `note: Ingress default/app: host "*.example.com": a Gateway API wildcard matches any number of labels`) {
		t.Errorf("no note on the wildcard:\n%s", errOut)
	}
	if strings.Contains(out, "kind: Ingress\n") {
		t.Fatalf("the output holds an Ingress:\n%s", out)
	}

	requests := []struct{ host, path string }{
		{"app.example.com", "/api"}, {"app.example.com", "/api/v1"}, {"app.example.com", "/apix"},
		{"app.example.com", "/exact"}, {"app.example.com", "/exact/x"}, {"a.example.com", "/anything"},
		{"other.test", "/"}, {"a.b.example.com", "/anything"},
	}
	answers := func(base string) map[string]string {
		got := map[string]string{}
		for _, r := range requests {
			eventually(t, 10*time.Second, r.host+r.path, func() error {
				res, err := do(context.Background(), noRedirect, request{url: base + r.path, host: r.host})
				if err != nil {
					return err
				}
				if res.echo == nil {
					return fmt.Errorf("status %d: %s", res.code, res.body)
				}
				got[r.host+r.path] = res.echo.Backend + " x-from=" + strings.Join(res.echo.Headers["X-From"], ",")
				return nil
			})
		}
		return got
	}
	startServe(t, in, addrs...)
	ingress := answers(fmt.Sprintf("http://127.0.0.1:%d", httpPort))

	class := "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: coxswain}\nspec: {controllerName: coxswain-labs.dev/gateway-controller}\n"
	startServe(t, map[string]string{"class.yaml": class, "routes.yaml": out, "backends.yaml": in["backends.yaml"], "tls-secret.yaml": in["tls-secret.yaml"]})
	gatewayAPI := answers(fmt.Sprintf("http://127.0.0.1:%d", gwPort))
	for _, r := range requests {
		k := r.host + r.path
		want := ingress[k]
		if k == "a.b.example.com/anything" {
			want = "wild x-from=ingress" // the noted difference: the Gateway API wildcard takes two labels
		}
		if gatewayAPI[k] != want {
			t.Errorf("%s: the HTTPRoutes answer %q, the Ingress %q", k, gatewayAPI[k], ingress[k])
		}
	}
	if ingress["a.b.example.com/anything"] != "default x-from=ingress" {
		t.Errorf("the Ingress answered a.b.example.com with %q", ingress["a.b.example.com/anything"])
	}
}
