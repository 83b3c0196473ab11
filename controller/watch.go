package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	gwclientset "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gwinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"
	gwlisters "sigs.k8s.io/gateway-api/pkg/client/listers/apis/v1"
	gwlistersv1b1 "sigs.k8s.io/gateway-api/pkg/client/listers/apis/v1beta1"

	"github.com/coxswain-labs/coxswain/controller/status"
	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/core"
	infrav1a1 "github.com/coxswain-labs/coxswain/modules/api/infrastructure/v1alpha1"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// change says what an event changed, so the driver can tell an endpoints-only burst from one that
// needs a full translation.
type change uint32

const (
	changeConfig    change = 1 << iota // anything the routing table depends on
	changeEndpoints                    // EndpointSlices only
	changeRoutes                       // objects of keyed route kinds, each told by key (events.route)
)

// watch holds the informers and listers of every kind a translation reads.
type watch struct {
	kube, tls informers.SharedInformerFactory
	// labelled are the factories of the Secrets resolvers select by label (SecretSelector).
	labelled []informers.SharedInformerFactory
	// extraFactories are started with the others (the owned ServiceAccounts' of provisioning).
	extraFactories []informers.SharedInformerFactory
	extra          []corelisters.SecretLister
	gw             gwinformers.SharedInformerFactory

	classes  gwlisters.GatewayClassLister
	gateways gwlisters.GatewayLister
	// kinds are the resources modules declare (route kinds, ExtensionRef filter resources) and
	// the policy kinds; each starts once its resource is served.
	kinds     []*moduleKind
	discovery discovery.DiscoveryInterface
	crds      *crdWatch
	running   sync.WaitGroup // the module kinds' informers and the CRD watch
	grants    gwlistersv1b1.ReferenceGrantLister
	services  corelisters.ServiceLister
	slices    discoverylisters.EndpointSliceLister
	secrets   corelisters.SecretLister
	spaces    corelisters.NamespaceLister
	cas       *caWatch // ConfigMaps and ClusterTrustBundles (caCertificateRefs)
	informers []cache.SharedIndexInformer
	// latest is the Store nextStore made last, which the keyed kinds' indexes describe.
	latest *translator.Store
}

// events is what the watch tells the controller.
type events struct {
	// changed is called for every event that may change the translation.
	changed func(change)
	// touched is called when an object whose status we write changed in any way, status included.
	touched func(status.Key)
	// route is called, before changed(changeRoutes), with the key of a route object of a keyed
	// kind that was added, deleted or changed (storepatch.go); nil: changes go as changeConfig.
	route func(schema.GroupKind, types.NamespacedName)
}

// tlsSecrets is the only kind of Secret a Gateway may reference; watching only these keeps every
// other Secret of the cluster out of the controller's memory.
const tlsSecrets = "type=" + string(corev1.SecretTypeTLS)

