package controller

import (
	"fmt"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/coxswain-labs/coxswain/controller/translator"
	infrav1a1 "github.com/coxswain-labs/coxswain/modules/api/infrastructure/v1alpha1"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// gatewayParametersKind is the informer of CoxswainGatewayParameters (Store.GatewayParameters):
// the translator checks that each parametersRef resolves to a valid one, and the dedicated mode
// renders a Gateway's proxy pool from it, so any spec change translates (and provisions) again.
// Like a policy kind it starts once its CRD is served; it has no status of its own.
func gatewayParametersKind(cfg *rest.Config, ev events) (*moduleKind, error) {
	gv := infrav1a1.SchemeGroupVersion
	rc, err := restClientFor(gv, infrav1a1.AddToScheme, cfg)
	if err != nil {
		return nil, err
	}
	lw := cache.NewListWatchFromClient(rc, infrav1a1.GatewayParametersResource, "", fields.Everything())
	inf := cache.NewSharedIndexInformer(lw, &infrav1a1.CoxswainGatewayParameters{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := inf.SetTransform(stripUnread); err != nil {
		return nil, err
	}
	mk := &moduleKind{
		gk:       gv.WithKind(infrav1a1.GatewayParametersKind).GroupKind(),
		gvr:      gv.WithResource(infrav1a1.GatewayParametersResource),
		informer: inf, started: make(chan struct{}),
	}
	mk.add = func(s *translator.Store, o translation.Object) error {
		p, ok := o.(*infrav1a1.CoxswainGatewayParameters)
		if !ok {
			return fmt.Errorf("%s cache holds a %T", infrav1a1.GatewayParametersKind, o)
		}
		s.GatewayParameters = append(s.GatewayParameters, p)
		return nil
	}
	if _, err := inf.AddEventHandler(changeHandler(changeConfig, ev, generationChanged)); err != nil {
		return nil, err
	}
	return mk, nil
}
