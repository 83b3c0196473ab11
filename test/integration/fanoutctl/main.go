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
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/coxswain-labs/coxswain/controller"
	"github.com/coxswain-labs/coxswain/controller/discovery"
	"github.com/coxswain-labs/coxswain/controller/discovery/discoverytest"
	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/controller/translator/translatortest"
	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	_ "github.com/coxswain-labs/coxswain/modules/httproute/translate"
	_ "github.com/coxswain-labs/coxswain/modules/standard"
)

// result is what "publish" answers.
type result struct {
	Last  time.Duration   // Publish to the gate's Applied
	Each  []time.Duration // Publish to each proxy's acknowledgement
	Bytes int             // the encoded snapshot
	Sent  int             // what each proxy was sent, on average: the snapshot, or a delta
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
	current, err := discoverytest.RouteChange(base, 1)
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
			if next, err = discoverytest.RouteChange(base, gen); err != nil {
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
			sent := 0
			for _, p := range f.Proxies {
				if p.AckedVersion == next.GetVersion() {
					r.Each = append(r.Each, p.AckedAt.Sub(f.PublishedAt))
					sent += p.LastPushBytes
				}
			}
			if len(r.Each) > 0 {
				r.Sent = sent / len(r.Each)
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
