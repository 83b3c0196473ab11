package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/test/browser"
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// The console tests drive the operator console (controller/console) in a real headless Chromium
// (test/browser): against standalone `coxswain serve -f examples/quickstart`, and against a
// controller on the real API server with a proxy process connected. Screenshots of every view, at
// 1280 and 800 pixels wide, are saved as artifacts (see test/browser).

// consoleWait bounds how long the page may take to show what the API says: the page polls every
// 2s, so a few polls.
const consoleWait = 10 * time.Second

// serveProcess is a `coxswain serve` child process; stdout is kept apart from the log (stderr).
type serveProcess struct {
	cmd    *exec.Cmd
	stdout *syncBuffer
	log    *syncBuffer
	admin  string
}

func startServe(t *testing.T, dir string) *serveProcess {
	t.Helper()
	s := &serveProcess{stdout: &syncBuffer{}, log: &syncBuffer{},
		admin: net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))}
	s.cmd = exec.Command(coxswainBinary(t), "serve", "-f", dir, "--admin-address", s.admin, "--log-format", "console")
	s.cmd.Stdout, s.cmd.Stderr = s.stdout, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_ = s.cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		<-done
		if t.Failed() {
			t.Logf("stdout of serve:\n%s\nlog of serve:\n%s", s.stdout.String(), tail(s.log.String(), 8000))
		}
	})
	return s
}

// consoleURL waits for the line `coxswain serve` prints with the console's address.
func (s *serveProcess) consoleURL(t *testing.T) string {
	t.Helper()
	want := "Coxswain console: http://" + s.admin + "/"
	eventually(t, "serve prints the console address", func() error {
		if !strings.Contains(s.stdout.String(), want) {
			return fmt.Errorf("stdout %q has no %q", s.stdout.String(), want)
		}
		return nil
	})
	return "http://" + s.admin + "/"
}

// open navigates to the console's view (a hash route) and waits until it has rendered it.
func open(t *testing.T, ctx context.Context, base, view string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"#/"+view)); err != nil {
		t.Fatal(err)
	}
	name, _, _ := strings.Cut(view, "/")
	await(t, ctx, view+" view rendered", fmt.Sprintf(`document.body.dataset.ready === "true" && document.body.dataset.view === %q`, name))
}

func await(t *testing.T, ctx context.Context, what, js string) {
	t.Helper()
	if err := browser.WaitFor(ctx, what, js, consoleWait); err != nil {
		var text string
		text, _ = chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
		t.Fatalf("%v\npage text:\n%s", err, text)
	}
}

// pageHas is a JavaScript predicate: the main area's text contains every string (textContent:
// innerText would apply CSS text-transform).
func pageHas(s ...string) string {
	var parts []string
	for _, x := range s {
		parts = append(parts, fmt.Sprintf("document.getElementById('main').textContent.includes(%q)", x))
	}
	return strings.Join(parts, " && ")
}

// shoot saves a screenshot of the view at both widths the console must lay out at.
func shoot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	for _, w := range []int64{1280, 800} {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(w, 900)); err != nil {
			t.Fatal(err)
		}
		// A broken layout at this width shows as a page wider than the window.
		await(t, ctx, fmt.Sprintf("%s fits %dpx", name, w), fmt.Sprintf(`document.documentElement.scrollWidth <= %d`, w))
		browser.Screenshot(t, ctx, fmt.Sprintf("%s-%d", name, w))
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatal(err)
	}
}

