package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/coxswain-labs/coxswain/controller"
	"github.com/coxswain-labs/coxswain/controller/discovery"
	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/controller/translator/translatortest"
	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
	"github.com/coxswain-labs/coxswain/core/proxy/agent"
	"github.com/coxswain-labs/coxswain/modules/httproute"
	_ "github.com/coxswain-labs/coxswain/modules/httproute/translate"
	_ "github.com/coxswain-labs/coxswain/modules/standard"
)

// BenchmarkFanout measures one controller pushing route changes to 100 connected proxies over
// mutual-TLS gRPC on loopback, at 5,000 HTTPRoutes (10,000 IR routes: one Gateway, two rules per
// route, as translatortest.SyntheticStore). The controller is a process of its own (this test
// binary again, running fanoutController), so its CPU is measured alone; the 100 agents run in
// this process, each with a real proxy engine (engine=proxy: decode, incremental table build,
// swap) or one that only decodes (engine=decode-only: what the protocol itself costs a proxy).
// Each change is one route's path plus a new Gateway generation (which the gate waits for). It
// reports, over 10 changes:
//
//   - last-ack-p50-ms, last-ack-p99-ms: from Publish to the gate seeing every proxy acknowledge;
//   - ack-p50-ms, ack-p99-ms: from Publish to each proxy's acknowledgement (every proxy, change);
//   - ctl-cpu-ms/push: the controller process's CPU per change, until the last acknowledgement;
//   - push-MB: the encoded snapshot each proxy receives.
//
// One run is one measurement: -benchtime 1x. The agents share the machine's two cores with the
// controller, so the last acknowledgement includes 100 proxies' decoding and building.
func BenchmarkFanout(b *testing.B) {
	for _, engine := range []string{"decode-only", "proxy"} {
		b.Run(fmt.Sprintf("engine=%s/proxies=100/routes=5000", engine), func(b *testing.B) {
			for range b.N {
				measureFanout(b, engine, 100, 5000)
			}
		})
	}
}

const fanoutDirEnv = "COXSWAIN_FANOUT_DIR"

func measureFanout(b *testing.B, engine string, proxies, routes int) {
	b.StopTimer()
	dir := b.TempDir()
	ctl := startFanoutController(b, dir, routes)
	reg := core.Freeze()
	var modules []string
	for _, id := range reg.IDs() {
		modules = append(modules, string(id))
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(fanoutToken+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	b.Cleanup(func() { cancel(); wg.Wait() })
	for i := range proxies {
		var eng agent.Engine
		if engine == "proxy" {
			px := proxy.New(proxy.Options{Log: zap.NewNop(), Registry: reg})
			b.Cleanup(func() { _ = px.Close(context.Background()) })
			eng = px
		} else {
			eng = &decodeOnlyEngine{}
		}
		ag, err := agent.New(agent.Options{Log: zap.NewNop(), Engine: eng, Modules: modules, Addresses: []string{ctl.addr},
			TokenFile: tokenFile, TrustBundleFile: filepath.Join(dir, "ca.crt"), Node: fmt.Sprintf("p%03d", i),
			MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second})
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() { _ = ag.Run(ctx) })
	}
	ctl.ask(b, fmt.Sprintf("wait %d", proxies)) // every proxy acknowledged the first snapshot

	const changes = 10
	var last, each []time.Duration
	var cpu time.Duration
	var pushBytes float64
	for gen := 2; gen < 2+changes; gen++ {
		ctl.ask(b, fmt.Sprintf("prepare %d", gen))
		cpu0 := cpuTime(b, ctl.cmd.Process.Pid)
		var r fanoutResult
		if err := json.Unmarshal([]byte(ctl.ask(b, "publish")), &r); err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime(b, ctl.cmd.Process.Pid) - cpu0
		last = append(last, r.Last)
		each = append(each, r.Each...)
		pushBytes = float64(r.Bytes)
	}
	b.ReportMetric(ms(percentile(last, 50)), "last-ack-p50-ms")
	b.ReportMetric(ms(percentile(last, 99)), "last-ack-p99-ms")
	b.ReportMetric(ms(percentile(each, 50)), "ack-p50-ms")
	b.ReportMetric(ms(percentile(each, 99)), "ack-p99-ms")
	b.ReportMetric(ms(cpu)/changes, "ctl-cpu-ms/push")
	b.ReportMetric(pushBytes/1e6, "push-MB")
}

const fanoutToken = "fanout-token"

// fanoutResult is what the controller process answers a publish with.
type fanoutResult struct {
	Last  time.Duration   // Publish to the gate's Applied
	Each  []time.Duration // Publish to each proxy's acknowledgement
	Bytes int             // the encoded snapshot
}

type fanoutProcess struct {
	cmd  *exec.Cmd
	in   io.Writer
	out  *bufio.Scanner
	addr string
}

func startFanoutController(b *testing.B, dir string, routes int) *fanoutProcess {
	cmd := exec.Command("/proc/self/exe", "-test.run=^TestFanoutController$", "-test.timeout=30m")
	cmd.Env = append(os.Environ(), fanoutDirEnv+"="+dir, "COXSWAIN_FANOUT_ROUTES="+strconv.Itoa(routes))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = in.Close(); _ = cmd.Wait() })
	p := &fanoutProcess{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	p.out.Buffer(nil, 1<<20)
	p.addr = p.answer(b)
	return p
}

