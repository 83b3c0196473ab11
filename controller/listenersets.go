package controller

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwclientset "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gwinformersv1 "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions/apis/v1"
	gwfeatures "sigs.k8s.io/gateway-api/pkg/features"

	"github.com/coxswain-labs/coxswain/controller/status"
	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// listenerSetGVR is the resource of ListenerSets (gateway.networking.k8s.io/v1, standard channel
// since v1.5). A cluster with older CRDs does not serve it: the kind then starts once its CRD
// appears, and the GatewayClass claims the ListenerSet feature only after the next restart.
var listenerSetGVR = schema.GroupVersionResource{Group: gwapiv1.GroupName, Version: "v1", Resource: "listenersets"}

// listenerSetKind is the typed informer of ListenerSets, started like a module kind once the
// resource is served, so a controller on older CRDs runs as before.
func listenerSetKind(gw gwclientset.Interface, ev events) (*moduleKind, error) {
	inf := gwinformersv1.NewListenerSetInformer(gw, "", 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := inf.SetTransform(stripUnread); err != nil {
		return nil, err
	}
	mk := &moduleKind{gk: schema.GroupKind{Group: gwapiv1.GroupName, Kind: "ListenerSet"}, gvr: listenerSetGVR, informer: inf, started: make(chan struct{})}
	mk.add = func(s *translator.Store, o translation.Object) error {
		ls, ok := o.(*gwapiv1.ListenerSet)
		if !ok {
			return fmt.Errorf("ListenerSet cache holds a %T", o)
		}
		s.ListenerSets = append(s.ListenerSets, ls)
		return nil
	}
	if _, err := inf.AddEventHandler(ownedHandler(status.ListenerSetKind, ev)); err != nil {
		return nil, err
	}
	return mk, nil
}

// listenerSetStatus is the writer's access to ListenerSets; its cache is empty until the kind
// starts, and the writer skips what it does not find there.
func (w *watch) listenerSetStatus(gw gwclientset.Interface) *status.ListenerSets {
	for _, k := range w.kinds {
		if k.gvr == listenerSetGVR {
			return &status.ListenerSets{Indexer: k.informer.GetIndexer(), Client: gw}
		}
	}
	return nil
}

// servedFeatures drops from features those of kinds the API server did not serve at start-up:
// a GatewayClass never claims ListenerSet on CRDs that have no ListenerSet.
func (w *watch) servedFeatures(features []gwapiv1.SupportedFeature) []gwapiv1.SupportedFeature {
	for _, k := range w.kinds {
		if k.gvr == listenerSetGVR && !k.isStarted() {
			return slices.DeleteFunc(slices.Clone(features), func(f gwapiv1.SupportedFeature) bool {
				return f.Name == gwapiv1.FeatureName(gwfeatures.SupportListenerSet)
			})
		}
	}
	return features
}
