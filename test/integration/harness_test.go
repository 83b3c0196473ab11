package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	gwclientset "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/coxswain-labs/coxswain/controller"
	"github.com/coxswain-labs/coxswain/controller/documents"
	"github.com/coxswain-labs/coxswain/controller/inprocess"
	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	_ "github.com/coxswain-labs/coxswain/modules/filters/headers/translate"
	_ "github.com/coxswain-labs/coxswain/modules/filters/redirect/translate"
	_ "github.com/coxswain-labs/coxswain/modules/filters/rewrite/translate"
	_ "github.com/coxswain-labs/coxswain/modules/httproute/translate" // the route kinds of the stock binary
	_ "github.com/coxswain-labs/coxswain/modules/ingress/translate"
	_ "github.com/coxswain-labs/coxswain/modules/standard"
	_ "github.com/coxswain-labs/coxswain/modules/tcproute/translate"
	_ "github.com/coxswain-labs/coxswain/modules/tlsroute/translate"
	_ "github.com/coxswain-labs/coxswain/modules/udproute/translate"
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// gatewayIP is the address the controllers publish and the tests send traffic to. The in-process
// proxy binds every local address, and netns routes 10.99.0.0/16 to lo.
const gatewayIP = "10.99.0.1"

// waitFor is how long a test waits for the controller to act. Generous: the CI box has two cores
// shared by the API server, etcd, the controller and the go test binary.
const waitFor = 30 * time.Second

var registry = func() *core.Registry {
	registerTestModules() // before the registry is frozen: package-level vars initialize before init
	return core.Freeze()
}()

func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

// controllerOpts tune one in-process controller.
type controllerOpts struct {
	name      string   // controllerName; translator default when empty
	addresses []string // --status-address; gatewayIP when nil, none when empty and set
	noAddress bool
	lease     string // Lease name; a per-test default
	// leaseNamespace holds the Lease; "default" when empty.
	leaseNamespace string
	identity       string
	config         *rest.Config // the rest.Config to use instead of the env's admin
	// documents configure the controller's fetcher of remote documents (a test's TLS roots).
	documents documents.Options
	// published, when set, records every snapshot the in-process proxy applied.
	published *publishedSnapshots
	// registry is the controller's (what it translates and claims); the test binary's when nil.
	// The in-process proxy always has the test binary's.
	registry *core.Registry
	// provisioning turns the controller's provisioning on (shared mode; dedicated mode too when
	// its Dedicated is set).
	provisioning *controller.Provisioning
	// kindSettings are the controller's KindSettings (--ingress-http-address, ...).
	kindSettings map[string]string
	// ingressStatusService is --ingress-status-service.
	ingressStatusService types.NamespacedName
	// logs, when set, also receives the controller's log (a test that checks what it logged).
	logs zapcore.Core
}

// publishedSnapshots keeps the latest snapshot a controller's in-process proxy applied: what a
// test checks the IR of, next to the traffic it sends through it.
type publishedSnapshots struct {
	mu   sync.Mutex
	last *irv1.Snapshot
}

func (p *publishedSnapshots) latest() *irv1.Snapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// wrap makes newPub's publishers record what they applied.
func (p *publishedSnapshots) wrap(newPub controller.NewPublisher) controller.NewPublisher {
	return func(ctx context.Context, report controller.Reporter) (controller.Publisher, error) {
		pub, err := newPub(ctx, report)
		if err != nil {
			return nil, err
		}
		return &recordingPublisher{Publisher: pub, rec: p}, nil
	}
}

type recordingPublisher struct {
	controller.Publisher
	rec *publishedSnapshots
}

func (r *recordingPublisher) Publish(ctx context.Context, snap *irv1.Snapshot) error {
	if err := r.Publisher.Publish(ctx, snap); err != nil {
		return err
	}
	r.rec.mu.Lock()
	r.rec.last = snap
	r.rec.mu.Unlock()
	return nil
}

// runningController is a controller started by a test; it stops when the test ends.
type runningController struct {
	*controller.Controller
	cancel context.CancelFunc
	done   chan error
}

var leaseSeq atomic.Int64

