package dashboard

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/coxswain-labs/coxswain/core/proxy"
)

// metricLiteral is a metric name as the code spells it: a whole string literal (a prefix the
// code completes, like "coxswain_proxy_listener_", ends in "_" and is not one).
var metricLiteral = regexp.MustCompile(`"(coxswain_[a-z0-9_]*[a-z0-9])"`)

// docName is a metric name in backquotes.
var docName = regexp.MustCompile("`(coxswain_[a-z0-9_]*[a-z0-9])`")

// TestObservabilityDocListsEveryMetric: the metric tables of docs/observability.md name every
// metric the binaries' code registers (a name literal under core/, modules/, controller/ and
// cmd/, and the listener series the stock listeners report) and nothing else, so a new metric
// without a line in the doc, or a line about a metric that is gone, fails here.
func TestObservabilityDocListsEveryMetric(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "observability.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for line := range strings.Lines(string(doc)) {
		if !strings.HasPrefix(line, "| `coxswain_") {
			continue // only a table row's first cell defines a metric; prose may mention one
		}
		first := strings.SplitN(line, "|", 3)[1]
		for _, m := range docName.FindAllStringSubmatch(first, -1) {
			documented[m[1]] = true
		}
	}

	code := map[string]string{} // name -> a file that registers it
	for _, dir := range []string{"core", "modules", "controller", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range metricLiteral.FindAllSubmatch(b, -1) {
				code[string(m[1])] = path
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range proxy.ListenerMetricNames() {
		code[name] = "core/proxy/statsmetrics.go (listener stats)"
	}
	if len(code) < 50 {
		t.Fatalf("only %d metric names found in the code: is the scan broken?", len(code))
	}

	var missing, stale []string
	for name, file := range code {
		if !documented[name] {
			missing = append(missing, name+" ("+file+")")
		}
	}
	for name := range documented {
		if _, ok := code[name]; !ok {
			stale = append(stale, name)
		}
	}
	slices.Sort(missing)
	slices.Sort(stale)
	for _, m := range missing {
		t.Errorf("metric %s is not in a table of docs/observability.md", m)
	}
	for _, s := range stale {
		t.Errorf("docs/observability.md lists %s, which no code registers", s)
	}
}
