package integration

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// Where BenchmarkPropagation's route latency goes. The controller's "published" log line says,
// for each snapshot it published, how long the coalescer held the first change back (waited),
// listing the caches, the translation, what the driver did before publishing (prepared: the
// status writer's desired state, events) and the publish itself (applied: the in-process proxy's
// build, of which the proxy's own "snapshot applied" line says how long it hashed). The
// benchmark knows when each create call returned and when the first 200 came; the log line's
// time (milliseconds) and its changeLag (from the informer's event) place the publication
// between them: delivered is from the create call returning to the informer's event, detected
// from the publication to the first 200 (the benchmark's polling: a GET every 1 ms plus the
// GET's own time). So route latency = delivered + changeLag + detected, each within a
// millisecond of rounding.

// logTimeLayout is the console log's time format (cmd/proxycmd/log.go).
const logTimeLayout = "15:04:05.000"

// created is one timed route creation: when its create call returned and when it was served.
type created struct{ returned, served time.Time }

// publication is one "published" line of the controller's log.
type publication struct {
	at                                                 time.Time
	waited, listed, translated, prepared, applied, lag time.Duration
	// The translation's wall time split (controller/threadtime.go): its CPU, its wait in the
	// kernel's run queue, its wait for the Go scheduler, and the collections ended meanwhile.
	xlateCPU, xlateQueued, xlateGoWait time.Duration
	xlateGCs                           int
	translations                       int
	full                               bool // a full translation, not incremental
}

// breakdown reports the mean of each share of the route latency over the routes whose
// publication it found in log (the controller's output since the first create), and how many
// publications and translations each route took.
func breakdown(b *testing.B, log string, routes []created) {
	pubs, hashed := parseControllerLog(b, log, routes[0].returned)
	var delivered, detected, waited, listed, translated, prepared, applied, lag time.Duration
	var xlateCPU, xlateQueued, xlateGoWait time.Duration
	found, translations, xlateGCs := 0, 0, 0
	for _, r := range routes {
		// The last publication before the first 200: the one that served it.
		i := slices.IndexFunc(pubs, func(p publication) bool { return p.at.After(r.served.Add(time.Millisecond)) })
		if i < 0 {
			i = len(pubs)
		}
		if i == 0 || pubs[i-1].at.Before(r.returned.Add(-time.Millisecond)) {
			continue
		}
		p := pubs[i-1]
		found++
		delivered += p.at.Sub(r.returned) - p.lag
		detected += r.served.Sub(p.at)
		waited, listed, translated, prepared, applied, lag = waited+p.waited, listed+p.listed, translated+p.translated,
			prepared+p.prepared, applied+p.applied, lag+p.lag
		xlateCPU, xlateQueued, xlateGoWait, xlateGCs = xlateCPU+p.xlateCPU, xlateQueued+p.xlateQueued, xlateGoWait+p.xlateGoWait, xlateGCs+p.xlateGCs
	}
	full := 0
	for _, p := range pubs {
		translations += p.translations
		if p.full {
			full++
		}
	}
	if found == 0 {
		b.Logf("no publication found in the controller's log for the routes created")
		return
	}
	mean := func(d time.Duration) float64 { return ms(d) / float64(found) }
	b.ReportMetric(float64(found), "routes-traced")
	b.ReportMetric(mean(delivered), "delivered-ms")
	b.ReportMetric(mean(waited), "waited-ms")
	b.ReportMetric(mean(listed), "listed-ms")
	b.ReportMetric(mean(translated), "translated-ms")
	b.ReportMetric(mean(xlateCPU), "translated-cpu-ms")
	b.ReportMetric(mean(xlateQueued), "translated-runqueue-ms")
	b.ReportMetric(mean(xlateGoWait), "translated-gowait-ms")
	b.ReportMetric(float64(xlateGCs)/float64(found), "translated-gcs")
	b.ReportMetric(mean(prepared), "prepared-ms")
	b.ReportMetric(mean(applied), "applied-ms")
	b.ReportMetric(mean(lag), "change-to-publish-ms")
	b.ReportMetric(mean(detected), "detected-ms")
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

// parseControllerLog reads the "published" lines and the in-process proxy's "snapshot applied"
// hashing times from the controller's console log. Times of day are placed on from's date.
func parseControllerLog(b *testing.B, log string, from time.Time) ([]publication, []time.Duration) {
	var pubs []publication
	var hashed []time.Duration
	for line := range strings.Lines(log) {
		fields := strings.Split(strings.TrimSpace(line), "\t")
		if len(fields) < 4 {
			continue
		}
		var f map[string]any
		if json.Unmarshal([]byte(fields[len(fields)-1]), &f) != nil {
			continue
		}
		dur := func(k string) time.Duration {
			s, _ := f[k].(string)
			d, _ := time.ParseDuration(s)
			return d
		}
		// time, level, logger name, (caller,) message, fields: the message is the one before
		// the fields.
		switch fields[len(fields)-2] {
		case "snapshot applied":
			if _, ok := f["hashed"]; ok {
				hashed = append(hashed, dur("hashed"))
			}
		case "published":
			tod, err := time.ParseInLocation(logTimeLayout, fields[0], time.Local)
			if err != nil {
				b.Fatalf("log time %q: %v", fields[0], err)
			}
			y, mo, d := from.Date()
			at := time.Date(y, mo, d, tod.Hour(), tod.Minute(), tod.Second(), tod.Nanosecond(), time.Local)
			n, _ := f["translations"].(float64)
			gcs, _ := f["translatedGCs"].(float64)
			pubs = append(pubs, publication{at: at, waited: dur("waited"), listed: dur("listed"), translated: dur("translated"),
				prepared: dur("prepared"), applied: dur("applied"), lag: dur("changeLag"), translations: int(n), full: f["kind"] == "full",
				xlateCPU: dur("translatedCPU"), xlateQueued: dur("translatedRunQueue"), xlateGoWait: dur("translatedGoWait"), xlateGCs: int(gcs)})
		}
	}
	return pubs, hashed
}
