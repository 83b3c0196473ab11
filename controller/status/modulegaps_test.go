package status

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestWithModuleGaps(t *testing.T) {
	parent := func(gw string, section string) gwapiv1.RouteParentStatus {
		ref := gwapiv1.ParentReference{Name: gwapiv1.ObjectName(gw)}
		if section != "" {
			ref.SectionName = ptr(gwapiv1.SectionName(section))
		}
		return gwapiv1.RouteParentStatus{ParentRef: ref, Conditions: []metav1.Condition{cond("Accepted", "True", "Accepted", 3, t0)}}
	}
	gap := func(gw, section, proxy string, rule int, dropped bool) RouteModuleGap {
		return RouteModuleGap{Kind: "HTTPRoute", Namespace: "apps", Name: "r", Rule: rule, GatewayNamespace: "apps",
			GatewayName: gw, Section: section, Proxy: proxy, Module: "filter.x", Dropped: dropped}
	}
	tests := []struct {
		name    string
		parents []gwapiv1.RouteParentStatus
		gaps    []RouteModuleGap
		answer  string
		want    []string // per parent: "" for no condition, else substrings of its message joined by "|"
	}{
		{"no gaps: no condition", []gwapiv1.RouteParentStatus{parent("gw", "")}, nil, "", []string{""}},
		{"a filter missing on one proxy", []gwapiv1.RouteParentStatus{parent("gw", "")},
			[]RouteModuleGap{gap("gw", "http", "p1", 0, false)}, "", []string{"Rule 0 answers 500 on proxy p1|module filter.x"}},
		{"a kind whose clients see another error", []gwapiv1.RouteParentStatus{parent("gw", "")},
			[]RouteModuleGap{gap("gw", "http", "p1", 0, false)}, "gRPC status UNAVAILABLE",
			[]string{"Rule 0 answers gRPC status UNAVAILABLE on proxy p1"}},
		{"proxies of one effect are listed together", []gwapiv1.RouteParentStatus{parent("gw", "")},
			[]RouteModuleGap{gap("gw", "http", "p1", 1, true), gap("gw", "http", "p2", 1, true)}, "", []string{"Rule 1 is left out on proxy p1, p2"}},
		{"only the parents concerned", []gwapiv1.RouteParentStatus{parent("gw", "http"), parent("gw", "https"), parent("other", "")},
			[]RouteModuleGap{gap("gw", "http", "p1", 0, false)}, "", []string{"p1", "", ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			desired := &gwapiv1.RouteStatus{Parents: tc.parents}
			before := len(tc.parents[0].Conditions)
			got := withModuleGaps(desired, "apps", tc.gaps, tc.answer, t1)
			if len(desired.Parents[0].Conditions) != before {
				t.Fatal("desired was modified")
			}
			for i, w := range tc.want {
				c := meta.FindStatusCondition(got.Parents[i].Conditions, ConditionModulesAvailable)
				if w == "" {
					if c != nil {
						t.Fatalf("parent %d: unexpected %+v", i, c)
					}
					continue
				}
				if c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonModuleMissing || c.ObservedGeneration != 3 {
					t.Fatalf("parent %d: condition %+v", i, c)
				}
				for _, m := range strings.Split(w, "|") {
					if !strings.Contains(c.Message, m) {
						t.Errorf("parent %d: message %q lacks %q", i, c.Message, m)
					}
				}
				if a := meta.FindStatusCondition(got.Parents[i].Conditions, "Accepted"); a == nil || a.Status != "True" {
					t.Errorf("parent %d: Accepted %+v", i, a)
				}
			}
		})
	}
}