// newWatch sets up the informers of every kind a translation reads: the core's, and those the
// modules of reg declare.
func newWatch(kube kubernetes.Interface, gw gwclientset.Interface, cfg *rest.Config, reg *core.Registry, ev events) (*watch, error) {
	strip := informers.WithTransform(stripUnread)
	w := &watch{
		kube: informers.NewSharedInformerFactoryWithOptions(kube, 0, strip),
		tls: informers.NewSharedInformerFactoryWithOptions(kube, 0, strip,
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = tlsSecrets })),
		gw: gwinformers.NewSharedInformerFactoryWithOptions(gw, 0, gwinformers.WithTransform(stripUnread)),
	}
	gwv1, gwv1b1 := w.gw.Gateway().V1(), w.gw.Gateway().V1beta1()
	classes, gateways, grants := gwv1.GatewayClasses(), gwv1.Gateways(), gwv1b1.ReferenceGrants()
	services, slices := w.kube.Core().V1().Services(), w.kube.Discovery().V1().EndpointSlices()
	spaces, secrets := w.kube.Core().V1().Namespaces(), w.tls.Core().V1().Secrets()
	w.classes, w.gateways, w.grants = classes.Lister(), gateways.Lister(), grants.Lister()
	w.services, w.slices = services.Lister(), slices.Lister()
	w.spaces, w.secrets = spaces.Lister(), secrets.Lister()

	type handler struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}
	handlers := []handler{
		{classes.Informer(), ownedHandler(status.GatewayClassKind, ev)},
		{gateways.Informer(), ownedHandler(status.GatewayKind, ev)},
		{grants.Informer(), changeHandler(changeConfig, ev, generationChanged)},
		{services.Informer(), changeHandler(changeConfig, ev, serviceChanged)},
		{slices.Informer(), changeHandler(changeEndpoints, ev, resourceVersionChanged)},
		{spaces.Informer(), changeHandler(changeConfig, ev, labelsChanged)},
		{secrets.Informer(), changeHandler(changeConfig, ev, resourceVersionChanged)},
	}
	for _, sel := range secretSelectors(reg) {
		f := informers.NewSharedInformerFactoryWithOptions(kube, 0, strip,
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel }))
		inf := f.Core().V1().Secrets()
		w.labelled, w.extra = append(w.labelled, f), append(w.extra, inf.Lister())
		handlers = append(handlers, handler{inf.Informer(), changeHandler(changeConfig, ev, resourceVersionChanged)})
	}
	cas, err := newCAWatch(kube, ev)
	if err != nil {
		return nil, err
	}
	w.cas = cas
	kinds, err := moduleKinds(reg, cfg, ev)
	if err != nil {
		return nil, err
	}
	policies, err := policyKinds(cfg, ev)
	if err != nil {
		return nil, err
	}
	kinds = append(kinds, policies...)
	params, err := gatewayParametersKind(cfg, ev)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", infrav1a1.GatewayParametersKind, err)
	}
	kinds = append(kinds, params)
	listenerSets, err := listenerSetKind(gw, ev)
	if err != nil {
		return nil, fmt.Errorf("ListenerSet: %w", err)
	}
	kinds = append(kinds, listenerSets)
	w.kinds, w.discovery = kinds, kube.Discovery()
	w.crds = newCRDWatch(cfg, ev)
	for _, h := range handlers {
		if _, err := h.inf.AddEventHandler(h.h); err != nil {
			return nil, fmt.Errorf("adding event handler: %w", err)
		}
		w.informers = append(w.informers, h.inf)
	}
	return w, nil
}

// routeStatus gives the status writer its access to every route kind, watched yet or not.
func (w *watch) routeStatus() []status.Routes {
	var out []status.Routes
	for _, k := range w.kinds {
		if k.status != nil {
			out = append(out, k.status)
		}
	}
	return out
}

// policyStatus gives the status writer its access to every policy kind, watched yet or not.
func (w *watch) policyStatus() []status.Policies {
	var out []status.Policies
	for _, k := range w.kinds {
		if k.policy != nil {
			out = append(out, k.policy)
		}
	}
	return out
}

// start runs the informers until ctx is done and waits for their first list. A module kind
// whose resource is not served yet is started when its CRD appears (crdWatch), which also keeps
// the Gateway API schemas the claimed features depend on. It reports false
// when ctx ended first.
func (w *watch) start(ctx context.Context, log *zap.Logger) bool {
	w.kube.Start(ctx.Done())
	w.tls.Start(ctx.Done())
	w.gw.Start(ctx.Done())
	for _, f := range append(w.labelled, w.extraFactories...) {
		f.Start(ctx.Done())
	}
	synced := make([]cache.InformerSynced, 0, len(w.informers)+len(w.kinds))
	for _, inf := range w.informers {
		synced = append(synced, inf.HasSynced)
	}
	synced = append(synced, w.cas.start(ctx.Done(), w.discovery)...)
	var waiting []*moduleKind
	for _, k := range w.kinds {
		if served(w.discovery, k.gvr) {
			k.start(ctx, &w.running)
			synced = append(synced, k.informer.HasSynced)
		} else {
			log.Info("resource not served yet: watching for its CRD", zap.String("kind", k.gk.String()), zap.String("resource", k.gvr.String()))
			waiting = append(waiting, k)
		}
	}
	// The CRD watch also tells which Gateway API fields are served (the features claimed), so it
	// always runs, and the first translation waits for it.
	if crds := w.crds.start(ctx, log, &w.running, waiting); crds != nil {
		synced = append(synced, crds)
	}
	return cache.WaitForCacheSync(ctx.Done(), synced...)
}

