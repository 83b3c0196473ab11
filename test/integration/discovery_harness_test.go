package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/discovery"
	"github.com/coxswain-labs/coxswain/core/discovery/svid"
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// freePort returns a loopback TCP port nothing listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// fleetController is a `coxswain controller` process streaming to proxy processes.
type fleetController struct {
	*process
	discovery string // host:port
	admin     string // host:port
}

// startFleetController runs a controller in discovery mode whose CA and trust bundle live in ns,
// and whose shared proxies run as ns/coxswain-proxy. Its proxies bind the listeners' own ports
// (--gateway-provisioning=none) unless extra asks for a provisioning mode: the shared mode's
// internal ports are reached through a VIP Service, which needs a service proxy this
// environment does not run.
func startFleetController(t testing.TB, e *env.Env, name, ns string, extra ...string) *fleetController {
	t.Helper()
	return startFleetControllerAt(t, e, name, ns, net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t))),
		net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t))), extra...)
}

// startFleetControllerAt is startFleetController on given discovery and admin addresses (a
// restarted controller takes its predecessor's).
func startFleetControllerAt(t testing.TB, e *env.Env, name, ns, discoveryAddr, adminAddr string, extra ...string) *fleetController {
	t.Helper()
	if !slices.ContainsFunc(extra, func(a string) bool { return strings.HasPrefix(a, "--gateway-provisioning") }) {
		extra = append([]string{"--gateway-provisioning=none"}, extra...)
	}
	c := &fleetController{discovery: discoveryAddr, admin: adminAddr}
	args := append([]string{"--in-process-proxy=false", "--namespace", ns, "--trust-domain", "integration.test",
		"--discovery-address", c.discovery, "--admin-address", c.admin, "--discovery-server-name", "127.0.0.1"}, extra...)
	c.process = startProcess(t, e, name, args...)
	return c
}

// fleet reads the controller's /api/v1/fleet.
func (c *fleetController) fleet() (discovery.Fleet, error) {
	var f discovery.Fleet
	res, err := http.Get("http://" + c.admin + "/api/v1/fleet")
	if err != nil {
		return f, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return f, fmt.Errorf("fleet: %s", res.Status)
	}
	return f, json.NewDecoder(res.Body).Decode(&f)
}

// proxyFiles are what a proxy pod would have mounted: its projected token and the trust bundle.
type proxyFiles struct{ token, bundle string }

// serviceAccount creates ServiceAccount ns/name (if needed) and returns a token for it with the
// given audience, as the kubelet would project it.
func serviceAccountToken(t testing.TB, e *env.Env, ns, name, audience string) string {
	t.Helper()
	_, err := e.Kube.CoreV1().ServiceAccounts(ns).Create(ctxFor(t), &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, metav1.CreateOptions{})
	if err != nil && !isAlreadyExists(err) {
		t.Fatal(err)
	}
	exp := int64(3600)
	tr, err := e.Kube.CoreV1().ServiceAccounts(ns).CreateToken(ctxFor(t), name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// mountProxyFiles writes a token of ns/sa for the discovery audience and the trust bundle the
// controllers published in ctrlNS.
func mountProxyFiles(t testing.TB, e *env.Env, ctrlNS, ns, sa string) proxyFiles {
	t.Helper()
	dir := t.TempDir()
	f := proxyFiles{token: filepath.Join(dir, "token"), bundle: filepath.Join(dir, "ca.crt")}
	if err := os.WriteFile(f.token, []byte(serviceAccountToken(t, e, ns, sa, svid.Audience)), 0o600); err != nil {
		t.Fatal(err)
	}
	var bundle string
	eventually(t, "trust bundle ConfigMap", func() error {
		cm, err := e.Kube.CoreV1().ConfigMaps(ctrlNS).Get(ctxFor(t), "coxswain-discovery-trust-bundle", metav1.GetOptions{})
		if err != nil {
			return err
		}
		bundle = cm.Data[discovery.BundleKey]
		return nil
	})
	if err := os.WriteFile(f.bundle, []byte(bundle), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// proxyProcess is a `coxswain proxy` child process binding its listeners on ip.
type proxyProcess struct {
	*process
	ip    string
	admin string
}

func startProxyProcess(t testing.TB, name, ip string, files proxyFiles, discoveryAddrs string, extra ...string) *proxyProcess {
	t.Helper()
	p := &proxyProcess{ip: ip, admin: net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))}
	args := append([]string{"proxy", "--discovery-address", discoveryAddrs, "--token-file", files.token,
		"--trust-bundle", files.bundle, "--node-name", name, "--listen-address", ip, "--admin-address", p.admin,
		"--log-format", "console", "--shutdown-timeout", "2s"}, extra...)
	p.process = &process{name: name, out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(coxswainBinary(t), args...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.signal(syscall.SIGCONT) // in case a test stopped it
		p.signal(syscall.SIGKILL)
		<-p.done
		if t.Failed() {
			t.Logf("output of %s:\n%s", name, tail(p.out.String(), 8000))
		}
	})
	return p
}

// readyz reports the proxy's /readyz status code.
func (p *proxyProcess) readyz() (int, error) {
	res, err := http.Get("http://" + p.admin + "/readyz")
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return res.StatusCode, nil
}

// httpGet returns the body of a GET that answered 200.
func httpGet(url string) (string, error) {
	res, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err == nil && res.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s", res.Status)
	}
	return string(b), err
}

// getAt sends GET http://ip:port/path with Host host.
func getAt(ip string, port int, host, path string) (response, error) {
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s%s", net.JoinHostPort(ip, strconv.Itoa(port)), path), nil)
	if err != nil {
		return response{}, err
	}
	req.Host = host
	res, err := client.Do(req)
	if err != nil {
		return response{}, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return response{status: res.StatusCode, backend: res.Header.Get("X-Backend"), body: string(body)}, err
}

// servedAt waits until the proxy at ip answers path with status from backend.
func servedAt(t testing.TB, ip string, port int, host, path string, status int, backend string) {
	t.Helper()
	eventually(t, fmt.Sprintf("GET %s:%d %s%s answered %d by %q", ip, port, host, path, status, backend), func() error {
		r, err := getAt(ip, port, host, path)
		if err != nil {
			return err
		}
		if r.status != status || (backend != "" && r.backend != backend) {
			return fmt.Errorf("got %d from %q: %s", r.status, r.backend, r.body)
		}
		return nil
	})
}

// updateGateway re-reads the Gateway, applies change and updates it.
func updateGateway(t testing.TB, e *env.Env, ns, name string, change func(*gwapiv1.Gateway)) *gwapiv1.Gateway {
	t.Helper()
	gws := e.Gateway.GatewayV1().Gateways(ns)
	var out *gwapiv1.Gateway
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := gws.Get(ctxFor(t), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(cur)
		out, err = gws.Update(ctxFor(t), cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func isAlreadyExists(err error) bool { return apierrors.IsAlreadyExists(err) }

// editLatest reads an object, changes it and updates it, reading again on a conflict: the
// controller writes the objects it provisions, and may do so between a test's read and its
// update.
func editLatest[T any](t testing.TB, get func() (T, error), change func(T), update func(T) (T, error)) T {
	t.Helper()
	var out T
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := get()
		if err != nil {
			return err
		}
		change(cur)
		out, err = update(cur)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
