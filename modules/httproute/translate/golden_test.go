package translate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/filters/cors"
	corstr "github.com/coxswain-labs/coxswain/modules/filters/cors/translate"
	"github.com/coxswain-labs/coxswain/modules/filters/headers"
	headerstr "github.com/coxswain-labs/coxswain/modules/filters/headers/translate"
	"github.com/coxswain-labs/coxswain/modules/filters/mirror"
	mirrortr "github.com/coxswain-labs/coxswain/modules/filters/mirror/translate"
	"github.com/coxswain-labs/coxswain/modules/filters/redirect"
	redirecttr "github.com/coxswain-labs/coxswain/modules/filters/redirect/translate"
	"github.com/coxswain-labs/coxswain/modules/filters/rewrite"
	rewritetr "github.com/coxswain-labs/coxswain/modules/filters/rewrite/translate"
	"github.com/coxswain-labs/coxswain/modules/httproute"
)

var update = flag.Bool("update", false, "rewrite testdata/*.out.json from the current output")

var fixedNow = metav1.NewTime(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))

// testOptions are the options of a golden case; an input may start with "# options: loopback".
func testOptions(in []byte) translator.Options {
	opts := translator.Options{
		Now:      func() metav1.Time { return fixedNow },
		Registry: core.NewRegistry(Kind{}, headerstr.Request{}, headerstr.Response{}, redirecttr.Translator{}, rewritetr.Translator{}),
	}
	first, _, _ := bytes.Cut(in, []byte("\n"))
	if bytes.HasPrefix(first, []byte("# options:")) && bytes.Contains(first, []byte("loopback")) {
		opts.AllowLoopbackEndpoints = true
	}
	if bytes.HasPrefix(first, []byte("# options:")) && bytes.Contains(first, []byte("mirror-cors")) {
		opts.Registry = core.NewRegistry(Kind{}, headerstr.Request{}, headerstr.Response{}, redirecttr.Translator{}, rewritetr.Translator{},
			mirrortr.Translator{}, corstr.Translator{})
	}
	return opts
}

func translateFile(t *testing.T, path string) *translator.Result {
	t.Helper()
	in, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	store, err := loadStore(path)
	if err != nil {
		t.Fatal(err)
	}
	return translator.Translate(context.Background(), store, testOptions(in))
}

