package controller

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/coxswain-labs/coxswain/controller/status"
	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// moduleKind is a resource a module declares: a route kind (typed objects, read and written
// through a REST client built from the kind's own scheme) or the resource of an ExtensionRef
// filter (unstructured objects, read through the dynamic client). Its informer is made up front
// and started once the API server serves the resource, at start-up or when its CRD appears.
type moduleKind struct {
	gk       schema.GroupKind
	gvr      schema.GroupVersionResource
	informer cache.SharedIndexInformer
	// status is the writer's access to a route kind's status; nil for extension kinds.
	status status.Routes
	// policy is the writer's access to a policy kind's status (policykinds.go).
	policy status.Policies
	// add puts one cached object into a Store; nil adds it to Store.Objects by gk.
	add func(s *translator.Store, obj translation.Object) error
	// keyed: a route kind whose changes the events tell by key, so that the next Store patches
	// its list (storepatch.go); index is the position of each key in the latest Store's list.
	keyed bool
	index map[types.NamespacedName]int

	once    sync.Once
	started chan struct{} // closed once the informer runs
}

// moduleKinds makes the informers of every resource the modules of reg declare. Nothing is
// started yet.
func moduleKinds(reg *core.Registry, cfg *rest.Config, ev events) ([]*moduleKind, error) {
	var out []*moduleKind
	for _, rk := range translation.RouteKinds(reg) {
		_, implicit := rk.(translation.ImplicitParentKind)
		mk, err := routeKindWatch(rk.API(), cfg, ev, !implicit)
		if err != nil {
			return nil, fmt.Errorf("module %s: %w", rk.CoxswainModule().ID, err)
		}
		out = append(out, mk)
	}
	companions, err := companionWatches(translation.RouteKinds(reg), func(c translation.CompanionAPI) (*moduleKind, error) {
		return companionWatch(c, cfg, ev)
	})
	if err != nil {
		return nil, err
	}
	out = append(out, companions...)
	exts, errs := reg.Extensions()
	if len(errs) > 0 {
		return nil, errs[0]
	}
	if len(exts) > 0 {
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("dynamic client: %w", err)
		}
		for _, api := range exts {
			out = append(out, extensionWatch(api, dyn, ev))
		}
	}
	return out, nil
}