// TestConsoleStandalone: `coxswain serve -f examples/quickstart` prints the console's address,
// and the console there shows the quickstart's Gateway with its listeners and address, its five
// routes Accepted, and no problems. Then, on a copy of the quickstart, a file whose name is
// markup adds a route with a missing backend: the page picks it up by itself, lists it under
// Problems with its hint and its file name as text, and runs none of it.
func TestConsoleStandalone(t *testing.T) {
	t.Run("quickstart", func(t *testing.T) {
		s := startServe(t, filepath.Join("..", "..", "examples", "quickstart"))
		base := s.consoleURL(t)
		ctx := browser.New(t, browser.Options{})

		open(t, ctx, base, "gateways")
		await(t, ctx, "the quickstart Gateway", `document.querySelector('[data-gateway="default/quickstart"]') !== null && `+
			pageHas("default/quickstart", "127.0.0.1", "HTTP / 8080", "HTTPS / 8443", "127.0.0.1:8080/HTTP", "Programmed", "Accepted"))
		shoot(t, ctx, "standalone-gateways")

		// The Gateway's compiled routing: rules in match order, with their backends' clusters.
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-gateway="default/quickstart"] h3 a`))); err != nil {
			t.Fatal(err)
		}
		await(t, ctx, "the quickstart's routing", `document.body.dataset.view === "gateway" && `+
			pageHas("HTTPRoute default/web", "HTTPRoute default/weighted", "PathPrefix /weighted", "header x-canary = true", "rule 1 · match 0",
				"default/app-v1:80", "weight 80", "default/app-v2:80", "weight 20", "127.0.0.1:9001"))
		shoot(t, ctx, "standalone-gateway-routing")

		open(t, ctx, base, "routes")
		var js []string
		for _, r := range []string{"web", "app", "weighted", "redirect", "headers"} {
			js = append(js, fmt.Sprintf(`document.querySelector('[data-route="HTTPRoute default/%s"]') !== null`, r))
		}
		await(t, ctx, "the quickstart's five routes", strings.Join(js, " && ")+" && "+pageHas("ResolvedRefs"))
		await(t, ctx, "no route in trouble", `document.querySelectorAll('#main .dot.bad').length === 0`)
		shoot(t, ctx, "standalone-routes")

		open(t, ctx, base, "problems")
		await(t, ctx, "no problems", pageHas("Nothing is broken")+` && document.getElementById('problem-count').textContent === "0"`)
		open(t, ctx, base, "fleet")
		await(t, ctx, "standalone fleet", pageHas("Standalone mode"))
		shoot(t, ctx, "standalone-fleet")
	})

	t.Run("a problem appears, escaped", func(t *testing.T) {
		dir := t.TempDir()
		for _, f := range []string{"gateway.yaml", "routes.yaml", "backends.yaml", "tls-secret.yaml"} {
			b, err := os.ReadFile(filepath.Join("..", "..", "examples", "quickstart", f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		s := startServe(t, dir)
		base := s.consoleURL(t)
		ctx := browser.New(t, browser.Options{})
		open(t, ctx, base, "problems")
		await(t, ctx, "no problems yet", pageHas("Nothing is broken"))

		const evil = `<img src=x onerror="document.title='pwned'">.yaml`
		route := `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: broken
spec:
  parentRefs:
  - name: quickstart
  hostnames: ["broken.example"]
  rules:
  - backendRefs:
    - name: no-such-service
      port: 80
`
		if err := os.WriteFile(filepath.Join(dir, evil), []byte(route), 0o600); err != nil {
			t.Fatal(err)
		}
		await(t, ctx, "the missing backend under Problems", pageHas("HTTPRoute default/broken", "BackendNotFound", "no-such-service", evil)+
			` && document.querySelector('#main .hint') !== null && document.getElementById('problem-count').textContent !== "0"`)
		await(t, ctx, "the file name shown as text, not run", `document.title !== 'pwned' && document.querySelector('#main img') === null`)
		shoot(t, ctx, "standalone-problems")
	})
}

// TestConsoleController: the console of a controller on the real API server, with a `coxswain
// proxy` process connected over discovery. The fleet view shows the proxy, the snapshot it
// acknowledged and the listener it bound; its routing table shows the route; and a route created
// with a missing backend is listed under Problems, with a hint, within a few seconds.
func TestConsoleController(t *testing.T) {
	e := env.Start(t)
	ctrlNS := namespace(t, e, "coxswain", nil)
	ctrl := startFleetController(t, e, "controller", ctrlNS, "--leader-elect=false")
	ns := namespace(t, e, "console", nil)
	startBackend(t, "v1", "10.99.7.1:8080")
	createService(t, e, ns, "v1", "10.99.7.1")
	createClass(t, e, "coxswain", "")
	const port = 18720
	createGateway(t, e, ns, "gw", "coxswain", httpListener("http", port))
	createRoute(t, e, httpRoute(ns, "good", []gwapiv1.ParentReference{parentRef(ns, "gw")}, nil, prefixRule("/", backendRef("v1", 1))))
	files := mountProxyFiles(t, e, ctrlNS, ctrlNS, "coxswain-proxy")
	p := startProxyProcess(t, "edge-1", "10.99.0.31", files, ctrl.discovery)
	servedAt(t, p.ip, port, "any.example", "/", 200, "v1")
	waitGateway(t, e, ns, "gw", func(gw *gwapiv1.Gateway) error {
		return checkConds(gw.Status.Conditions, gw.Generation, programmed)
	})

	base := "http://" + ctrl.admin + "/"
	ctx := browser.New(t, browser.Options{})
	open(t, ctx, base, "fleet")
	bound := net.JoinHostPort(p.ip, strconv.Itoa(port))
	await(t, ctx, "the connected proxy in the fleet", pageHas("edge-1", "acked", bound, "Proxies connected", ns+"/gw")+
		` && document.querySelector('#main a[href="#/proxy/edge-1"]') !== null`)
	shoot(t, ctx, "controller-fleet")

	open(t, ctx, base, "proxy/edge-1")
	await(t, ctx, "the proxy's routing table", pageHas(fmt.Sprintf(":%d/HTTP", port), "HTTPRoute/"+ns+"/good", ns+"/v1:80", "10.99.7.1:8080"))
	shoot(t, ctx, "controller-proxy-routes")

	open(t, ctx, base, "problems")
	await(t, ctx, "no problems yet", pageHas("Nothing is broken"))
	created := time.Now()
	createRoute(t, e, httpRoute(ns, "broken", []gwapiv1.ParentReference{parentRef(ns, "gw")}, nil, prefixRule("/broken", backendRef("no-such-service", 1))))
	await(t, ctx, "the missing backend under Problems", pageHas("broken", "BackendNotFound", "no-such-service")+
		` && document.querySelector('#main .problem .hint') !== null`)
	t.Logf("the route with a missing backend was under Problems %s after it was created", time.Since(created).Round(10*time.Millisecond))
	shoot(t, ctx, "controller-problems")

	open(t, ctx, base, "routes")
	await(t, ctx, "both routes", pageHas(ns+"/good", ns+"/broken"))
	shoot(t, ctx, "controller-routes")
	open(t, ctx, base, "gateways")
	await(t, ctx, "the Gateway", pageHas(ns+"/gw", fmt.Sprintf("HTTP / %d", port), fmt.Sprintf(":%d/HTTP", port)))
	shoot(t, ctx, "controller-gateways")
	// The Gateway's compiled routing: the missing backend is there too, as unresolved.
	open(t, ctx, base, "gateway/"+ns+"/gw")
	await(t, ctx, "the Gateway's routing", pageHas("HTTPRoute "+ns+"/good", "HTTPRoute "+ns+"/broken", "PathPrefix /broken", "unresolved", ns+"/v1:80", "10.99.7.1:8080"))
	shoot(t, ctx, "controller-gateway-routing")
}

// TestConsoleSignIn: against a controller with --admin-auth=kubernetes the page itself loads,
// the API refuses it, and the console asks for a token; a token of a ServiceAccount without the
// reader role is refused with 403 and said so; one with it shows the fleet and Gateways.
func TestConsoleSignIn(t *testing.T) {
	e := env.Start(t)
	ctrlNS := namespace(t, e, "coxswain", nil)
	ctrl := startFleetController(t, e, "controller", ctrlNS, "--leader-elect=false", "--admin-auth=kubernetes")
	ns := namespace(t, e, "signin", nil)
	createClass(t, e, "coxswain", "")
	createGateway(t, e, ns, "gw", "coxswain", httpListener("http", 18730))
	reader := apiToken(t, e, ns, "reader", true, false)
	stranger := apiToken(t, e, ns, "stranger", false, false)

	base := "http://" + ctrl.admin + "/"
	ctx := browser.New(t, browser.Options{})
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"#/fleet")); err != nil {
		t.Fatal(err)
	}
	await(t, ctx, "the sign-in form", pageHas("The admin API needs a token")+` && document.getElementById('token') !== null`)
	shoot(t, ctx, "controller-sign-in")

	signIn := func(token string) {
		t.Helper()
		// A click, as a person submits it (form.submit() from Submit would skip the page's handler).
		if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.ID("token"), token), chromedp.Click(chromedp.CSS(`#main form button[type="submit"]`))); err != nil {
			t.Fatal(err)
		}
	}
	signIn(stranger)
	await(t, ctx, "a refusal", pageHas("This token may not read the admin API"))
	signIn(reader)
	await(t, ctx, "the fleet, signed in", `document.getElementById('token') === null && `+pageHas("This controller leads", "No proxy is connected", ns+"/gw"))
	open(t, ctx, base, "gateways")
	await(t, ctx, "the Gateway, signed in", pageHas(ns+"/gw", "HTTP / 18730"))
}
