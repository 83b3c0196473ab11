package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// Where BenchmarkPropagation's route latency goes, stage by stage, per route. The controller's
// "published" log line says, for each snapshot it published, how long the coalescer held the
// first change back (waited), listing the caches, the translation (and where its wall time went:
// CPU, the kernel's run queue, the Go scheduler), what the driver did before publishing
// (prepared: the status writer's desired state, events) and the publish itself (applied: the
// in-process proxy's build, or handing the snapshot to discovery), and changeLag (from the
// informer's event to the end of the publication). With the proxy apart, the proxy's "push
// applied" line says how long it decoded the push (a delta: rebuilt and resealed the snapshot)
// and how long the engine's apply took. The benchmark knows when each create call returned and
// when the first successful GET was sent (bench_poll_test.go). The log lines' times
// (microseconds, both processes on one clock) place each stage:
//
//	delivered  create call returned -> the informer's event (API server, etcd, watch)
//	waited     the coalescer's hold
//	listed     the caches into a Store
//	translated the translation (cpu + runqueue + gowait)
//	prepared   statuses handed to the writer, events, ACME
//	applied    the publish: in-process, the table build and swap; apart, the hand-over
//	wire       (apart) publication -> the agent received the push: discovery's delta encoding,
//	           gRPC over mutual TLS, the agent's goroutine getting a CPU
//	decoded    (apart) the agent's decoding, delta rebuild and reseal
//	proxyApply (apart) the proxy's table build and swap
//	detected   served -> the successful GET was sent: the polling, at most pollEvery
//
// so a route's latency is the sum of its stages.

// logSlack is how much later than the successful GET's send a line about the swap that served
// it may be written (the GET is answered between the swap and the line). Stages ending there
// (detected) may come out slightly negative.
const logSlack = 5 * time.Millisecond

// logTimeLayout is the console log's time format (cmd/proxycmd/log.go).
const logTimeLayout = "15:04:05.000000"

// created is one timed route creation: when its create call returned and when the successful
// GET was sent.
type created struct{ returned, served time.Time }

// publication is one "published" line of the controller's log.
type publication struct {
	at                                                 time.Time
	version                                            string
	waited, listed, translated, prepared, applied, lag time.Duration
	// The translation's wall time split (controller/threadtime.go): its CPU, its wait in the
	// kernel's run queue, its wait for the Go scheduler, and the collections ended meanwhile.
	xlateCPU, xlateQueued, xlateGoWait time.Duration
	xlateGCs                           int
	translations                       int
	full                               bool // a full translation, not incremental
}

// pushApplied is one "push applied" line of a proxy's log: when the engine's apply ended.
type pushApplied struct {
	at               time.Time
	decoded, applied time.Duration
}

// stageNames are the stages in the order of a route's latency; the apart-only ones are skipped
// for the in-process proxy.
var stageNames = []string{"delivered", "waited", "listed", "translated", "translated-cpu", "translated-runqueue",
	"translated-gowait", "prepared", "applied", "wire", "decoded", "proxy-apply", "detected"}