// startController runs a controller with the in-process proxy until the test ends.
func startController(t testing.TB, e *env.Env, o controllerOpts) *runningController {
	t.Helper()
	cfg := rest.CopyConfig(e.Config)
	if o.config != nil {
		cfg = rest.CopyConfig(o.config)
	}
	cfg.QPS, cfg.Burst = 200, 400
	kube := kubernetes.NewForConfigOrDie(cfg)
	gw := gwclientset.NewForConfigOrDie(cfg)
	addrs := o.addresses
	if addrs == nil && !o.noAddress {
		addrs = []string{gatewayIP}
	}
	parsed, err := controller.ParseAddresses(addrs)
	if err != nil {
		t.Fatal(err)
	}
	if o.leaseNamespace == "" {
		o.leaseNamespace = "default"
	}
	if o.lease == "" {
		o.lease = fmt.Sprintf("coxswain-test-%d", leaseSeq.Add(1))
	}
	log := zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)).Named(o.identity)
	if o.logs != nil {
		log = zap.New(zapcore.NewTee(log.Core(), o.logs)).Named(o.identity)
	}
	newPub := inprocess.New(inprocess.Options{Log: log.Named("proxy"), Registry: registry})
	if o.published != nil {
		newPub = o.published.wrap(newPub)
	}
	reg := registry
	if o.registry != nil {
		reg = o.registry
	}
	c, err := controller.New(controller.Options{
		Log: log, Kube: kube, Gateway: gw, REST: cfg, Registry: reg,
		NewPublisher:         newPub,
		ControllerName:       o.name,
		StatusAddresses:      parsed,
		Holdoff:              20 * time.Millisecond,
		ShutdownTimeout:      2 * time.Second,
		Documents:            o.documents,
		Provisioning:         o.provisioning,
		KindSettings:         o.kindSettings,
		IngressStatusService: o.ingressStatusService,
		LeaderElection: controller.LeaderElection{
			Namespace: o.leaseNamespace, Name: o.lease, Identity: o.identity,
			LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 250 * time.Millisecond,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rc := &runningController{Controller: c, cancel: cancel, done: make(chan error, 1)}
	go func() { rc.done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-rc.done; err != nil {
			t.Errorf("controller Run: %v", err)
		}
	})
	return rc
}

// eventually polls f until it returns nil, failing the test with f's last error after timeout.
func eventually(t testing.TB, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %s: %v", what, waitFor, err)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// namespace creates a namespace with a unique name and the given labels.
func namespace(t testing.TB, e *env.Env, prefix string, labels map[string]string) string {
	t.Helper()
	ns, err := e.Kube.CoreV1().Namespaces().Create(ctxFor(t), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: labels},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// backend is a real HTTP server on an address in the test network namespace. It answers every
// request with its name, in the body and in the X-Backend header.
type backend struct {
	name string
	addr string
	hits atomic.Int64
}

func startBackend(t testing.TB, name, addr string) *backend {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("backend %s: %v", name, err)
	}
	b := &backend{name: name, addr: addr}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.hits.Add(1)
		w.Header().Set("X-Backend", name)
		fmt.Fprintf(w, "%s %s", name, r.URL.Path)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return b
}

// client sends each request on a new connection, so a listener that closed or moved is noticed
// at once.
var client = &http.Client{
	Timeout:   5 * time.Second,
	Transport: &http.Transport{DisableKeepAlives: true},
	CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	},
}

// response is what one request got.
type response struct {
	status  int
	backend string
	body    string
	header  http.Header
}

// get sends GET http://gatewayIP:port/path with Host host.
func get(port int, host, path string) (response, error) {
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s:%d%s", gatewayIP, port, path), nil)
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
	return response{status: res.StatusCode, backend: res.Header.Get("X-Backend"), body: string(body), header: res.Header}, err
}

// served waits until a request is answered with status (and, when backend is set, by it).
func served(t testing.TB, port int, host, path string, status int, backend string) {
	t.Helper()
	eventually(t, fmt.Sprintf("GET %s%s answered %d by %q", host, path, status, backend), func() error {
		r, err := get(port, host, path)
		if err != nil {
			return err
		}
		if r.status != status || (backend != "" && r.backend != backend) {
			return fmt.Errorf("got %d from %q: %s", r.status, r.backend, strings.TrimSpace(r.body))
		}
		return nil
	})
}

// refused waits until nothing listens on the port any more.
func refused(t testing.TB, port int) {
	t.Helper()
	eventually(t, fmt.Sprintf("port %d closed", port), func() error {
		_, err := get(port, "any", "/")
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return nil
		}
		return fmt.Errorf("port still answers (err %v)", err)
	})
}
