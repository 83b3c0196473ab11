package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/coxswain-labs/coxswain/examples/grpc/healthecho"
)

// exampleFiles reads the manifests of examples/<name> and rewrites their fixed ports to the
// test's: each key of ports ("port: 9080") must occur in them, so an example that changes its
// ports fails here instead of silently testing something else.
func exampleFiles(t *testing.T, name string, ports map[string]int) map[string]string {
	t.Helper()
	dir := filepath.Join("..", "..", "examples", name)
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no manifests in %s (%v)", dir, err)
	}
	files := map[string]string{}
	seen := map[string]bool{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		content := string(b)
		for from, port := range ports {
			if strings.Contains(content, from) {
				seen[from] = true
				content = strings.ReplaceAll(content, from, "port: "+strconv.Itoa(port))
			}
		}
		files[filepath.Base(p)] = content
	}
	for from := range ports {
		if !seen[from] {
			t.Fatalf("examples/%s no longer contains %q", name, from)
		}
	}
	return files
}

// startHealthEcho serves the gRPC example's backend in-process on a loopback port.
func startHealthEcho(t *testing.T, name string) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- healthecho.Serve(ctx, name, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("backend %s: %v", name, err)
		}
	})
	return ln.Addr().(*net.TCPAddr).Port
}

// TestExamplesGRPC serves examples/grpc and makes the calls its README shows, with the example's
// own client code against its own backend: method routing with a header set on the way, a header
// match, 80/20 weights, and UNIMPLEMENTED for a method no rule matches.
func TestExamplesGRPC(t *testing.T) {
	gw := freePort(t)
	s := startServe(t, exampleFiles(t, "grpc", map[string]int{
		"port: 9080": gw, "port: 9311": startHealthEcho(t, "v1"), "port: 9312": startHealthEcho(t, "v2"),
	}))
	conn, err := healthecho.Dial(fmt.Sprintf("127.0.0.1:%d", gw))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	call := func(method string, md metadata.MD) (healthecho.Result, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return healthecho.Call(ctx, conn, method, md)
	}

	eventually(t, 10*time.Second, "Check through the proxy", func() error {
		res, err := call("check", nil)
		if err != nil {
			return err
		}
		if res.Backend != "v1" || res.Status != "SERVING" || !slices.Contains(res.Echoed, "x-gateway=coxswain") {
			return fmt.Errorf("got %s, want backend=v1 status=SERVING with x-gateway=coxswain", res)
		}
		return nil
	})
	res, err := call("check", metadata.Pairs("x-canary", "true"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Backend != "v2" || slices.Contains(res.Echoed, "x-gateway=coxswain") {
		t.Errorf("Check with x-canary: got %s, want backend v2 without x-gateway", res)
	}

	// Weights 80/20 reduce to a 4:1 smooth round robin: any 10 calls in a row are two cycles.
	tally := map[string]int{}
	for range 10 {
		res, err := call("list", nil)
		if err != nil {
			t.Fatal(err)
		}
		tally[res.Backend]++
	}
	if tally["v1"] != 8 || tally["v2"] != 2 {
		t.Errorf("List x10: got %v, want v1=8 v2=2", tally)
	}

	_, err = call("watch", nil)
	if code := grpcstatus.Code(err); code != codes.Unimplemented {
		t.Errorf("Watch: got %v (%v), want Unimplemented from the proxy", code, err)
	}
	if st := s.status(); len(st.Report.Problems) > 0 || st.ApplyError != "" {
		t.Errorf("/status: problems %+v, apply error %q", st.Report.Problems, st.ApplyError)
	}
}

// gatewayConditions is the part of /status TestExamplesAddresses reads.
type gatewayConditions struct {
	Report struct {
		Gateways []struct {
			Name   string `json:"name"`
			Status struct {
				Addresses []struct {
					Value       string  `json:"value"`
					Routability *string `json:"routability"`
				} `json:"addresses"`
				Conditions []struct {
					Type   string `json:"type"`
					Status string `json:"status"`
					Reason string `json:"reason"`
				} `json:"conditions"`
			} `json:"status"`
		} `json:"gateways"`
	} `json:"report"`
}

// programmed returns the Gateway's Programmed condition as "Status/Reason".
func (g gatewayConditions) programmed(name string) string { return g.condition(name, "Programmed") }

// condition returns the Gateway's condition typ as "Status/Reason".
func (g gatewayConditions) condition(name, typ string) string {
	for _, gw := range g.Report.Gateways {
		if gw.Name != name {
			continue
		}
		for _, c := range gw.Status.Conditions {
			if c.Type == typ {
				return c.Status + "/" + c.Reason
			}
		}
	}
	return "(none)"
}

// addresses returns the Gateway's status.addresses as "value=routability" ("value" when the
// routability is unset).
func (g gatewayConditions) addresses(name string) []string {
	var out []string
	for _, gw := range g.Report.Gateways {
		if gw.Name != name {
			continue
		}
		for _, a := range gw.Status.Addresses {
			s := a.Value
			if a.Routability != nil {
				s += "=" + *a.Routability
			}
			out = append(out, s)
		}
	}
	return out
}

// TestExamplesAddresses serves examples/addresses: Gateways blue and green share one port on
// 127.0.0.2 and 127.0.0.3 and each answers with its own backend, while Gateway elsewhere, whose
// 192.0.2.10 is not local, is Programmed=False AddressNotUsable, and Gateway internal, which asks
// for routability Cluster, gets no address (AddressNotAssigned, AddressesAssigned=False
// NotAssigned). Nothing is sent to 192.0.2.10; the proxy only tries to bind it.
func TestExamplesAddresses(t *testing.T) {
	port := freePort(t)
	s := startServe(t, exampleFiles(t, "addresses", map[string]int{
		"port: 8088": port, "port: 9321": startBackend(t, "blue").port, "port: 9322": startBackend(t, "green").port,
	}))
	for addr, want := range map[string]string{"127.0.0.2": "blue", "127.0.0.3": "green"} {
		url := fmt.Sprintf("http://%s:%d/hello", addr, port)
		eventually(t, 10*time.Second, "GET "+url, func() error {
			res, err := do(context.Background(), noRedirect, request{url: url})
			if err != nil {
				return err
			}
			if got := res.backendOf(); got != want {
				return fmt.Errorf("answered by %s, want %s", got, want)
			}
			return nil
		})
	}
	eventually(t, 10*time.Second, "elsewhere Programmed=False AddressNotUsable", func() error {
		body, code, err := s.adminGet("/status")
		if err != nil {
			return err
		}
		var st gatewayConditions
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			return fmt.Errorf("/status %d: %w", code, err)
		}
		got := map[string]string{}
		for _, name := range []string{"blue", "green", "elsewhere", "internal"} {
			got[name] = st.programmed(name) + " " + st.condition(name, "AddressesAssigned")
		}
		want := map[string]string{"blue": "True/Programmed True/AddressesAssigned", "green": "True/Programmed True/AddressesAssigned",
			"elsewhere": "False/AddressNotUsable True/AddressesAssigned", "internal": "False/AddressNotAssigned False/NotAssigned"}
		for name, w := range want {
			if got[name] != w {
				return fmt.Errorf("Programmed and AddressesAssigned: got %v, want %v", got, want)
			}
		}
		// Every status address reports its routability, the default here; internal has none.
		if a := st.addresses("blue"); !slices.Equal(a, []string{"127.0.0.2="}) {
			return fmt.Errorf("blue status.addresses %q, want 127.0.0.2 with routability \"\"", a)
		}
		if a := st.addresses("internal"); len(a) != 0 {
			return fmt.Errorf("internal status.addresses %q, want none", a)
		}
		return nil
	})
	st := s.status()
	if len(st.Unbound) != 1 || !slices.Equal(st.Unbound[0].Gateways, []string{"default/elsewhere/http"}) {
		t.Errorf("unboundListeners: got %+v, want only default/elsewhere/http", st.Unbound)
	}
	if len(st.Report.Problems) > 0 {
		t.Errorf("/status problems: %+v", st.Report.Problems) // a routability we cannot give is not one
	}
}

// TestExamplesFilters serves examples/filters: an ExtensionRef to a stock filter.ext module
// rewrites the path, one whose object is invalid or whose kind no module handles answers 500
// with ResolvedRefs=False, and the route's other rules keep serving.
func TestExamplesFilters(t *testing.T) {
	port := freePort(t)
	s := startServe(t, exampleFiles(t, "filters", map[string]int{"port: 8090": port, "port: 9331": startBackend(t, "app").port}))
	get := func(path string) (*result, error) {
		return do(context.Background(), noRedirect, request{url: fmt.Sprintf("http://127.0.0.1:%d%s", port, path)})
	}
	eventually(t, 10*time.Second, "/legacy rewritten by PathRewriteRegex", func() error {
		res, err := get("/legacy/users/7?x=1")
		if err != nil {
			return err
		}
		if res.code != 200 || res.echo == nil || res.echo.Path != "/v2/users/7" || res.echo.Query != "x=1" {
			return fmt.Errorf("got %d %s", res.code, res.body)
		}
		return nil
	})
	for path, want := range map[string]int{"/broken/x": 500, "/teleport/x": 500, "/plain": 200} {
		res, err := get(path)
		if err != nil || res.code != want {
			t.Errorf("GET %s: %v %+v, want %d", path, err, res, want)
		}
	}
	// A PathRewriteRegex that does not exist fails open: served, not rewritten.
	if res, err := get("/gone/x"); err != nil || res.code != 200 || res.echo == nil || res.echo.Path != "/gone/x" {
		t.Errorf("GET /gone/x: %v %+v, want 200 with the path unrewritten", err, res)
	}
	var problems []string
	for _, p := range s.status().Report.Problems {
		if p.Object == "HTTPRoute default/app" { // the other filters' examples have routes of their own
			problems = append(problems, p.Object+" "+p.Field+" "+p.Reason)
		}
	}
	slices.Sort(problems)
	want := []string{"HTTPRoute default/app spec.rules[1].filters[0].extensionRef UnsupportedValue",
		"HTTPRoute default/app spec.rules[2].filters[0].extensionRef InvalidKind",
		"HTTPRoute default/app spec.rules[3].filters[0].extensionRef FilterNotFound"}
	if !slices.Equal(problems, want) {
		t.Errorf("problems %v, want %v", problems, want)
	}
}