// watchedKinds names the module kinds being watched, for the log.
func (w *watch) watchedKinds() []string {
	var out []string
	for _, k := range w.kinds {
		if k.isStarted() {
			out = append(out, k.gk.String())
		}
	}
	sort.Strings(out)
	return out
}

// shutdown waits for the informers' goroutines after their context ended.
func (w *watch) shutdown() {
	w.kube.Shutdown()
	w.tls.Shutdown()
	w.gw.Shutdown()
	for _, f := range append(w.labelled, w.extraFactories...) {
		f.Shutdown()
	}
	w.running.Wait()
}

// store lists the caches into a Store. The objects are the caches' own: nobody may modify them.
func (w *watch) store() (*translator.Store, error) {
	all := labels.Everything()
	var s translator.Store
	errs := make([]error, 7, 7+len(w.kinds))
	s.GatewayClasses, errs[0] = w.classes.List(all)
	s.Gateways, errs[1] = w.gateways.List(all)
	s.ReferenceGrants, errs[2] = w.grants.List(all)
	s.Services, errs[3] = w.services.List(all)
	s.EndpointSlices, errs[4] = w.slices.List(all)
	s.Secrets, errs[5] = w.secrets.List(all)
	s.Namespaces, errs[6] = w.spaces.List(all)
	for _, l := range w.extra {
		more, err := l.List(all)
		errs = append(errs, err)
		s.Secrets = appendSecrets(s.Secrets, more)
	}
	errs = append(errs, w.cas.fill(&s))
	for _, k := range w.kinds {
		errs = append(errs, k.fill(&s))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("listing the caches: %w", err)
	}
	return &s, nil
}

// ownedHandler handles a kind whose status we write: a spec change needs a translation, any change
// (our own status writes included) needs the status writer to look again.
func ownedHandler(kind status.Kind, ev events) cache.ResourceEventHandler {
	touch := toucher(kind, ev)
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { ev.changed(changeConfig); touch(obj) },
		UpdateFunc: func(old, cur any) {
			if generationChanged(old, cur) {
				ev.changed(changeConfig)
			}
			touch(cur)
		},
		DeleteFunc: func(any) { ev.changed(changeConfig) },
	}
}

// toucher tells the status writer to look again at an object of kind.
func toucher(kind status.Kind, ev events) func(any) {
	return func(obj any) {
		if m, err := meta.Accessor(obj); err == nil {
			ev.touched(status.Key{Kind: kind, NamespacedName: types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()}})
		}
	}
}

// routeHandler is ownedHandler for a keyed route kind gk: it tells which route changed.
func routeHandler(gk schema.GroupKind, kind status.Kind, ev events) cache.ResourceEventHandler {
	if ev.route == nil {
		return ownedHandler(kind, ev)
	}
	changed := func(obj any) {
		key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		if err != nil {
			ev.changed(changeConfig) // no key to tell: the next Store is listed afresh
			return
		}
		ns, name, _ := cache.SplitMetaNamespaceKey(key)
		ev.route(gk, types.NamespacedName{Namespace: ns, Name: name})
		ev.changed(changeRoutes)
	}
	touch := toucher(kind, ev)
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { changed(obj); touch(obj) },
		UpdateFunc: func(old, cur any) {
			switch {
			case generationChanged(old, cur):
				changed(cur)
			case resourceVersionChanged(old, cur):
				// A status write (ours, mostly): nothing to translate, but the next Store
				// takes the new object, so that neither it nor the translation's records keep
				// the old one alive next to the cache's.
				if m, err := meta.Accessor(cur); err == nil {
					ev.route(gk, types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()})
				}
			}
			touch(cur)
		},
		DeleteFunc: changed,
	}
}