// answer reads the controller process's next answer line ("= <text>"), skipping test output.
func (p *fanoutProcess) answer(b *testing.B) string {
	for p.out.Scan() {
		if v, ok := strings.CutPrefix(p.out.Text(), "= "); ok {
			return v
		}
	}
	b.Fatalf("controller process ended: %v", p.out.Err())
	return ""
}

func (p *fanoutProcess) ask(b *testing.B, cmd string) string {
	if _, err := fmt.Fprintln(p.in, cmd); err != nil {
		b.Fatal(err)
	}
	return p.answer(b)
}

// TestFanoutController is not a test: it is the controller process of BenchmarkFanout (run
// with COXSWAIN_FANOUT_DIR set), a discovery server on loopback with a fresh CA that accepts
// fanoutToken. It prints "= <address>", then answers each command on its stdin with one line:
// "wait N" once N proxies acknowledged the latest snapshot; "prepare G" once it made the next
// route change (generation G, not yet published); "publish" once every proxy acknowledged it,
// with a fanoutResult.
func TestFanoutController(t *testing.T) {
	dir := os.Getenv(fanoutDirEnv)
	if dir == "" {
		t.Skip("the controller process of BenchmarkFanout")
	}
	routes, _ := strconv.Atoi(os.Getenv("COXSWAIN_FANOUT_ROUTES"))
	certPEM, keyPEM, err := discovery.NewCA("fanout.coxswain", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ca, err := discovery.LoadCA("fanout.coxswain", certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), ca.Bundle(), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := discovery.New(discovery.Options{Log: zap.NewNop(), CA: ca, SharedProxies: []string{"coxswain-system/coxswain-proxy"},
		Authenticate: func(_ context.Context, token string) (string, string, error) {
			if token != fanoutToken {
				return "", "", discovery.ErrUnauthenticated
			}
			return "coxswain-system", "coxswain-proxy", nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()
	report := &fanoutReporter{applied: map[string]int64{}, changed: make(chan struct{}, 1)}
	pub, err := srv.NewPublisher(context.Background(), report)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pub.Close(context.Background()) }()

	res := translator.Translate(context.Background(), translatortest.SyntheticStore(routes),
		translator.Options{Registry: core.Freeze(), AllowLoopbackEndpoints: true})
	base := res.Snapshot
	if len(base.GetListeners()) != 1 {
		t.Fatalf("synthetic translation: %d listeners, problems %v", len(base.GetListeners()), res.Problems)
	}
	base.Listeners[0].Address, base.Listeners[0].Port = "127.0.0.1", 0 // every proxy binds a free port
	first := routeChange(t, base, 1)
	if err := pub.Publish(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	current, next := first, (*irv1.Snapshot)(nil)
	fmt.Printf("= %s\n", ln.Addr())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		verb, arg, _ := strings.Cut(in.Text(), " ")
		switch verb {
		case "wait":
			n, _ := strconv.Atoi(arg)
			for acked(srv.Fleet(), current.GetVersion()) < n {
				time.Sleep(20 * time.Millisecond)
			}
			fmt.Println("= ok")
		case "prepare":
			gen, _ := strconv.ParseInt(arg, 10, 64)
			next = routeChange(t, base, gen)
			fmt.Println("= ok")
		case "publish":
			gw := "bench/gw"
			gen := next.GetGateways()[0].GetGeneration()
			start := time.Now()
			if err := pub.Publish(context.Background(), next); err != nil {
				t.Fatal(err)
			}
			for report.appliedGen(gw) < gen {
				<-report.changed
			}
			r := fanoutResult{Last: time.Since(start)}
			f := srv.Fleet()
			for _, p := range f.Proxies {
				if p.AckedVersion == next.GetVersion() {
					r.Each = append(r.Each, p.AckedAt.Sub(f.PublishedAt))
				}
			}
			data, _ := proto.Marshal(next)
			r.Bytes = len(data)
			current = next
			out, _ := json.Marshal(r)
			fmt.Printf("= %s\n", out)
		}
	}
}

func acked(f discovery.Fleet, version string) int {
	n := 0
	for _, p := range f.Proxies {
		if p.AckedVersion == version {
			n++
		}
	}
	return n
}

// routeChange is base with the path of one route (in the middle of the table) changed and the
// Gateway at generation gen, sealed. It shares every other message with base, so that making it
// costs what the change costs, not a copy of 10,000 routes.
func routeChange(t testing.TB, base *irv1.Snapshot, gen int64) *irv1.Snapshot {
	l := shallow(base.Listeners[0])
	srv := shallow(l.Servers[0])
	vhs := slices.Clone(srv.VirtualHosts)
	k := len(vhs) / 2
	vh := shallow(vhs[k])
	vh.Routes = slices.Clone(vh.Routes)
	r := shallow(vh.Routes[0])
	m, _ := json.Marshal(httproute.Match{Path: &httproute.PathMatch{Type: httproute.MatchPathPrefix, Value: "/changed-" + strconv.FormatInt(gen, 10)}})
	r.Match = &irv1.ModuleConfig{Id: httproute.ModuleID, Json: m}
	vh.Routes[0], vhs[k] = r, vh
	srv.VirtualHosts = vhs
	l.Servers = []*irv1.Server{srv}
	out := &irv1.Snapshot{Listeners: []*irv1.Listener{l}, Clusters: base.GetClusters(), Secrets: base.GetSecrets()}
	for _, g := range base.GetGateways() {
		out.Gateways = append(out.Gateways, &irv1.GatewayGeneration{Namespace: g.GetNamespace(), Name: g.GetName(), Generation: gen})
	}
	if err := irv1.Seal(out); err != nil {
		t.Fatal(err)
	}
	return out
}

// shallow copies m's fields (by reflection, so fields added later are copied too); its children
// are shared.
func shallow[M proto.Message](m M) M {
	src := m.ProtoReflect()
	dst := src.New()
	src.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		dst.Set(fd, v)
		return true
	})
	return dst.Interface().(M)
}

// fanoutReporter records the generations the gate reports applied.
type fanoutReporter struct {
	mu      sync.Mutex
	applied map[string]int64
	changed chan struct{}
}

var _ controller.Reporter = (*fanoutReporter)(nil)

func (r *fanoutReporter) Applied(gws []*irv1.GatewayGeneration) {
	r.mu.Lock()
	for _, g := range gws {
		k := g.GetNamespace() + "/" + g.GetName()
		r.applied[k] = max(r.applied[k], g.GetGeneration())
	}
	r.mu.Unlock()
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

func (r *fanoutReporter) appliedGen(gw string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.applied[gw]
}

func (r *fanoutReporter) Pending(*irv1.GatewayGeneration, string)                       {}
func (r *fanoutReporter) Unbound(*irv1.GatewayGeneration, []controller.ListenerFailure) {}
func (r *fanoutReporter) ModulesMissing([]controller.RouteModuleGap)                    {}

// decodeOnlyEngine takes every snapshot (the agent has decoded it) and binds nothing, saying
// it bound every listener (the gate waits for binds).
type decodeOnlyEngine struct {
	mu      sync.Mutex
	version string
	bound   []proxy.BoundListener
}

func (d *decodeOnlyEngine) Apply(_ context.Context, snap *irv1.Snapshot) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.version = snap.GetVersion()
	d.bound = d.bound[:0]
	for _, l := range snap.GetListeners() {
		d.bound = append(d.bound, proxy.BoundListener{Name: l.GetName(), Protocol: l.GetProtocol(), Address: "127.0.0.1:1"})
	}
	return nil
}

func (d *decodeOnlyEngine) Version() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.version
}

func (d *decodeOnlyEngine) Bound() []proxy.BoundListener {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.bound)
}

func (d *decodeOnlyEngine) Failed() []proxy.ListenerFailure   { return nil }
func (d *decodeOnlyEngine) ListenersChanged() <-chan struct{} { return nil }
