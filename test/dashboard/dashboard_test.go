package dashboard

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestNames(t *testing.T) {
	cases := []struct {
		expr string
		want []string
	}{
		{`up`, []string{"up"}},
		{`sum by (gateway, route) (rate(coxswain_proxy_requests_total{gateway=~"$gateway",code_class=~"5xx|aborted"}[$__rate_interval]))`,
			[]string{"coxswain_proxy_requests_total"}},
		{`histogram_quantile(0.99, sum by (le) (rate(a_bucket[5m] offset 1h)))`, []string{"a_bucket"}},
		{`a / on(instance) group_left(version) b`, []string{"a", "b"}},
		{`sum without (pod) (a) and b unless c or d > bool 1`, []string{"a", "b", "c", "d"}},
		{`count by (route) (coxswain_proxy_circuit_breaker_state == 1)`, []string{"coxswain_proxy_circuit_breaker_state"}},
		{`label_replace(x, "dst", "$1", "src", "(.*)")`, []string{"x"}},
		{`max (y{a="{not a metric}"})`, []string{"y"}},
	}
	for _, c := range cases {
		got, err := Names(c.expr)
		if err != nil {
			t.Errorf("%s: %v", c.expr, err)
			continue
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("Names(%s) = %v, want %v", c.expr, got, c.want)
		}
	}
	if _, err := Names(`rate(x[5m]`); err != nil {
		t.Errorf("an unbalanced ( is the parser's business, not ours: %v", err)
	}
	if _, err := Names(`x{a="b"`); err == nil {
		t.Error("an unclosed matcher passed")
	}
}

// TestDashboardNamesOnlyCoxswainMetrics loads deploy/grafana/coxswain.json: every expression
// names at least one metric, and every metric is Coxswain's own (the integration test checks
// that the binaries export each).
func TestDashboardNamesOnlyCoxswainMetrics(t *testing.T) {
	exprs, err := Load(filepath.Join("..", "..", "deploy", "grafana", "coxswain.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(exprs) < 20 {
		t.Fatalf("only %d expressions", len(exprs))
	}
	for _, e := range exprs {
		names, err := Names(e.Expr)
		if err != nil {
			t.Errorf("%s: %s: %v", e.Panel, e.Expr, err)
			continue
		}
		if len(names) == 0 {
			t.Errorf("%s: %s names no metric", e.Panel, e.Expr)
		}
		for _, n := range names {
			if !strings.HasPrefix(n, "coxswain_") {
				t.Errorf("%s: %s names %s, not a Coxswain metric", e.Panel, e.Expr, n)
			}
		}
	}
}