// changeHandler handles a kind we only read: adds and deletes always count, updates when relevant.
func changeHandler(c change, ev events, relevant func(old, cur any) bool) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { ev.changed(c) },
		UpdateFunc: func(old, cur any) {
			if relevant(old, cur) {
				ev.changed(c)
			}
		},
		DeleteFunc: func(any) { ev.changed(c) },
	}
}

func resourceVersionChanged(old, cur any) bool {
	o, c := old.(metav1.Object), cur.(metav1.Object)
	return o.GetResourceVersion() != c.GetResourceVersion()
}

// generationChanged is true when the spec (metadata.generation), labels or annotations changed:
// status-only updates, our own writes among them, never cause a translation.
func generationChanged(old, cur any) bool {
	o, c := old.(metav1.Object), cur.(metav1.Object)
	return o.GetGeneration() != c.GetGeneration() ||
		!maps.Equal(o.GetLabels(), c.GetLabels()) || !maps.Equal(o.GetAnnotations(), c.GetAnnotations())
}

// labelsChanged: a Namespace matters to a translation only through its labels (allowedRoutes
// selectors).
func labelsChanged(old, cur any) bool {
	return !maps.Equal(old.(metav1.Object).GetLabels(), cur.(metav1.Object).GetLabels())
}

// serviceChanged ignores Service status (load-balancer ingress), which a translation never reads.
func serviceChanged(old, cur any) bool {
	o, c := old.(*corev1.Service), cur.(*corev1.Service)
	// The load balancer's ingress is a provisioned Gateway's status.addresses; the owner
	// references say which Gateway a provisioned Service is for.
	return !equality.Semantic.DeepEqual(o.Spec, c.Spec) || !maps.Equal(o.Labels, c.Labels) || !maps.Equal(o.Annotations, c.Annotations) ||
		!equality.Semantic.DeepEqual(o.Status.LoadBalancer, c.Status.LoadBalancer) || !equality.Semantic.DeepEqual(o.OwnerReferences, c.OwnerReferences)
}

// stripManagedFields drops metadata.managedFields before an object enters a cache: the controller
// never reads them and at thousands of routes they are a large share of its memory.
func stripManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// stripUnread is the transform of every cache a translation reads: it drops what neither the
// translation nor the status writer reads, before the object is stored. That is
// metadata.managedFields and the annotation in which `kubectl apply` keeps the whole object as
// last applied (a second copy of every spec, larger than the rest of a route). Status writes
// go to the /status subresource, which takes nothing but the status from the object sent, so
// an object written back without them loses neither; every other write reads the object from
// the API server first. Labels and the other annotations stay: selectors and modules read them.
// A route's status strings are interned (intern.go): the same few values in every route.
func stripUnread(obj any) (any, error) {
	internRouteStatus(obj)
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
		if a := m.GetAnnotations(); a != nil {
			delete(a, corev1.LastAppliedConfigAnnotation)
			if len(a) == 0 {
				m.SetAnnotations(nil) // an empty map still holds its buckets (~300 B)
			}
		}
	}
	return obj, nil
}

// secretSelectors are the distinct label selectors of the Secrets the resolvers of reg read
// (translation.SecretSelector), sorted.
func secretSelectors(reg *core.Registry) []string {
	// The external account bindings of ACME issuers (translator.ACMEEABAnnotation).
	seen := map[string]bool{translator.ACMEEABSecretLabel: true}
	for _, id := range reg.IDs() {
		if !strings.HasPrefix(string(id), translation.ExtensionResolverNamespace+".") {
			continue
		}
		info, _ := reg.Lookup(id)
		if s, ok := info.New().(translation.SecretSelector); ok && s.SecretLabelSelector() != "" {
			seen[s.SecretLabelSelector()] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// appendSecrets adds to have the Secrets of more it does not hold yet (a TLS Secret may carry a
// selected label too).
func appendSecrets(have, more []*corev1.Secret) []*corev1.Secret {
	if len(more) == 0 {
		return have
	}
	idx := make(map[types.UID]bool, len(have))
	for _, s := range have {
		idx[s.UID] = true
	}
	for _, s := range more {
		if !idx[s.UID] {
			have = append(have, s)
		}
	}
	return have
}
