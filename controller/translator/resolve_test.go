package translator

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// closedResolver fails closed on its own: without its Secret it still returns a config (one the
// proxy module answers 503 with) and reports the reference as unresolved.
type closedResolver struct{}

func (closedResolver) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: "translate.filter.ext.example.com.Sign", New: func() core.Module { return closedResolver{} }}
}

func (closedResolver) Resolve(rc translation.ResolveContext, _ translation.Object, _ json.RawMessage) (json.RawMessage, error) {
	if _, err := rc.Secret("", "missing"); err != nil {
		rc.Unresolved("SecretNotUsable", "%v; every request is refused", err)
		return json.Marshal(signFilter{Header: "x-sig", Key: "closed"})
	}
	return nil, nil
}

// TestResolveContextUnresolved: ResolveContext.Unresolved sets ResolvedRefs=False on the route
// while the rule keeps the config the resolver returned and its backend.
func TestResolveContextUnresolved(t *testing.T) {
	store := tcpStore()
	store.Add(schema.GroupKind{Group: "example.com", Kind: "Sign"}, signObject("s", map[string]any{}))
	store.Add(streamGVK.GroupKind(), pgRoute(extRef("Sign", "s")))
	res := Translate(context.Background(), store, Options{Registry: core.NewRegistry(extKind{}, signFilter{}, closedResolver{})})
	r := res.Snapshot.Listeners[0].Servers[0].VirtualHosts[0].Routes[0]
	if len(r.Filters) != 1 || string(r.Filters[0].Json) != `{"header":"x-sig","key":"closed"}` {
		t.Errorf("filters %v: want the resolver's config", r.Filters)
	}
	if len(r.Backends) != 1 || r.Backends[0].Error != "" || r.Backends[0].Cluster == "" {
		t.Errorf("backends %v: want the rule served", r.Backends)
	}
	resolved := res.Routes.Get(RouteKey{Group: "example.com", Kind: "StreamRoute", Namespace: "db", Name: "pg"}).Parents[0].Conditions[1]
	if resolved.Status != metav1.ConditionFalse || resolved.Reason != "SecretNotUsable" ||
		!strings.Contains(resolved.Message, "ExtensionRef Sign.example.com s: Secret db/missing does not exist; every request is refused") {
		t.Errorf("ResolvedRefs %+v: want False SecretNotUsable naming the ExtensionRef and the reason", resolved)
	}
}
