package translator

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1b1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// authFilter stands in for the CoxswainExternalAuth module: same kind and alias, its config the
// resolved cluster of its backendRef.
type authFilter struct {
	Cluster string `json:"cluster"`
}

const authGroup = "gateway.coxswain-labs.dev"

var authGK = schema.GroupKind{Group: authGroup, Kind: "CoxswainExternalAuth"}

func (authFilter) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: core.ExtensionModuleID(authGroup, "CoxswainExternalAuth"), New: func() core.Module { return &authFilter{} }}
}

func (authFilter) ExtensionAPI() core.ExtensionAPI {
	return core.ExtensionAPI{Group: authGroup, Kind: "CoxswainExternalAuth", Version: "v1alpha1", Resource: "coxswainexternalauths", Alias: "ExternalAuth"}
}

// authResolver resolves spec.backendRef through ResolveContext.Backend, so the ReferenceGrant is
// judged from the auth object.
type authResolver struct{}

func (authResolver) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: translation.ExtensionResolverID(authFilter{}.CoxswainModule().ID), New: func() core.Module { return authResolver{} }}
}

func (authResolver) Resolve(rc translation.ResolveContext, _ translation.Object, spec json.RawMessage) (json.RawMessage, error) {
	var in struct {
		BackendRef gwapiv1.BackendObjectReference `json:"backendRef"`
	}
	if err := json.Unmarshal(spec, &in); err != nil {
		return nil, err
	}
	cluster, err := rc.Backend(in.BackendRef, false)
	if err != nil {
		return nil, err
	}
	return json.Marshal(authFilter{Cluster: cluster})
}

func authObject(name string, age int, svcNS string, gateways ...string) *unstructured.Unstructured {
	var refs []any
	for _, g := range gateways {
		refs = append(refs, map[string]any{"group": gwapiv1.GroupName, "kind": "Gateway", "name": g})
	}
	spec := map[string]any{"backendRef": map[string]any{"name": "pg", "namespace": svcNS, "port": int64(5432)}}
	if refs != nil {
		spec["targetRefs"] = refs
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": authGroup + "/v1alpha1", "kind": "CoxswainExternalAuth",
		"metadata": map[string]any{"namespace": "db", "name": name, "generation": int64(1)}, "spec": spec}}
	u.SetCreationTimestamp(metav1.NewTime(time.Unix(1_700_000_000, 0).Add(time.Duration(age) * time.Minute)))
	return u
}

func authStatus(t *testing.T, res *Result, name string) []metav1.Condition {
	t.Helper()
	st := res.Policies[PolicyKey{Group: authGroup, Kind: "CoxswainExternalAuth", Namespace: "db", Name: name}]
	if st == nil {
		t.Fatalf("no status for %s; problems %v", name, res.Problems)
	}
	var out []metav1.Condition
	for _, a := range st.Ancestors {
		out = append(out, a.Conditions[0])
	}
	return out
}

func TestGatewayExternalAuth(t *testing.T) {
	reg := core.NewRegistry(extKind{}, authFilter{}, authResolver{})
	authRef := func(kind, name string) gwapiv1.HTTPRouteFilter {
		return gwapiv1.HTTPRouteFilter{Type: gwapiv1.HTTPRouteFilterExtensionRef,
			ExtensionRef: &gwapiv1.LocalObjectReference{Group: authGroup, Kind: gwapiv1.Kind(kind), Name: gwapiv1.ObjectName(name)}}
	}

	t.Run("first in every rule, before the rule's own (alias) ExtensionRef; older wins", func(t *testing.T) {
		store := tcpStore()
		store.Add(authGK, authObject("gw-auth", 0, "", "gw"), authObject("late", 1, "", "gw"), authObject("lost", 2, "", "nope"),
			authObject("route-auth", 3, ""))
		store.Add(streamGVK.GroupKind(), pgRoute(authRef("ExternalAuth", "route-auth")))
		res := Translate(context.Background(), store, Options{Registry: reg})
		r := res.Snapshot.Listeners[0].Servers[0].VirtualHosts[0].Routes[0]
		id := string(authFilter{}.CoxswainModule().ID)
		if len(r.Filters) != 2 || r.Filters[0].Id != id || r.Filters[1].Id != id || r.Backends[0].Error != "" {
			t.Fatalf("filters %v backends %v: want the Gateway's auth, then the route's", r.Filters, r.Backends)
		}
		if c := authStatus(t, res, "gw-auth"); c[0].Status != metav1.ConditionTrue {
			t.Errorf("gw-auth %+v", c)
		}
		if c := authStatus(t, res, "late"); c[0].Reason != "Conflicted" || !strings.Contains(c[0].Message, "CoxswainExternalAuth db/gw-auth is older") {
			t.Errorf("late %+v", c)
		}
		if c := authStatus(t, res, "lost"); c[0].Reason != "TargetNotFound" {
			t.Errorf("lost %+v", c)
		}
		if _, ok := res.Policies[PolicyKey{Group: authGroup, Kind: "CoxswainExternalAuth", Namespace: "db", Name: "route-auth"}]; ok {
			t.Errorf("an object without targetRefs is no policy: it must get no ancestors")
		}
	})

	t.Run("the backendRef is judged from the auth object: ReferenceGrant", func(t *testing.T) {
		store := tcpStore()
		svc := store.Services[0].DeepCopy()
		svc.Namespace = "auth"
		store.Services = append(store.Services, svc)
		store.Add(authGK, authObject("gw-auth", 0, "auth", "gw"))
		store.Add(streamGVK.GroupKind(), pgRoute())
		res := Translate(context.Background(), store, Options{Registry: reg})
		r := res.Snapshot.Listeners[0].Servers[0].VirtualHosts[0].Routes[0]
		resolved := res.Routes.Get(pgKey).Parents[0].Conditions[1]
		if len(r.Filters) != 0 || r.Backends[0].Error == "" || resolved.Reason != "RefNotPermitted" ||
			!strings.Contains(resolved.Message, "CoxswainExternalAuth db/gw-auth (targets Gateway db/gw)") {
			t.Errorf("without a grant: filters %v backends %v ResolvedRefs %+v; want the rule answering 500, RefNotPermitted", r.Filters, r.Backends, resolved)
		}
		store.ReferenceGrants = []*gwapiv1b1.ReferenceGrant{{ObjectMeta: metav1.ObjectMeta{Namespace: "auth", Name: "g"},
			Spec: gwapiv1b1.ReferenceGrantSpec{
				From: []gwapiv1b1.ReferenceGrantFrom{{Group: authGroup, Kind: "CoxswainExternalAuth", Namespace: "db"}},
				To:   []gwapiv1b1.ReferenceGrantTo{{Group: "", Kind: "Service"}},
			}}}
		res = Translate(context.Background(), store, Options{Registry: reg})
		r = res.Snapshot.Listeners[0].Servers[0].VirtualHosts[0].Routes[0]
		if len(r.Filters) != 1 || !strings.Contains(string(r.Filters[0].Json), "auth/pg:5432") || r.Backends[0].Error != "" {
			t.Errorf("with the grant: filters %v backends %v", r.Filters, r.Backends)
		}
		if !hasCluster(res, string(r.Filters[0].Json)) {
			t.Errorf("the auth service's cluster must be in the snapshot: %v", res.Snapshot.Clusters)
		}
	})
}

func hasCluster(res *Result, config string) bool {
	for _, c := range res.Snapshot.Clusters {
		if strings.Contains(config, `"`+c.Name+`"`) {
			return true
		}
	}
	return false
}

var _ = corev1.Service{}