// routeKindWatch is the typed informer and status access of one route kind. The changes of a
// keyed kind are told by key (routeHandler, storepatch.go); an implicit kind's objects (Ingress)
// are the world's, and a change to one is a change like any other.
func routeKindWatch(api translation.RouteAPI, cfg *rest.Config, ev events, keyed bool) (*moduleKind, error) {
	rc, err := restClientFor(api.GVK.GroupVersion(), api.AddToScheme, cfg)
	if err != nil {
		return nil, err
	}
	gvr := api.GVK.GroupVersion().WithResource(api.Resource)
	lw := cache.NewListWatchFromClient(rc, api.Resource, "", fields.Everything())
	inf := cache.NewSharedIndexInformer(lw, api.New(), 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := inf.SetTransform(stripUnread); err != nil {
		return nil, err
	}
	mk := &moduleKind{gk: api.GVK.GroupKind(), gvr: gvr, informer: inf, started: make(chan struct{})}
	if api.Status(api.New()) != nil { // a kind without a RouteStatus (Ingress) writes its own
		mk.status = routeStatusClient(mk, api, rc)
	}
	h := ownedHandler(status.Kind(api.GVK.Kind), ev)
	if keyed {
		mk.keyed = true
		h = routeHandler(mk.gk, status.Kind(api.GVK.Kind), ev)
	}
	if _, err := inf.AddEventHandler(h); err != nil {
		return nil, err
	}
	return mk, nil
}

// companionWatch is the typed informer of a resource a route kind reads (IngressClass).
func companionWatch(c translation.CompanionAPI, cfg *rest.Config, ev events) (*moduleKind, error) {
	rc, err := restClientFor(c.GVK.GroupVersion(), c.AddToScheme, cfg)
	if err != nil {
		return nil, err
	}
	lw := cache.NewListWatchFromClient(rc, c.Resource, "", fields.Everything())
	inf := cache.NewSharedIndexInformer(lw, c.New(), 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := inf.SetTransform(stripUnread); err != nil {
		return nil, err
	}
	if _, err := inf.AddEventHandler(changeHandler(changeConfig, ev, resourceVersionChanged)); err != nil {
		return nil, err
	}
	return &moduleKind{gk: c.GVK.GroupKind(), gvr: c.GVK.GroupVersion().WithResource(c.Resource), informer: inf, started: make(chan struct{})}, nil
}

// restClientFor is a REST client for group version gv that decodes into its Go types, as a
// generated typed clientset would, from the scheme addToScheme registers.
func restClientFor(gv schema.GroupVersion, addToScheme func(*runtime.Scheme) error, cfg *rest.Config) (*rest.RESTClient, error) {
	scheme := runtime.NewScheme()
	if err := addToScheme(scheme); err != nil {
		return nil, fmt.Errorf("scheme of %s: %w", gv, err)
	}
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &gv
	c.APIPath = "/apis"
	if gv.Group == "" {
		c.APIPath = "/api"
	}
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	return rest.RESTClientFor(c)
}

// extensionWatch is the dynamic informer of an ExtensionRef filter's resource. Any change to
// such an object may change the config of the rules that refer to it.
//
// A kind whose objects may target Gateways (translator.GatewayFilterKinds) is a policy kind too:
// its status.ancestors are written through the dynamic client (status.DynamicPolicyClient), and,
// as for every object we write, only a spec change translates again.
func extensionWatch(api core.ExtensionAPI, dyn dynamic.Interface, ev events) *moduleKind {
	gvr := schema.GroupVersionResource{Group: api.Group, Version: api.Version, Resource: api.Resource}
	gk := schema.GroupKind{Group: api.Group, Kind: api.Kind}
	inf := dynamicinformer.NewFilteredDynamicInformer(dyn, gvr, "", 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, nil).Informer()
	_ = inf.SetTransform(stripUnread) // only fails once started, which it is not
	mk := &moduleKind{gk: gk, gvr: gvr, informer: inf, started: make(chan struct{})}
	if slices.Contains(translator.GatewayFilterKinds, gk) {
		mk.policy = status.DynamicPolicyClient(api.Kind, gvr.GroupResource(), inf.GetIndexer(), dyn.Resource(gvr))
		_, _ = inf.AddEventHandler(ownedHandler(status.Kind(api.Kind), ev))
		return mk
	}
	_, _ = inf.AddEventHandler(changeHandler(changeConfig, ev, resourceVersionChanged))
	return mk
}

// start runs the informer until ctx ends, in a goroutine of wg; later calls do nothing.
func (mk *moduleKind) start(ctx context.Context, wg *sync.WaitGroup) {
	mk.once.Do(func() {
		wg.Go(func() { mk.informer.Run(ctx.Done()) })
		close(mk.started)
	})
}

// isStarted reports whether start ran.
func (mk *moduleKind) isStarted() bool {
	select {
	case <-mk.started:
		return true
	default:
		return false
	}
}

// fill adds the informer's objects to s (none before it starts).
func (mk *moduleKind) fill(s *translator.Store) error {
	list := mk.informer.GetIndexer().List()
	// One Store.Add of the whole list: adding object by object hashed the kind and regrew the
	// slice thousands of times per translation at thousands of routes (`listed`).
	var objs []translation.Object
	if mk.add == nil {
		objs = make([]translation.Object, 0, len(list))
	}
	for _, o := range list {
		obj, ok := o.(translation.Object)
		if !ok {
			return fmt.Errorf("%s cache holds a %T", mk.gk, o)
		}
		if mk.add != nil {
			if err := mk.add(s, obj); err != nil {
				return err
			}
			continue
		}
		objs = append(objs, obj)
	}
	if len(objs) > 0 {
		s.Add(mk.gk, objs...)
	}
	return nil
}

// errorAnswersOf says, per route kind of reg that implements translation.ErrorAnswerKind, what
// its clients get from a rule that answers the engine's error (status.Options.ErrorAnswers).
func errorAnswersOf(reg *core.Registry) map[string]string {
	out := map[string]string{}
	for _, rk := range translation.RouteKinds(reg) {
		if k, ok := rk.(translation.ErrorAnswerKind); ok {
			out[k.API().GVK.Kind] = k.ErrorAnswer()
		}
	}
	return out
}
