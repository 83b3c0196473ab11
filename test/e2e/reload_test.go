package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func loadRoute(backend string) string {
	return routeYAML("load", "", fmt.Sprintf(`  rules:
  - matches: [{path: {type: PathPrefix, value: /load}}]
    backendRefs: [{name: %s, port: 80}]
`, backend))
}

// TestReloadUnderLoad rewrites the route file several times (in place and by rename, as editors
// do) while clients send requests continuously, on kept-alive and on fresh connections. Not one
// request may fail, and each change must reach the traffic.
func TestReloadUnderLoad(t *testing.T) {
	b1, b2 := startBackend(t, "b1"), startBackend(t, "b2")
	port := freePort(t)
	s := startServe(t, map[string]string{
		"gateway.yaml":  gatewayClassYAML + "---\n" + gatewayYAML(listener{name: "http", protocol: "HTTP", port: port}),
		"backends.yaml": servicesYAML(b1, b2),
		"route.yaml":    loadRoute("b1"),
	})
	url := fmt.Sprintf("http://127.0.0.1:%d/load", port)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		total, failed atomic.Int64
		mu            sync.Mutex
		failures      []string
		wg            sync.WaitGroup
	)
	client := func(keepAlive bool) {
		defer wg.Done()
		tr := &http.Transport{DisableKeepAlives: !keepAlive, MaxIdleConnsPerHost: 1}
		defer tr.CloseIdleConnections()
		c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		// Bounded: the test cancels ctx when done; the count bound is a safety net.
		for i := 0; i < 200000 && ctx.Err() == nil; i++ {
			res, err := do(ctx, c, request{url: url})
			if ctx.Err() != nil {
				return
			}
			total.Add(1)
			if err != nil || res.code != http.StatusOK || res.echo == nil {
				failed.Add(1)
				mu.Lock()
				if len(failures) < 10 {
					if err != nil {
						failures = append(failures, err.Error())
					} else {
						failures = append(failures, res.backendOf())
					}
				}
				mu.Unlock()
			}
		}
	}
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go client(true)
	}
	wg.Add(1)
	go client(false)

	// underLoad waits until the clients have sent n more requests, so every change lands while
	// traffic is flowing.
	underLoad := func(n int64) {
		start := total.Load()
		eventually(t, 30*time.Second, "traffic flowing", func() error {
			if got := total.Load() - start; got < n {
				return fmt.Errorf("%d requests so far", got)
			}
			return nil
		})
	}
	probe := &http.Client{Timeout: 5 * time.Second}
	for i, want := range []string{"b2", "b1", "b2", "b1"} {
		underLoad(50)
		before := s.status().Version
		if i%2 == 0 {
			s.write("route.yaml", loadRoute(want))
		} else {
			s.replace("route.yaml", loadRoute(want))
		}
		eventually(t, 20*time.Second, "reload to "+want, func() error {
			if v := s.status().Version; v == before {
				return fmt.Errorf("version still %s", v)
			}
			res, err := do(ctx, probe, request{url: url})
			if err != nil {
				return err
			}
			if got := res.backendOf(); got != want {
				return fmt.Errorf("served by %s", got)
			}
			return nil
		})
	}

	// A new listener on another port: the sockets serving the load survive the swap.
	underLoad(50)
	extra := freePort(t)
	s.replace("gateway.yaml", gatewayClassYAML+"---\n"+gatewayYAML(
		listener{name: "http", protocol: "HTTP", port: port},
		listener{name: "extra", protocol: "HTTP", port: extra},
	))
	eventually(t, 20*time.Second, "the extra listener", func() error {
		res, err := do(ctx, probe, request{url: fmt.Sprintf("http://127.0.0.1:%d/load", extra)})
		if err != nil {
			return err
		}
		if got := res.backendOf(); got != "b1" {
			return fmt.Errorf("served by %s", got)
		}
		return nil
	})
	underLoad(50)

	cancel()
	wg.Wait()
	if failed.Load() != 0 || total.Load() < 250 {
		t.Errorf("%d of %d requests failed during reloads; first failures: %v", failed.Load(), total.Load(), failures)
	}
	t.Logf("%d requests across 5 reloads, %d failed", total.Load(), failed.Load())
}

