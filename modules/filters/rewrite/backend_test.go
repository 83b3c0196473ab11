package rewrite_test

import (
	"testing"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/filters/filtertest"
	"github.com/coxswain-labs/coxswain/modules/filters/pathmod"
	"github.com/coxswain-labs/coxswain/modules/filters/rewrite"
	"github.com/coxswain-labs/coxswain/modules/httproute"
)

// TestBackendURLRewrite (HTTPRouteBackendURLRewrite): URLRewrite in a backendRef's filters,
// through the real engine: the backend receives the rewritten path and Host, for
// ReplaceFullPath and for ReplacePrefixMatch of the rule's PathPrefix.
func TestBackendURLRewrite(t *testing.T) {
	prefixMatch := &httproute.Match{Path: &httproute.PathMatch{Type: httproute.MatchPathPrefix, Value: "/prefix"}}
	cases := []struct {
		name     string
		match    *httproute.Match
		config   rewrite.Config
		target   string
		wantPath string
		wantHost string
	}{
		{"ReplaceFullPath", nil, rewrite.Config{Path: &pathmod.Modifier{Type: pathmod.ReplaceFullPath, ReplaceFullPath: "/rewritten-full"}},
			"/full/original", "/rewritten-full", ""},
		{"ReplacePrefixMatch", prefixMatch, rewrite.Config{Path: &pathmod.Modifier{Type: pathmod.ReplacePrefixMatch, MatchedPrefix: "/prefix", ReplacePrefixMatch: "/rewritten-prefix"}},
			"/prefix/original", "/rewritten-prefix/original", ""},
		{"hostname", nil, rewrite.Config{Hostname: "backend.example"}, "/x", "/x", "backend.example"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := filtertest.Start(t, nil, filtertest.Options{Match: c.match,
				BackendFilters: []*irv1.ModuleConfig{core.MustConfig(rewrite.ModuleID, c.config)}})
			ex := h.Get(t, c.target)
			if ex.Upstream == nil || ex.Upstream.Path != c.wantPath {
				t.Fatalf("status %d, upstream %+v; want path %s", ex.Status, ex.Upstream, c.wantPath)
			}
			if c.wantHost != "" && ex.Upstream.Host != c.wantHost {
				t.Errorf("upstream Host %q, want %q", ex.Upstream.Host, c.wantHost)
			}
		})
	}
}