// TestGolden translates testdata/<case>.in.yaml and compares with <case>.out.json.
func TestGolden(t *testing.T) {
	ins, err := filepath.Glob("testdata/*.in.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(ins) < 15 && !*update {
		t.Fatalf("want at least 15 golden cases, have %d", len(ins))
	}
	for _, in := range ins {
		name := strings.TrimSuffix(filepath.Base(in), ".in.yaml")
		t.Run(name, func(t *testing.T) {
			res := translateFile(t, in)
			checkModuleConfigs(t, res.Snapshot)
			got := render(t, res)
			out := strings.TrimSuffix(in, ".in.yaml") + ".out.json"
			if *update {
				if err := os.WriteFile(out, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(out)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("output differs from %s (run with -update and review the diff):\n%s", out, firstDiff(want, got))
			}
		})
	}
}

// golden is the rendered output: the snapshot, readable, and the statuses keyed by name.
// Conditions are shown as one line each: "Type=Status Reason (gen N): message".
type golden struct {
	Snapshot       any      `json:"snapshot"`
	GatewayClasses any      `json:"gatewayClasses,omitempty"`
	Gateways       any      `json:"gateways,omitempty"`
	ListenerSets   any      `json:"listenerSets,omitempty"`
	HTTPRoutes     any      `json:"httpRoutes,omitempty"`
	Problems       []string `json:"problems,omitempty"`
}

func render(t *testing.T, res *translator.Result) []byte {
	t.Helper()
	// protojson output is deliberately unstable in whitespace; re-encode through encoding/json.
	pj, err := protojson.MarshalOptions{EmitUnpopulated: false}.Marshal(res.Snapshot)
	if err != nil {
		t.Fatal(err)
	}
	var snap any
	if err := json.Unmarshal(pj, &snap); err != nil {
		t.Fatal(err)
	}
	classes := map[string]*gwapiv1.GatewayClassStatus{}
	for k, v := range res.GatewayClasses {
		classes[k.Name] = v
	}
	gateways := map[string]*gwapiv1.GatewayStatus{}
	for k, v := range res.Gateways {
		gateways[k.String()] = v
	}
	var listenerSets map[string]*gwapiv1.ListenerSetStatus
	for k, v := range res.ListenerSets {
		if listenerSets == nil {
			listenerSets = map[string]*gwapiv1.ListenerSetStatus{}
		}
		listenerSets[k.String()] = v
	}
	routes := map[string]*gwapiv1.RouteStatus{}
	for k, v := range res.Routes.All() {
		routes[k.Namespace+"/"+k.Name] = v
	}
	g := golden{
		Snapshot:       readable(snap),
		GatewayClasses: compactConditions(t, classes),
		Gateways:       compactConditions(t, gateways),
		ListenerSets:   compactConditions(t, listenerSets),
		HTTPRoutes:     compactConditions(t, routes),
	}
	for _, p := range res.Problems {
		g.Problems = append(g.Problems, p.Error())
	}
	b, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// readable replaces base64 module configs by the JSON they hold and PEM material by a digest.
func readable(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			s, isStr := e.(string)
			switch {
			case k == "json" && isStr:
				b, _ := base64.StdEncoding.DecodeString(s)
				var cfg any
				if json.Unmarshal(b, &cfg) == nil {
					delete(x, "json")
					x["config"] = cfg
				}
			case (k == "certificatePem" || k == "privateKeyPem") && isStr:
				b, _ := base64.StdEncoding.DecodeString(s)
				sum := sha256.Sum256(b)
				x[k] = fmt.Sprintf("%d bytes, sha256 %s", len(b), hex.EncodeToString(sum[:8]))
			default:
				x[k] = readable(e)
			}
		}
	case []any:
		for i := range x {
			x[i] = readable(x[i])
		}
	}
	return v
}

// compactConditions re-encodes v generically with every condition on one line.
func compactConditions(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var g any
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if list, ok := e.([]any); ok && k == "conditions" {
					for i, c := range list {
						m := c.(map[string]any)
						list[i] = fmt.Sprintf("%s=%s %s (gen %v): %s", m["type"], m["status"], m["reason"], orZero(m["observedGeneration"]), m["message"])
					}
					continue
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(g)
	return g
}

// checkModuleConfigs decodes every module config strictly into its type, as a proxy would.
func checkModuleConfigs(t *testing.T, s *irv1.Snapshot) {
	t.Helper()
	check := func(mc *irv1.ModuleConfig) {
		var v any
		switch mc.GetId() {
		case httproute.ModuleID:
			v = &httproute.Match{}
		case headers.RequestModuleID, headers.ResponseModuleID:
			v = &headers.Config{}
		case redirect.ModuleID:
			v = &redirect.Config{}
		case rewrite.ModuleID:
			v = &rewrite.Config{}
		case mirror.ModuleID:
			v = &mirror.Config{}
		case cors.ModuleID:
			v = &cors.Config{}
		default:
			t.Errorf("unexpected module %q", mc.GetId())
			return
		}
		if err := core.DecodeStrict(mc.GetJson(), v); err != nil {
			t.Errorf("module %s: %v", mc.GetId(), err)
		}
	}
	for _, l := range s.GetListeners() {
		for _, srv := range l.GetServers() {
			for _, vh := range srv.GetVirtualHosts() {
				for _, r := range vh.GetRoutes() {
					check(r.GetMatch())
					for _, f := range r.GetFilters() {
						check(f)
					}
					for _, b := range r.GetBackends() {
						for _, f := range b.GetFilters() {
							check(f)
						}
					}
				}
			}
		}
	}
}

func firstDiff(want, got []byte) string {
	wl, gl := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return fmt.Sprintf("line %d:\n  want: %s\n  got:  %s", i+1, w, g)
		}
	}
	return ""
}

func orZero(v any) any {
	if v == nil {
		return 0
	}
	return v
}
