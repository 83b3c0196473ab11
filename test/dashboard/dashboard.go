// Package dashboard reads the Grafana dashboard in deploy/grafana and names the metrics its
// PromQL expressions use, so that a test can check each against what the binaries export.
//
// It does not parse PromQL: Prometheus's parser (github.com/prometheus/prometheus/promql/parser)
// would pull the whole Prometheus module into go.mod for one test. A metric name in PromQL is an
// identifier that is not followed by "(" (a function or aggregation), is not a keyword, and is
// not an aggregation operator, not inside a label matcher {...}, a range or offset [...], a string, or the label list of
// by/without/on/ignoring/group_left/group_right. That is all Names has to know, and its test
// holds it to expressions of each of those shapes.
package dashboard

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
)

// Expr is one query of one panel.
type Expr struct {
	Panel string
	Expr  string
}

// Load returns every PromQL expression of the dashboard at path: its panels' targets (rows'
// nested panels included) and its query variables.
func Load(path string) ([]Expr, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d struct {
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []Expr
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				out = append(out, Expr{Panel: p.Title, Expr: t.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			return nil, fmt.Errorf("%s: variable %s: %w", path, v.Name, err)
		}
		// label_values(metric, label) names metric.
		if inner, ok := strings.CutPrefix(q.Query, "label_values("); ok {
			metric, _, _ := strings.Cut(inner, ",")
			out = append(out, Expr{Panel: "variable " + v.Name, Expr: strings.TrimSpace(metric)})
		}
	}
	return out, nil
}

type panel struct {
	Title   string `json:"title"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

var keywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool",
	"and", "or", "unless", "inf", "nan"}

// aggregations are the aggregation operators, which may be followed by by/without before their "(".
var aggregations = []string{"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
	"bottomk", "topk", "quantile", "limitk", "limit_ratio"}

var grouping = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}

// Names returns the metric names expr uses, sorted and without duplicates.
func Names(expr string) ([]string, error) {
	var names []string
	prevIdent := ""
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			j := strings.IndexByte(expr[i+1:], c)
			if j < 0 {
				return nil, fmt.Errorf("unterminated string at %d", i)
			}
			i += j + 2
		case c == '{' || c == '[':
			end := map[byte]byte{'{': '}', '[': ']'}[c]
			j := closing(expr, i, end)
			if j < 0 {
				return nil, fmt.Errorf("unclosed %c at %d", c, i)
			}
			i = j + 1
		case c == '(' && slices.Contains(grouping, prevIdent):
			j := strings.IndexByte(expr[i:], ')')
			if j < 0 {
				return nil, fmt.Errorf("unclosed label list at %d", i)
			}
			i += j + 1
		case isIdentStart(c):
			j := i
			for j < len(expr) && isIdent(expr[j]) {
				j++
			}
			id := expr[i:j]
			k := j
			for k < len(expr) && expr[k] == ' ' {
				k++
			}
			called := k < len(expr) && expr[k] == '('
			if !called && !slices.Contains(keywords, strings.ToLower(id)) && !slices.Contains(aggregations, strings.ToLower(id)) &&
				!strings.HasPrefix(id, "$") {
				names = append(names, id)
			}
			prevIdent = id
			i = j
			continue
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && (isIdent(expr[i]) || expr[i] == '.') {
				i++ // a number, or a duration like 5m
			}
		default:
			i++
		}
		if c != ' ' {
			prevIdent = ""
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// closing finds the index of end matching the opener at i, skipping strings.
func closing(s string, i int, end byte) int {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '"', '\'', '`':
			k := strings.IndexByte(s[j+1:], s[j])
			if k < 0 {
				return -1
			}
			j += k + 1
		case end:
			return j
		}
	}
	return -1
}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isIdent(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }
