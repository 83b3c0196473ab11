package controller

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwfeatures "sigs.k8s.io/gateway-api/pkg/features"

	"github.com/coxswain-labs/coxswain/controller/features"
)

// crdWatch watches CustomResourceDefinitions for two reasons. It starts the informers of module
// kinds whose resource was not served at start-up as soon as a CRD serving it is established:
// installing a filter's CRD (or a newer Gateway API bundle) needs no controller restart. And it
// keeps the schemas of the Gateway API CRDs as served, which say what the cluster's Gateway API
// has (v1.6 CRDs have no HTTPRoute retry, the standard channel no listener filters): the
// GatewayClass claims only the features whose fields are served (features.Filter), and a CRD
// upgrade while running grows the claim. Only the Gateway API's schemas are kept, without their
// descriptions; of every other CRD, its names, versions and conditions.
type crdWatch struct {
	cfg *rest.Config
	ev  events

	// unreadable is set when the API server forbids listing CRDs: the controller then starts
	// without them and claims every compiled-in feature, as before it could tell.
	unreadable atomic.Bool
	// schemas are the Gateway API's served schemas, rebuilt on every change of one of its CRDs;
	// nil (unknown: nothing is filtered) until the informer has synced, or when it cannot.
	schemas atomic.Pointer[features.Schemas]

	// dropped are the features left out at the latest claim, for the log (drive's goroutine only).
	dropped []gwfeatures.FeatureName
}

func newCRDWatch(cfg *rest.Config, ev events) *crdWatch { return &crdWatch{cfg: cfg, ev: ev} }

// claimed are the features a GatewayClass of ours claims now: those the compiled-in modules
// serve (c.features) whose Gateway API resources and fields the cluster serves. It logs the
// features left out whenever that set changes (a CRD upgrade shrinks it or grows the claim).
func (c *Controller) claimed() []gwapiv1.SupportedFeature {
	cw := c.watch.crds
	kept, dropped := features.Filter(c.features, cw.served())
	if !slices.Equal(dropped, cw.dropped) {
		c.log.Info("Gateway API CRDs: features claimed", zap.Int("claimed", len(kept)),
			zap.Any("notServedByCRDs", dropped))
		cw.dropped = dropped
	}
	return kept
}

// served are the Gateway API resources the cluster serves, with their schemas; nil when unknown.
func (cw *crdWatch) served() features.Schemas {
	if s := cw.schemas.Load(); s != nil {
		return *s
	}
	return nil
}

// start watches CRDs until ctx ends, in goroutines of wg, starting each waiting kind once its
// resource is served and asking for a translation when its cache has synced, or when a Gateway
// API CRD changed. It returns the informer's HasSynced; nil when CRDs cannot be watched.
func (cw *crdWatch) start(ctx context.Context, log *zap.Logger, wg *sync.WaitGroup, waiting []*moduleKind) cache.InformerSynced {
	client, err := apiextensionsclient.NewForConfig(cw.cfg)
	if err != nil {
		log.Error("cannot watch CRDs: resources not served at start-up need a restart once installed, and every compiled-in feature is claimed", zap.Error(err))
		return nil
	}
	factory := apiextensionsinformers.NewSharedInformerFactoryWithOptions(client, 0, apiextensionsinformers.WithTransform(slimCRD))
	inf := factory.Apiextensions().V1().CustomResourceDefinitions().Informer()
	var mu sync.Mutex
	check := func(obj any) {
		crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
		if !ok || !features.Established(crd) {
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
	gatewayAPI := func(obj any) {
		if crd, ok := crdOf(obj); ok && features.Relevant(crd.Spec.Group) && inf.HasSynced() {
			cw.rebuild(inf)
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { check(obj); gatewayAPI(obj) },
		UpdateFunc: func(_, cur any) { check(cur); gatewayAPI(cur) },
		DeleteFunc: gatewayAPI,
	})
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		if apierrors.IsForbidden(err) {
			if !cw.unreadable.Swap(true) {
				log.Warn("not allowed to watch CustomResourceDefinitions: resources installed later need a restart, and every compiled-in feature is claimed",
					zap.Error(err))
			}
		}
	})
	factory.Start(ctx.Done())
	wg.Go(func() {
		// The first schemas once the initial list is in: the events of that list came before
		// HasSynced was true, so none of them built it.
		if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			cw.rebuild(inf)
		}
	})
	wg.Go(func() {
		<-ctx.Done()
		factory.Shutdown()
	})
	return func() bool { return cw.unreadable.Load() || inf.HasSynced() && cw.schemas.Load() != nil }
}

// rebuild makes the schemas from the informer's cache, and asks for a translation (which claims
// the features they allow) when they changed.
func (cw *crdWatch) rebuild(inf cache.SharedIndexInformer) {
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, obj := range inf.GetStore().List() {
		if crd, ok := crdOf(obj); ok && features.Relevant(crd.Spec.Group) {
			crds = append(crds, crd)
		}
	}
	s := features.SchemasOf(crds)
	cw.schemas.Store(&s)
	cw.ev.changed(changeConfig)
}

func crdOf(obj any) (*apiextensionsv1.CustomResourceDefinition, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
	return crd, ok
}

// slimCRD keeps of a CRD what crdWatch reads: the schemas of the Gateway API's without their
// descriptions (most of a CRD's bytes: HTTPRoute's is over 1 MB), and of every other one nothing
// but its names, versions and conditions.
func slimCRD(obj any) (any, error) {
	crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
	if !ok {
		return obj, nil
	}
	out := &apiextensionsv1.CustomResourceDefinition{TypeMeta: crd.TypeMeta, ObjectMeta: crd.ObjectMeta, Status: crd.Status}
	out.ManagedFields = nil
	out.Annotations = nil // the last-applied annotation holds the whole CRD again
	out.Status.AcceptedNames = apiextensionsv1.CustomResourceDefinitionNames{}
	out.Spec = apiextensionsv1.CustomResourceDefinitionSpec{Group: crd.Spec.Group, Names: crd.Spec.Names, Scope: crd.Spec.Scope}
	for _, v := range crd.Spec.Versions {
		slim := apiextensionsv1.CustomResourceDefinitionVersion{Name: v.Name, Served: v.Served, Storage: v.Storage}
		if features.Relevant(crd.Spec.Group) && v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
			slim.Schema = &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: withoutDescriptions(v.Schema.OpenAPIV3Schema)}
		}
		out.Spec.Versions = append(out.Spec.Versions, slim)
	}
	return out, nil
}

// withoutDescriptions is a copy of s with no description at any depth.
func withoutDescriptions(s *apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSONSchemaProps {
	out := *s
	out.Description = ""
	if s.Properties != nil {
		out.Properties = make(map[string]apiextensionsv1.JSONSchemaProps, len(s.Properties))
		for name, p := range s.Properties {
			out.Properties[name] = *withoutDescriptions(&p)
		}
	}
	if s.Items != nil && s.Items.Schema != nil {
		out.Items = &apiextensionsv1.JSONSchemaPropsOrArray{Schema: withoutDescriptions(s.Items.Schema)}
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		out.AdditionalProperties = &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: withoutDescriptions(s.AdditionalProperties.Schema)}
	}
	return &out
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
