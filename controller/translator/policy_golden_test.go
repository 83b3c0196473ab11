package translator_test

import (
	"bytes"
	"context"
	"encoding/base64"
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

	"github.com/coxswain-labs/coxswain/controller/standalone"
	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	grpctranslate "github.com/coxswain-labs/coxswain/modules/grpcroute/translate"
	httptranslate "github.com/coxswain-labs/coxswain/modules/httproute/translate"
	"github.com/coxswain-labs/coxswain/modules/lb/ewma"
	"github.com/coxswain-labs/coxswain/modules/lb/hash"
	"github.com/coxswain-labs/coxswain/modules/lb/leastconn"
	"github.com/coxswain-labs/coxswain/modules/lb/roundrobin"
	tcptranslate "github.com/coxswain-labs/coxswain/modules/tcproute/translate"
)

var update = flag.Bool("update", false, "rewrite testdata/policies/*.out.json from the current output")

// TestPolicyGolden translates testdata/policies/<case>.in.yaml, read by the standalone loader as
// `coxswain serve` reads it, and compares the clusters, the policy statuses, the problems and the
// warnings with <case>.out.json.
func TestPolicyGolden(t *testing.T) {
	reg := core.NewRegistry(httptranslate.Kind{}, grpctranslate.Kind{}, tcptranslate.Kind,
		&roundrobin.RoundRobin{}, &leastconn.LeastConn{}, &ewma.EWMA{}, &hash.Hash{})
	opts := translator.Options{
		Registry:   reg,
		Now:        func() metav1.Time { return metav1.NewTime(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)) },
		SessionKey: []byte("golden session key"),
	}
	ins, err := filepath.Glob("testdata/policies/*.in.yaml")
	if err != nil || len(ins) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	for _, in := range ins {
		t.Run(strings.TrimSuffix(filepath.Base(in), ".in.yaml"), func(t *testing.T) {
			loaded, err := standalone.Load(context.Background(), in, reg)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range loaded.Errors {
				t.Errorf("load: %v", e)
			}
			res := translator.Translate(context.Background(), loaded.Store, opts)
			checkClusters(t, reg, res.Snapshot)
			got := renderPolicies(t, res)
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
				t.Errorf("output differs from %s (run with -update and review the diff):\ngot:\n%s", out, got)
			}
		})
	}
}

// checkClusters loads every cluster's balancer as a proxy would: a policy must never make a
// snapshot a proxy rejects.
func checkClusters(t *testing.T, reg *core.Registry, snap *irv1.Snapshot) {
	t.Helper()
	bc := core.NewBuildContext(t.Context(), nil, reg, snap)
	defer func() { _ = bc.Close() }()
	for _, c := range snap.GetClusters() {
		if mc := c.GetBalancer(); mc != nil {
			if _, err := core.Load[core.Balancer](bc, mc); err != nil {
				t.Errorf("cluster %s: balancer %s: %v", c.GetName(), mc.GetId(), err)
			}
		}
	}
}

func renderPolicies(t *testing.T, res *translator.Result) []byte {
	t.Helper()
	var clusters []any
	for _, c := range res.Snapshot.GetClusters() {
		b, err := protojson.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if bal, ok := m["balancer"].(map[string]any); ok {
			if s, ok := bal["json"].(string); ok {
				raw, _ := base64.StdEncoding.DecodeString(s)
				delete(bal, "json")
				bal["config"] = string(raw)
			}
		}
		if sp, ok := m["sessionPersistence"].(map[string]any); ok && sp["key"] != nil {
			sp["key"] = fmt.Sprintf("%d bytes", len(c.GetSessionPersistence().GetKey()))
		}
		clusters = append(clusters, m)
	}
	policies := map[string][]string{}
	for k, st := range res.Policies {
		var lines []string
		for _, a := range st.Ancestors {
			for _, c := range a.Conditions {
				lines = append(lines, fmt.Sprintf("%s %s/%s: %s=%s %s (gen %d): %s", *a.AncestorRef.Kind, *a.AncestorRef.Namespace,
					a.AncestorRef.Name, c.Type, c.Status, c.Reason, c.ObservedGeneration, c.Message))
			}
		}
		policies[k.String()] = lines
	}
	out := struct {
		Clusters []any               `json:"clusters"`
		Policies map[string][]string `json:"policies"`
		Problems []string            `json:"problems,omitempty"`
		Warnings []string            `json:"warnings,omitempty"`
	}{Clusters: clusters, Policies: policies}
	for _, p := range res.Problems {
		out.Problems = append(out.Problems, p.Error())
	}
	for _, w := range res.Warnings {
		out.Warnings = append(out.Warnings, w.Error())
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}
