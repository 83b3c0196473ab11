package translate

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// shuffle permutes every slice of the store.
func shuffle(s *translator.Store, r *rand.Rand) {
	sh := func(n int, swap func(i, j int)) { r.Shuffle(n, swap) }
	sh(len(s.GatewayClasses), func(i, j int) { s.GatewayClasses[i], s.GatewayClasses[j] = s.GatewayClasses[j], s.GatewayClasses[i] })
	sh(len(s.Gateways), func(i, j int) { s.Gateways[i], s.Gateways[j] = s.Gateways[j], s.Gateways[i] })
	for _, objs := range s.Objects {
		sh(len(objs), func(i, j int) { objs[i], objs[j] = objs[j], objs[i] })
	}
	sh(len(s.ReferenceGrants), func(i, j int) {
		s.ReferenceGrants[i], s.ReferenceGrants[j] = s.ReferenceGrants[j], s.ReferenceGrants[i]
	})
	sh(len(s.Services), func(i, j int) { s.Services[i], s.Services[j] = s.Services[j], s.Services[i] })
	sh(len(s.EndpointSlices), func(i, j int) { s.EndpointSlices[i], s.EndpointSlices[j] = s.EndpointSlices[j], s.EndpointSlices[i] })
	sh(len(s.Secrets), func(i, j int) { s.Secrets[i], s.Secrets[j] = s.Secrets[j], s.Secrets[i] })
	sh(len(s.Namespaces), func(i, j int) { s.Namespaces[i], s.Namespaces[j] = s.Namespaces[j], s.Namespaces[i] })
}

// TestDeterministic: the order of the store's slices changes nothing — not the snapshot version,
// not the statuses, not the problems.
func TestDeterministic(t *testing.T) {
	ins, err := filepath.Glob("testdata/*.in.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range ins {
		t.Run(strings.TrimSuffix(filepath.Base(in), ".in.yaml"), func(t *testing.T) {
			raw, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			base := translateFile(t, in)
			want := render(t, base)
			for seed := uint64(1); seed <= 8; seed++ {
				store, err := loadStore(in)
				if err != nil {
					t.Fatal(err)
				}
				shuffle(store, rand.New(rand.NewPCG(seed, seed*7)))
				res := translator.Translate(context.Background(), store, testOptions(raw))
				if res.Snapshot.Version != base.Snapshot.Version {
					t.Fatalf("seed %d: version %s, want %s", seed, res.Snapshot.Version, base.Snapshot.Version)
				}
				if got := render(t, res); !bytes.Equal(got, want) {
					t.Fatalf("seed %d: output differs:\n%s", seed, firstDiff(want, got))
				}
			}
		})
	}
}

// TestTranslateDoesNotModifyStore: the store is shared with informers; Translate only reads it.
func TestTranslateDoesNotModifyStore(t *testing.T) {
	for _, name := range []string{"defaults", "filters", "https", "backend-refs"} {
		in := filepath.Join("testdata", name+".in.yaml")
		store, err := loadStore(in)
		if err != nil {
			t.Fatal(err)
		}
		before := storeJSON(t, store)
		raw, _ := os.ReadFile(in)
		translator.Translate(context.Background(), store, testOptions(raw))
		if after := storeJSON(t, store); !bytes.Equal(before, after) {
			t.Errorf("%s: Translate modified the store:\n%s", name, firstDiff(before, after))
		}
	}
}

// storeJSON is the store as JSON (its Objects keyed by "<kind>.<group>": JSON keys are strings).
func storeJSON(t *testing.T, s *translator.Store) []byte {
	t.Helper()
	objs := map[string][]translation.Object{}
	for gk, l := range s.Objects {
		objs[gk.String()] = l
	}
	return mustJSON(t, []any{s.GatewayClasses, s.Gateways, s.ReferenceGrants, s.Services, s.EndpointSlices, s.Secrets, s.Namespaces, objs})
}
