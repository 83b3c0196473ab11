package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/controller/discovery/discoverytest"
	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/core/proxy"
	"github.com/coxswain-labs/coxswain/core/proxy/agent"
	_ "github.com/coxswain-labs/coxswain/modules/standard"
)

// BenchmarkFanout measures one controller pushing route changes to 100 connected proxies over
// mutual-TLS gRPC on loopback, at 5,000 HTTPRoutes (10,000 IR routes: one Gateway, two rules per
// route, as translatortest.SyntheticStore). The controller is a process of its own (this test
// fanoutctl, built by the benchmark), so its CPU is measured alone; the 100 agents run in
// this process, each with a real proxy engine (engine=proxy: decode, incremental table build,
// swap) or one that only decodes (engine=decode-only: what the protocol itself costs a proxy).
// Each change is one route's path plus a new Gateway generation (which the gate waits for). It
// reports, over 10 changes:
//
//   - last-ack-p50-ms, last-ack-p99-ms: from Publish to the gate seeing every proxy acknowledge;
//   - ack-p50-ms, ack-p99-ms: from Publish to each proxy's acknowledgement (every proxy, change);
//   - ctl-cpu-ms/push: the controller process's CPU per change, until the last acknowledgement;
//   - push-MB: the encoded snapshot;
//   - sent-KB/proxy: what each proxy was sent per change, on average: a delta (the agents
//     announce deltas; FANOUT_FULL_SNAPSHOTS=1 makes them announce none, as older proxies), or
//     the snapshot.
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
			eng = &discoverytest.DecodeOnly{}
		}
		ag, err := agent.New(agent.Options{Log: zap.NewNop(), Engine: eng, Modules: modules, Addresses: []string{ctl.addr},
			TokenFile: tokenFile, TrustBundleFile: filepath.Join(dir, "ca.crt"), Node: fmt.Sprintf("p%03d", i),
			MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second, FullSnapshots: os.Getenv("FANOUT_FULL_SNAPSHOTS") == "1"})
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() { _ = ag.Run(ctx) })
	}
	ctl.ask(b, fmt.Sprintf("wait %d", proxies)) // every proxy acknowledged the first snapshot

	const changes = 10
	var last, each []time.Duration
	var cpu time.Duration
	var pushBytes, sent float64
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
		sent += float64(r.Sent)
	}
	b.ReportMetric(ms(percentile(last, 50)), "last-ack-p50-ms")
	b.ReportMetric(ms(percentile(last, 99)), "last-ack-p99-ms")
	b.ReportMetric(ms(percentile(each, 50)), "ack-p50-ms")
	b.ReportMetric(ms(percentile(each, 99)), "ack-p99-ms")
	b.ReportMetric(ms(cpu)/changes, "ctl-cpu-ms/push")
	b.ReportMetric(pushBytes/1e6, "push-MB")
	b.ReportMetric(sent/changes/1e3, "sent-KB/proxy")
}

const fanoutToken = "fanout-token"

// fanoutResult is what the controller process answers a publish with (fanoutctl's result).
type fanoutResult struct {
	Last  time.Duration   // Publish to the gate's Applied
	Each  []time.Duration // Publish to each proxy's acknowledgement
	Bytes int             // the encoded snapshot
	Sent  int             // what each proxy was sent, on average
}

type fanoutProcess struct {
	cmd  *exec.Cmd
	in   io.Writer
	out  *bufio.Scanner
	addr string
}

func startFanoutController(b *testing.B, dir string, routes int) *fanoutProcess {
	bin := filepath.Join(dir, "fanoutctl")
	build := exec.Command("go", "build", "-o", bin, "github.com/coxswain-labs/coxswain/test/integration/fanoutctl")
	build.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("go build ./test/integration/fanoutctl: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-dir", dir, "-routes", strconv.Itoa(routes), "-token", fanoutToken)
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

// answer reads the controller process's next answer line ("= <text>").
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