// TestInvalidFiles checks that invalid manifests are left out, named in the log with their file,
// and that everything valid keeps serving: at start-up, when files are added, and when a change
// cannot be applied at all.
func TestInvalidFiles(t *testing.T) {
	b1, b2 := startBackend(t, "b1"), startBackend(t, "b2")
	port := freePort(t)
	good := routeYAML("good", "", `  rules:
  - matches: [{path: {type: PathPrefix, value: /good}}]
    backendRefs: [{name: b1, port: 80}]
`)
	badRegex := routeYAML("bad-regex", "", `  rules:
  - matches: [{path: {type: RegularExpression, value: "/bad/[("}}]
    backendRefs: [{name: b1, port: 80}]
`)
	unknownField := routeYAML("unknown-field", "", `  rules:
  - matches: [{path: {type: PathPrefix, value: /unknown}}]
    backendRefz: [{name: b1, port: 80}]
`)
	gateway := gatewayClassYAML + "---\n" + gatewayYAML(listener{name: "http", protocol: "HTTP", port: port})
	s := startServe(t, map[string]string{
		"gateway.yaml":       gateway,
		"backends.yaml":      servicesYAML(b1, b2),
		"good.yaml":          good,
		"bad-regex.yaml":     badRegex,
		"unknown-field.yaml": unknownField,
		"bad-yaml.yaml":      "apiVersion: v1\nkind: Service\nmetadata: {name: [oops\n",
	})
	ctx := context.Background()
	c := &http.Client{Timeout: 5 * time.Second}
	expect := func(path, want string) {
		t.Helper()
		res, err := do(ctx, c, request{url: fmt.Sprintf("http://127.0.0.1:%d%s", port, path)})
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		if got := res.backendOf(); got != want && (want != "404" || res.code != http.StatusNotFound) {
			t.Errorf("GET %s: got %s, want %s", path, got, want)
		}
	}

	t.Run("at start-up", func(t *testing.T) {
		expect("/good", "b1")
		expect("/bad/x", "404")
		expect("/unknown", "404")
		s.awaitLog("regex error logged", "bad-regex.yaml", "spec.rules[0].matches[0].path.value")
		s.awaitLog("unknown field logged", "unknown-field.yaml", "spec.rules[0].backendRefz", "UnknownField")
		s.awaitLog("bad YAML logged", "bad-yaml.yaml", "InvalidYAML", "line 3")
		st := s.status()
		files := map[string]string{}
		for _, le := range st.Report.LoadErrors {
			files[le.Source.File[strings.LastIndex(le.Source.File, "/")+1:]] = le.Reason
		}
		if files["unknown-field.yaml"] != "UnknownField" || files["bad-yaml.yaml"] != "InvalidYAML" {
			t.Errorf("/status load errors = %v", st.Report.LoadErrors)
		}
		if len(st.Report.Problems) != 1 || !strings.Contains(st.Report.Problems[0].Source, "bad-regex.yaml") {
			t.Errorf("/status problems = %+v", st.Report.Problems)
		}
	})

	t.Run("added at run time", func(t *testing.T) {
		before := s.status().Version
		s.write("more.yaml", routeYAML("more", "", `  rules:
  - matches: [{path: {type: PathPrefix, value: /more}}]
    backendRefs: [{name: b2, port: 80}]
`)+"---\n"+routeYAML("more-bad", "", `  rules:
  - matches: [{headers: [{name: x, type: RegularExpression, value: "(("}]}]
    backendRefs: [{name: b2, port: 80}]
`)+"---\nkind: Mystery\napiVersion: example.com/v1\nmetadata: {name: m}\n")
		eventually(t, 20*time.Second, "reload with more.yaml", func() error {
			if s.status().Version == before {
				return errNotYet
			}
			return nil
		})
		expect("/more", "b2")
		expect("/good", "b1")
		s.awaitLog("unknown kind logged", "more.yaml", "UnknownKind", "Mystery")
		s.awaitLog("header regex logged", "more.yaml", "HTTPRoute default/more-bad")
	})

	t.Run("a listener whose port is taken does not hold back the rest", func(t *testing.T) {
		taken, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = taken.Close() }()
		takenPort := taken.Addr().(*net.TCPAddr).Port
		before := s.status().Version
		s.replace("gateway.yaml", gatewayClassYAML+"---\n"+gatewayYAML(
			listener{name: "http", protocol: "HTTP", port: port},
			listener{name: "taken", protocol: "HTTP", port: takenPort},
		))
		s.awaitLog("bind failure logged", "listener cannot be bound", fmt.Sprintf("127.0.0.1:%d", takenPort), "default/gw/taken")
		eventually(t, 20*time.Second, "the new configuration applied, the taken listener reported", func() error {
			st := s.status()
			if st.Version == before || st.ApplyError != "" {
				return fmt.Errorf("version %s (was %s), applyError %q", st.Version, before, st.ApplyError)
			}
			if len(st.Unbound) != 1 || st.Unbound[0].Reason != "AddressInUse" ||
				len(st.Unbound[0].Gateways) != 1 || st.Unbound[0].Gateways[0] != "default/gw/taken" {
				return fmt.Errorf("unboundListeners %+v", st.Unbound)
			}
			return nil
		})
		expect("/good", "b1")
		expect("/more", "b2")

		// Freeing the port lets the proxy bind it without a new configuration.
		_ = taken.Close()
		eventually(t, 20*time.Second, "the freed port bound and serving", func() error {
			if st := s.status(); len(st.Unbound) != 0 {
				return fmt.Errorf("unboundListeners %+v", st.Unbound)
			}
			res, err := do(ctx, c, request{url: fmt.Sprintf("http://127.0.0.1:%d/good", takenPort)})
			if err != nil {
				return err
			}
			if got := res.backendOf(); got != "b1" {
				return fmt.Errorf("GET /good on the freed port: %s", got)
			}
			return nil
		})

		s.replace("gateway.yaml", gateway)
		eventually(t, 20*time.Second, "back to one listener", func() error {
			if _, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", takenPort), time.Second); err == nil {
				return errNotYet
			}
			return nil
		})
		expect("/good", "b1")
	})
}
