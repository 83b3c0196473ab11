package controller

import (
	"context"
	"sync"

	"go.uber.org/zap"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// crdWatch starts the informers of module kinds whose resource was not served at start-up as
// soon as a CustomResourceDefinition serving it is established: installing a filter's CRD (or a
// newer Gateway API bundle) needs no controller restart. It watches CRDs only while some kind
// waits, and reads nothing but their names and conditions.
type crdWatch struct {
	cfg *rest.Config
	ev  events
}

func newCRDWatch(cfg *rest.Config, ev events) *crdWatch { return &crdWatch{cfg: cfg, ev: ev} }

// start watches CRDs until ctx ends, in goroutines of wg, starting each waiting kind once its
// resource is served and asking for a translation when its cache has synced.
func (cw *crdWatch) start(ctx context.Context, log *zap.Logger, wg *sync.WaitGroup, waiting []*moduleKind) {
	client, err := apiextensionsclient.NewForConfig(cw.cfg)
	if err != nil {
		log.Error("cannot watch CRDs: resources not served at start-up need a restart once installed", zap.Error(err))
		return
	}
	factory := apiextensionsinformers.NewSharedInformerFactory(client, 0)
	inf := factory.Apiextensions().V1().CustomResourceDefinitions().Informer()
	var mu sync.Mutex
	check := func(obj any) {
		crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
		if !ok || !established(crd) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, k := range waiting {
			if k.isStarted() || !crdServes(crd, k.gvr) {
				continue
			}
			log.Info("CRD established: watching its resource", zap.String("crd", crd.Name), zap.String("kind", k.gk.String()))
			k.start(ctx, wg)
			wg.Go(func() {
				if cache.WaitForCacheSync(ctx.Done(), k.informer.HasSynced) {
					cw.ev.changed(changeConfig)
				}
			})
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    check,
		UpdateFunc: func(_, cur any) { check(cur) },
	})
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		if apierrors.IsForbidden(err) {
			log.Warn("not allowed to watch CustomResourceDefinitions: resources installed later need a restart", zap.Error(err))
		}
	})
	factory.Start(ctx.Done())
	wg.Go(func() {
		<-ctx.Done()
		factory.Shutdown()
	})
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

func crdServes(crd *apiextensionsv1.CustomResourceDefinition, gvr schema.GroupVersionResource) bool {
	if crd.Spec.Group != gvr.Group || crd.Spec.Names.Plural != gvr.Resource {
		return false
	}
	for _, v := range crd.Spec.Versions {
		if v.Name == gvr.Version && v.Served {
			return true
		}
	}
	return false
}

// served reports whether the API server serves gvr now.
func served(d discovery.DiscoveryInterface, gvr schema.GroupVersionResource) bool {
	res, err := d.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if err != nil {
		return false
	}
	for _, r := range res.APIResources {
		if r.Name == gvr.Resource {
			return true
		}
	}
	return false
}