// breakdown reports each stage of the route latency over the routes whose publication it found
// in ctlLog (the controller's output since the first create) and, with the proxy apart, in
// proxyLog: the mean as <stage>-ms and, in the log, p50 and p99 of every stage; and how many
// publications and translations each route took.
func breakdown(b *testing.B, ctlLog, proxyLog string, routes []created) {
	pubs, hashed := parseControllerLog(b, ctlLog, routes[0].returned)
	var pushes map[string]pushApplied
	if proxyLog != "" {
		pushes = parseProxyLog(b, proxyLog, routes[0].returned)
	}
	stages := map[string][]time.Duration{}
	var xlateGCs int
	for n, r := range routes {
		// The last publication before the successful GET was answered: the one that served it.
		// Its line is written after the swap, so it may come a little after the GET was sent,
		// but not after the next route's create call returned.
		bound := r.served.Add(logSlack)
		if n+1 < len(routes) && routes[n+1].returned.Before(bound) {
			bound = routes[n+1].returned
		}
		i := slices.IndexFunc(pubs, func(p publication) bool { return p.at.After(bound) })
		if i < 0 {
			i = len(pubs)
		}
		if i == 0 || pubs[i-1].at.Before(r.returned) {
			continue
		}
		p := pubs[i-1]
		servedFrom := p.at // when the serving table was in place
		if pushes != nil {
			push, ok := pushes[p.version]
			if !ok || push.at.After(bound) {
				continue // not applied by the proxy before it served: another publication did
			}
			received := push.at.Add(-push.applied - push.decoded)
			stages["wire"] = append(stages["wire"], received.Sub(p.at))
			stages["decoded"] = append(stages["decoded"], push.decoded)
			stages["proxy-apply"] = append(stages["proxy-apply"], push.applied)
			servedFrom = push.at
		}
		stages["delivered"] = append(stages["delivered"], p.at.Sub(r.returned)-p.lag)
		stages["waited"] = append(stages["waited"], p.waited)
		stages["listed"] = append(stages["listed"], p.listed)
		stages["translated"] = append(stages["translated"], p.translated)
		stages["translated-cpu"] = append(stages["translated-cpu"], p.xlateCPU)
		stages["translated-runqueue"] = append(stages["translated-runqueue"], p.xlateQueued)
		stages["translated-gowait"] = append(stages["translated-gowait"], p.xlateGoWait)
		stages["prepared"] = append(stages["prepared"], p.prepared)
		stages["applied"] = append(stages["applied"], p.applied)
		stages["detected"] = append(stages["detected"], r.served.Sub(servedFrom))
		xlateGCs += p.xlateGCs
	}
	translations, full := 0, 0
	for _, p := range pubs {
		translations += p.translations
		if p.full {
			full++
		}
	}
	found := len(stages["delivered"])
	if found == 0 {
		b.Logf("no publication found in the controller's log for the routes created")
		return
	}
	var table strings.Builder
	fmt.Fprintf(&table, "where the route latency went, %d routes traced (ms):\n%-20s %8s %8s %8s\n", found, "stage", "p50", "p99", "mean")
	for _, name := range stageNames {
		d := stages[name]
		if len(d) == 0 {
			continue
		}
		var sum time.Duration
		for _, x := range d {
			sum += x
		}
		mean := ms(sum) / float64(len(d))
		b.ReportMetric(mean, name+"-ms")
		fmt.Fprintf(&table, "%-20s %8.2f %8.2f %8.2f\n", name, ms(percentile(d, 50)), ms(percentile(d, 99)), mean)
	}
	// On stderr: the benchmark's log is cut after a few lines.
	fmt.Fprintf(os.Stderr, "%s: %s", b.Name(), table.String())
	b.ReportMetric(float64(found), "routes-traced")
	b.ReportMetric(float64(xlateGCs)/float64(found), "translated-gcs")
	b.ReportMetric(float64(len(pubs))/float64(len(routes)), "publishes/route")
	b.ReportMetric(float64(translations)/float64(len(routes)), "translations/route")
	b.ReportMetric(float64(full), "full-publishes")
	if len(hashed) > 0 {
		var sum time.Duration
		for _, h := range hashed {
			sum += h
		}
		b.ReportMetric(ms(sum)/float64(len(hashed)), "proxy-hashed-ms")
	}
}

// logLine is one console log line: its time (placed on from's date), message and fields.
type logLine struct {
	at     time.Time
	msg    string
	fields map[string]any
}

// logLines reads a console log's lines that carry JSON fields.
func logLines(b *testing.B, log string, from time.Time) []logLine {
	var out []logLine
	for line := range strings.Lines(log) {
		fields := strings.Split(strings.TrimSpace(line), "\t")
		if len(fields) < 4 {
			continue
		}
		var f map[string]any
		if json.Unmarshal([]byte(fields[len(fields)-1]), &f) != nil {
			continue
		}
		tod, err := time.ParseInLocation(logTimeLayout, fields[0], time.Local)
		if err != nil {
			b.Fatalf("log time %q: %v", fields[0], err)
		}
		y, mo, d := from.Date()
		at := time.Date(y, mo, d, tod.Hour(), tod.Minute(), tod.Second(), tod.Nanosecond(), time.Local)
		// time, level, logger name, (caller,) message, fields: the message is the one before
		// the fields.
		out = append(out, logLine{at: at, msg: fields[len(fields)-2], fields: f})
	}
	return out
}

func (l logLine) dur(k string) time.Duration {
	s, _ := l.fields[k].(string)
	d, _ := time.ParseDuration(s)
	return d
}

// parseControllerLog reads the "published" lines and the in-process proxy's "snapshot applied"
// hashing times from the controller's console log.
func parseControllerLog(b *testing.B, log string, from time.Time) ([]publication, []time.Duration) {
	var pubs []publication
	var hashed []time.Duration
	for _, l := range logLines(b, log, from) {
		switch l.msg {
		case "snapshot applied":
			if _, ok := l.fields["hashed"]; ok {
				hashed = append(hashed, l.dur("hashed"))
			}
		case "published":
			n, _ := l.fields["translations"].(float64)
			gcs, _ := l.fields["translatedGCs"].(float64)
			v, _ := l.fields["version"].(string)
			pubs = append(pubs, publication{at: l.at, version: v, waited: l.dur("waited"), listed: l.dur("listed"), translated: l.dur("translated"),
				prepared: l.dur("prepared"), applied: l.dur("applied"), lag: l.dur("changeLag"), translations: int(n), full: l.fields["kind"] == "full",
				xlateCPU: l.dur("translatedCPU"), xlateQueued: l.dur("translatedRunQueue"), xlateGoWait: l.dur("translatedGoWait"), xlateGCs: int(gcs)})
		}
	}
	return pubs, hashed
}

// parseProxyLog reads a proxy process's "push applied" lines by version.
func parseProxyLog(b *testing.B, log string, from time.Time) map[string]pushApplied {
	out := map[string]pushApplied{}
	for _, l := range logLines(b, log, from) {
		if l.msg != "push applied" {
			continue
		}
		v, _ := l.fields["version"].(string)
		out[v] = pushApplied{at: l.at, decoded: l.dur("decoded"), applied: l.dur("applied")}
	}
	return out
}
