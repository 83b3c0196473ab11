// Command fanoutctl is the controller process of test/integration's BenchmarkFanout: a discovery
// server on loopback with a fresh CA, which accepts one bearer token as the shared proxies'
// ServiceAccount and publishes the translation of translatortest.SyntheticStore(routes). It is
// a process of its own so that the benchmark measures its CPU apart from the 100 agents'.
//
// It writes the CA bundle to DIR/ca.crt and prints "= <address>", then answers each command on
// its stdin with one line "= ...": "wait N" once N proxies acknowledged the latest snapshot;
// "prepare G" once it made the next route change (generation G, not yet published); "publish"
// once the gate saw every proxy acknowledge it, with a JSON result.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	"github.com/coxswain-labs/coxswain/modules/httproute"
	_ "github.com/coxswain-labs/coxswain/modules/httproute/translate"
	_ "github.com/coxswain-labs/coxswain/modules/standard"
)

// result is what "publish" answers.
type result struct {
	Last  time.Duration   // Publish to the gate's Applied
	Each  []time.Duration // Publish to each proxy's acknowledgement
	Bytes int             // the encoded snapshot
}

func main() {
	dir := flag.String("dir", "", "where to write ca.crt")
	routes := flag.Int("routes", 5000, "HTTPRoutes in the synthetic store")
	token := flag.String("token", "", "the bearer token proxies present")
	flag.Parse()
	if err := run(*dir, *routes, *token); err != nil {
		log.Fatal(err)
	}
}

func run(dir string, routes int, token string) error {
	certPEM, keyPEM, err := discovery.NewCA("fanout.coxswain", time.Now())
	if err != nil {
		return err
	}
	ca, err := discovery.LoadCA("fanout.coxswain", certPEM, keyPEM)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), ca.Bundle(), 0o600); err != nil {
		return err
	}
	srv, err := discovery.New(discovery.Options{Log: zap.NewNop(), CA: ca, SharedProxies: []string{"coxswain-system/coxswain-proxy"},
		Authenticate: func(_ context.Context, got string) (string, string, error) {
			if got != token {
				return "", "", discovery.ErrUnauthenticated
			}
			return "coxswain-system", "coxswain-proxy", nil
		}})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()
	report := &reporter{applied: map[string]int64{}, changed: make(chan struct{}, 1)}
	pub, err := srv.NewPublisher(context.Background(), report)
	if err != nil {
		return err
	}
	defer func() { _ = pub.Close(context.Background()) }()

	res := translator.Translate(context.Background(), translatortest.SyntheticStore(routes),
		translator.Options{Registry: core.Freeze(), AllowLoopbackEndpoints: true})
	base := res.Snapshot
	if len(base.GetListeners()) != 1 {
		return fmt.Errorf("synthetic translation: %d listeners, problems %v", len(base.GetListeners()), res.Problems)
	}
	base.Listeners[0].Address, base.Listeners[0].Port = "127.0.0.1", 0 // every proxy binds a free port
	current, err := routeChange(base, 1)
	if err != nil {
		return err
	}
	if err := pub.Publish(context.Background(), current); err != nil {
		return err
	}
	var next *irv1.Snapshot
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
			if next, err = routeChange(base, gen); err != nil {
				return err
			}
			fmt.Println("= ok")
		case "publish":
			gen := next.GetGateways()[0].GetGeneration()
			gw := next.GetGateways()[0].GetNamespace() + "/" + next.GetGateways()[0].GetName()
			start := time.Now()
			if err := pub.Publish(context.Background(), next); err != nil {
				return err
			}
			for report.appliedGen(gw) < gen {
				<-report.changed
			}
			r := result{Last: time.Since(start)}
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
		default:
			return fmt.Errorf("unknown command %q", in.Text())
		}
	}
	return in.Err()
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
func routeChange(base *irv1.Snapshot, gen int64) (*irv1.Snapshot, error) {
	l := shallow(base.Listeners[0])
	srv := shallow(l.Servers[0])
	vhs := slices.Clone(srv.VirtualHosts)
	k := len(vhs) / 2
	vh := shallow(vhs[k])
	vh.Routes = slices.Clone(vh.Routes)
	r := shallow(vh.Routes[0])
	m, err := json.Marshal(httproute.Match{Path: &httproute.PathMatch{Type: httproute.MatchPathPrefix, Value: "/changed-" + strconv.FormatInt(gen, 10)}})
	if err != nil {
		return nil, err
	}
	r.Match = &irv1.ModuleConfig{Id: httproute.ModuleID, Json: m}
	vh.Routes[0], vhs[k] = r, vh
	srv.VirtualHosts = vhs
	l.Servers = []*irv1.Server{srv}
	out := &irv1.Snapshot{Listeners: []*irv1.Listener{l}, Clusters: base.GetClusters(), Secrets: base.GetSecrets()}
	for _, g := range base.GetGateways() {
		out.Gateways = append(out.Gateways, &irv1.GatewayGeneration{Namespace: g.GetNamespace(), Name: g.GetName(), Generation: gen})
	}
	return out, irv1.Seal(out)
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

// reporter records the generations the gate reports applied.
type reporter struct {
	mu      sync.Mutex
	applied map[string]int64
	changed chan struct{}
}

var _ controller.Reporter = (*reporter)(nil)

func (r *reporter) Applied(gws []*irv1.GatewayGeneration) {
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

func (r *reporter) appliedGen(gw string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.applied[gw]
}

func (r *reporter) Pending(*irv1.GatewayGeneration, string)                       {}
func (r *reporter) Unbound(*irv1.GatewayGeneration, []controller.ListenerFailure) {}
func (r *reporter) ModulesMissing([]controller.RouteModuleGap)                    {}
