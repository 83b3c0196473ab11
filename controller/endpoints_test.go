package controller

import (
	"context"
	"fmt"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/controller/translator/translatortest"
	"github.com/coxswain-labs/coxswain/core"
)

// The endpoints fast path must give exactly the snapshot a full translation gives: same version.
func TestRefreshEndpointsEqualsTranslate(t *testing.T) {
	reg := core.Freeze()
	opts := translator.Options{Registry: reg}
	notReady := false
	tests := []struct {
		name   string
		change func(es *discoveryv1.EndpointSlice)
	}{
		{"scale up", func(es *discoveryv1.EndpointSlice) {
			es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.99.1.200"}})
		}},
		{"scale down", func(es *discoveryv1.EndpointSlice) { es.Endpoints = es.Endpoints[:1] }},
		{"scale to zero", func(es *discoveryv1.EndpointSlice) { es.Endpoints = nil }},
		{"not ready", func(es *discoveryv1.EndpointSlice) { es.Endpoints[0].Conditions.Ready = &notReady }},
		{"target port", func(es *discoveryv1.EndpointSlice) { p := int32(9090); es.Ports[0].Port = &p }},
		{"nothing", func(*discoveryv1.EndpointSlice) {}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			store := translatortest.SyntheticStore(20)
			prev := translator.Translate(context.Background(), store, opts).Snapshot
			es := store.EndpointSlices[0].DeepCopy()
			tc.change(es)
			store.EndpointSlices = []*discoveryv1.EndpointSlice{es}
			want := translator.Translate(context.Background(), store, opts).Snapshot
			got := translator.RefreshEndpoints(context.Background(), prev, store, opts)
			if got.GetVersion() != want.GetVersion() {
				t.Fatalf("fast path version %s, full translation %s\nfast: %v\nfull: %v", got.GetVersion(), want.GetVersion(),
					got.GetClusters(), want.GetClusters())
			}
			if tc.name != "nothing" && got.GetVersion() == prev.GetVersion() {
				t.Fatal("the change did not change the snapshot")
			}
		})
	}
}

// BenchmarkRefreshEndpoints measures the endpoints fast path, to compare with BenchmarkTranslate.
func BenchmarkRefreshEndpoints(b *testing.B) {
	reg := core.Freeze()
	opts := translator.Options{Registry: reg}
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			store := translatortest.SyntheticStore(n)
			prev := translator.Translate(context.Background(), store, opts).Snapshot
			es := store.EndpointSlices[0].DeepCopy()
			es.Endpoints = es.Endpoints[:2]
			store.EndpointSlices = []*discoveryv1.EndpointSlice{es}
			b.ReportAllocs()
			for b.Loop() {
				translator.RefreshEndpoints(context.Background(), prev, store, opts)
			}
		})
	}
}
