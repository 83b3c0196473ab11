package controller

import (
	"maps"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/status"
	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/core"
	policyv1a1 "github.com/coxswain-labs/coxswain/modules/api/policy/v1alpha1"
	grpctranslate "github.com/coxswain-labs/coxswain/modules/grpcroute/translate"
	httptranslate "github.com/coxswain-labs/coxswain/modules/httproute/translate"
)

// TestErrorAnswers: only the kinds whose clients do not see the engine's 500 as such are listed.
func TestErrorAnswers(t *testing.T) {
	got := errorAnswersOf(core.NewRegistry(httptranslate.Kind{}, grpctranslate.Kind{}))
	want := map[string]string{"GRPCRoute": "gRPC status UNAVAILABLE"}
	if !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestPolicyWatchesFillTheStore: cached policies land in Store.BackendPolicies and
// Store.ClientTrafficPolicies, typed, and the writer's access names the kind.
func TestPolicyWatchesFillTheStore(t *testing.T) {
	kinds, err := policyKinds(&rest.Config{Host: "https://127.0.0.1:1"}, events{changed: func(change) {}, touched: func(status.Key) {}})
	if err != nil || len(kinds) != 3 {
		t.Fatal(kinds, err)
	}
	bp := &policyv1a1.CoxswainBackendPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	cp := &policyv1a1.ClientTrafficPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
	if err := kinds[0].informer.GetIndexer().Add(bp); err != nil {
		t.Fatal(err)
	}
	if err := kinds[1].informer.GetIndexer().Add(cp); err != nil {
		t.Fatal(err)
	}
	tp := &gwapiv1.BackendTLSPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "t"}}
	if err := kinds[2].informer.GetIndexer().Add(tp); err != nil {
		t.Fatal(err)
	}
	var s translator.Store
	for _, mk := range kinds {
		if err := mk.fill(&s); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.BackendPolicies) != 1 || s.BackendPolicies[0] != bp || len(s.ClientTrafficPolicies) != 1 || s.ClientTrafficPolicies[0] != cp ||
		len(s.BackendTLSPolicies) != 1 || s.BackendTLSPolicies[0] != tp || len(s.Objects) != 0 {
		t.Errorf("store %+v", s)
	}
	if mk := kinds[0]; mk.policy == nil || mk.policy.Kind() != "CoxswainBackendPolicy" || mk.gvr.Resource != "coxswainbackendpolicies" {
		t.Errorf("kind %+v", mk)
	}
	if mk := kinds[1]; mk.policy == nil || mk.policy.Kind() != "ClientTrafficPolicy" || mk.gvr.Resource != "clienttrafficpolicies" {
		t.Errorf("kind %+v", mk)
	}
	if mk := kinds[2]; mk.policy == nil || mk.policy.Kind() != "BackendTLSPolicy" || mk.gvr.String() != "gateway.networking.k8s.io/v1, Resource=backendtlspolicies" {
		t.Errorf("kind %+v", mk)
	}
}
