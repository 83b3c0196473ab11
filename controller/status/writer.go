package status

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwclientset "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gwlisters "sigs.k8s.io/gateway-api/pkg/client/listers/apis/v1"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// Kind is the Kubernetes kind of an object whose status the writer owns: GatewayClassKind,
// GatewayKind, a route kind ("HTTPRoute", "TCPRoute", ...) or a policy kind
// ("CoxswainBackendPolicy").
type Kind string

// The kinds the writer writes besides routes.
const (
	GatewayClassKind Kind = "GatewayClass"
	GatewayKind      Kind = "Gateway"
)

// Key names one object in the writer's queue.
type Key struct {
	Kind Kind
	types.NamespacedName
}

// Options configure a Writer.
type Options struct {
	Log    *zap.Logger
	Client gwclientset.Interface
	// ControllerName is written into every route parent status and selects which entries are ours.
	ControllerName gwapiv1.GatewayController
	// Addresses are published in the status of every Gateway.
	Addresses []gwapiv1.GatewayStatusAddress
	// Listers read the live objects from the informer caches; a write that conflicts re-reads the
	// object from the API server instead.
	GatewayClasses gwlisters.GatewayClassLister
	Gateways       gwlisters.GatewayLister
	// Routes are the route kinds whose status the writer owns.
	Routes []Routes
	// Policies are the policy kinds whose status the writer owns.
	Policies []Policies
	// ListenerSets reaches the ListenerSets; nil, or a nil Indexer, when none are watched.
	ListenerSets *ListenerSets
	// Workers is the number of objects written concurrently; 1 when zero.
	Workers int
	// Now stamps the conditions the writer makes up itself; metav1.Now when nil.
	Now func() metav1.Time
	// ErrorAnswers say, per route kind, what clients of a rule that answers the engine's error
	// get, when it is not an HTTP 500 (GRPCRoute: "gRPC status UNAVAILABLE"; see
	// translator.ErrorAnswerKind). Messages about rules a proxy cannot serve use it.
	ErrorAnswers map[string]string
}

// Writer is the single writer of status. It holds the desired status of every object we own (from
// the latest translation) and which Gateway generations the data plane has applied, and a
// workqueue of objects to reconcile. A worker compares the desired status with the live object and
// updates the /status subresource only when they differ (lastTransitionTime aside), retrying on
// conflicts with a fresh read. Route entries other controllers wrote are left untouched.
//
// A Writer lives as long as one leadership term: only the leader writes status.
type Writer struct {
	opts  Options
	queue workqueue.TypedRateLimitingInterface[Key]

	routeKinds  map[Kind]Routes
	policyKinds map[Kind]Policies

	mu       sync.Mutex
	classes  map[types.NamespacedName]*gwapiv1.GatewayClassStatus
	gateways map[types.NamespacedName]*gwapiv1.GatewayStatus
	routes   map[Key]*gwapiv1.RouteStatus
	policies map[Key]*gwapiv1.PolicyStatus
	// listenerSets are desired like Gateways; their gate state (applied, awaiting, unbound) is
	// recorded under their snapshot name (gateNN).
	listenerSets map[types.NamespacedName]*gwapiv1.ListenerSetStatus
	applied      map[types.NamespacedName]int64
	awaiting     map[types.NamespacedName]awaited // what a pending generation waits for
	unbound      map[types.NamespacedName][]ListenerFailure
	gaps         map[Key][]RouteModuleGap // route rules proxies cannot serve as written
	desired      bool                     // Desire has run once

	writes atomic.Int64
}

// NewWriter returns a writer; call Run to start writing.
func NewWriter(opts Options) *Writer {
	if opts.Workers <= 0 {
		opts.Workers = 1
	}
	if opts.Now == nil {
		opts.Now = func() metav1.Time { return metav1.NewTime(time.Now().Truncate(time.Second)) }
	}
	kinds := map[Kind]Routes{}
	for _, r := range opts.Routes {
		kinds[Kind(r.Kind())] = r
	}
	policyKinds := map[Kind]Policies{}
	for _, p := range opts.Policies {
		policyKinds[Kind(p.Kind())] = p
	}
	return &Writer{
		opts:        opts,
		routeKinds:  kinds,
		policyKinds: policyKinds,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[Key](),
			workqueue.TypedRateLimitingQueueConfig[Key]{Name: "status"}),
		classes:      map[types.NamespacedName]*gwapiv1.GatewayClassStatus{},
		gateways:     map[types.NamespacedName]*gwapiv1.GatewayStatus{},
		routes:       map[Key]*gwapiv1.RouteStatus{},
		policies:     map[Key]*gwapiv1.PolicyStatus{},
		listenerSets: map[types.NamespacedName]*gwapiv1.ListenerSetStatus{},
		applied:      map[types.NamespacedName]int64{},
		awaiting:     map[types.NamespacedName]awaited{},
		unbound:      map[types.NamespacedName][]ListenerFailure{},
		gaps:         map[Key][]RouteModuleGap{},
	}
}

// awaited is what the data plane said a Gateway generation waits for.
type awaited struct {
	generation int64
	what       string
}

// Writes counts the status updates the writer has made.
func (w *Writer) Writes() int64 { return w.writes.Load() }

// Desired is the status one translation computed (the maps of a translator.Result). Route
// statuses, keyed by their route kind, hold only this controller's parent entries; policy
// statuses, keyed by their policy kind, only its ancestor entries.
type Desired struct {
	GatewayClasses map[types.NamespacedName]*gwapiv1.GatewayClassStatus
	Gateways       map[types.NamespacedName]*gwapiv1.GatewayStatus
	Routes         map[Key]*gwapiv1.RouteStatus
	// RouteChanges, when not nil, stands in for Routes: the route statuses that changed since
	// the previous Desire's, a nil status for a route that left the result (an empty map: none
	// changed). A route change at thousands of routes changes one or two, and comparing every
	// route's status at every translation was most of what the driver did between translating
	// and publishing. The first Desire of a Writer gives Routes.
	RouteChanges map[Key]*gwapiv1.RouteStatus
	Policies     map[Key]*gwapiv1.PolicyStatus
	ListenerSets map[types.NamespacedName]*gwapiv1.ListenerSetStatus
}

// Desire records the status a translation computed and queues every object whose desired status
// changed, and every route or policy that left the result (its entries of ours are removed). The
// first call also queues the routes and policies whose live status holds entries of ours that the
// result does not have.
// The writer keeps res's maps, and changes its Routes map in place at the next Desire with
// RouteChanges: the caller must not use them afterwards.
func (w *Writer) Desire(res Desired) {
	w.mu.Lock()
	defer w.mu.Unlock()
	diff(w.classes, res.GatewayClasses, func(nn types.NamespacedName) Key { return Key{GatewayClassKind, nn} }, w.queue.Add)
	diff(w.gateways, res.Gateways, func(nn types.NamespacedName) Key { return Key{GatewayKind, nn} }, w.queue.Add)
	if res.RouteChanges != nil && w.desired {
		w.changeRoutes(res.RouteChanges)
	} else {
		routes := res.Routes
		if routes == nil {
			routes = res.RouteChanges // the first Desire with changes: they are all there is
		}
		for k, st := range routes {
			if st == nil {
				delete(routes, k)
			}
		}
		diff(w.routes, routes, func(k Key) Key { return k }, w.queue.Add)
		w.routes = routes
		if w.routes == nil {
			w.routes = map[Key]*gwapiv1.RouteStatus{}
		}
	}
	diff(w.policies, res.Policies, func(k Key) Key { return k }, w.queue.Add)
	diff(w.listenerSets, res.ListenerSets, func(nn types.NamespacedName) Key { return Key{ListenerSetKind, nn} }, w.queue.Add)
	w.classes, w.gateways, w.policies = res.GatewayClasses, res.Gateways, res.Policies
	w.listenerSets = res.ListenerSets
	if w.listenerSets == nil {
		w.listenerSets = map[types.NamespacedName]*gwapiv1.ListenerSetStatus{}
	}
	for nn := range w.applied {
		if !w.gated(nn) {
			delete(w.applied, nn) // a Gateway that is gone, or no longer ours
		}
	}
	for nn := range w.awaiting {
		if !w.gated(nn) {
			delete(w.awaiting, nn)
		}
	}
	for nn := range w.unbound {
		if !w.gated(nn) {
			delete(w.unbound, nn)
		}
	}
	if !w.desired {
		w.desired = true
		w.queueStaleRoutes()
	}
}

// changeRoutes applies the route statuses that changed (nil: left) to the desired ones,
// queueing those that differ.
func (w *Writer) changeRoutes(changes map[Key]*gwapiv1.RouteStatus) {
	for k, st := range changes {
		old, had := w.routes[k]
		switch {
		case st == nil:
			if had {
				delete(w.routes, k)
				w.queue.Add(k)
			}
		case !had || !Equal(old, st):
			w.routes[k] = st
			w.queue.Add(k)
		default:
			w.routes[k] = st // the same, said by a new object
		}
	}
}

func diff[K comparable, S any](old, cur map[K]*S, key func(K) Key, add func(Key)) {
	for k, s := range cur {
		if o, ok := old[k]; !ok || !Equal(o, s) {
			add(key(k))
		}
	}
	for k := range old {
		if _, ok := cur[k]; !ok {
			add(key(k))
		}
	}
}

// queueStaleRoutes queues routes and policies carrying our entries that no translation of this
// term produced: left behind by an earlier leader, or by a route that stopped naming our Gateways
// meanwhile.
func (w *Writer) queueStaleRoutes() {
	for kind, pk := range w.policyKinds {
		stale, err := pk.stale(w.opts.ControllerName)
		if err != nil {
			w.opts.Log.Warn("listing policies for stale status", zap.String("kind", string(kind)), zap.Error(err))
			continue
		}
		for _, nn := range stale {
			if k := (Key{kind, nn}); w.policies[k] == nil {
				w.queue.Add(k)
			}
		}
	}
	for kind, rk := range w.routeKinds {
		stale, err := rk.stale(w.opts.ControllerName)
		if err != nil {
			w.opts.Log.Warn("listing routes for stale status", zap.String("kind", string(kind)), zap.Error(err))
			continue
		}
		for _, nn := range stale {
			if k := (Key{kind, nn}); w.routes[k] == nil {
				w.queue.Add(k)
			}
		}
	}
}

// Applied records that the data plane has bound and acknowledged a snapshot carrying these
// Gateway generations, which lets their Programmed condition through.
func (w *Writer) Applied(gateways []*irv1.GatewayGeneration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, g := range gateways {
		nn := types.NamespacedName{Namespace: g.GetNamespace(), Name: g.GetName()}
		if w.applied[nn] < g.GetGeneration() {
			w.applied[nn] = g.GetGeneration()
			w.queue.Add(gateKey(g))
		}
	}
}

// Pending records what a Gateway generation the data plane has not applied yet waits for; it
// becomes the message of the Gateway's Programmed=False (reason Pending) condition.
func (w *Writer) Pending(g *irv1.GatewayGeneration, what string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	nn := types.NamespacedName{Namespace: g.GetNamespace(), Name: g.GetName()}
	a := awaited{generation: g.GetGeneration(), what: what}
	if w.applied[nn] >= a.generation || w.awaiting[nn] == a {
		return
	}
	w.awaiting[nn] = a
	w.queue.Add(gateKey(g))
}

// Unbound records the listeners of a Gateway that proxies cannot bind now (none clears them); they
// turn the listeners' Programmed False, and the Gateway's when its address is not usable or no
// listener is bound (see applyUnbound).
func (w *Writer) Unbound(g *irv1.GatewayGeneration, failures []ListenerFailure) {
	w.mu.Lock()
	defer w.mu.Unlock()
	nn := types.NamespacedName{Namespace: g.GetNamespace(), Name: g.GetName()}
	if len(failures) == 0 {
		if _, ok := w.unbound[nn]; !ok {
			return
		}
		delete(w.unbound, nn)
	} else {
		w.unbound[nn] = append([]ListenerFailure(nil), failures...)
	}
	w.queue.Add(gateKey(g))
}

// Touch queues an object whose live copy changed, so a status someone else changed (or an address
// that just got published) is looked at again. Objects we have nothing to say about are ignored
// by the worker.
func (w *Writer) Touch(k Key) { w.queue.Add(k) }

// Run writes status until ctx is done, then waits for in-flight writes to finish.
func (w *Writer) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range w.opts.Workers {
		wg.Go(func() {
			for w.next(ctx) {
			}
		})
	}
	<-ctx.Done()
	w.queue.ShutDown()
	wg.Wait()
}

func (w *Writer) next(ctx context.Context) bool {
	key, quit := w.queue.Get()
	if quit {
		return false
	}
	defer w.queue.Done(key)
	err := w.sync(ctx, key)
	switch {
	case err == nil:
		w.queue.Forget(key)
	case ctx.Err() != nil:
	default:
		w.opts.Log.Warn("writing status", zap.String("kind", string(key.Kind)), zap.String("object", key.String()), zap.Error(err))
		w.queue.AddRateLimited(key)
	}
	return true
}

func (w *Writer) sync(ctx context.Context, key Key) error {
	switch key.Kind {
	case GatewayClassKind:
		return w.syncClass(ctx, key.Name)
	case GatewayKind:
		return w.syncGateway(ctx, key.NamespacedName)
	case ListenerSetKind:
		return w.syncListenerSet(ctx, key)
	}
	if pk := w.policyKinds[key.Kind]; pk != nil {
		w.mu.Lock()
		desired := w.policies[key]
		w.mu.Unlock()
		return w.count(pk.sync(ctx, key.NamespacedName, desired, w.opts.ControllerName))
	}
	rk := w.routeKinds[key.Kind]
	if rk == nil {
		return nil // a kind this controller does not watch
	}
	w.mu.Lock()
	desired := withModuleGaps(w.routes[key], key.Namespace, w.gaps[key], w.opts.ErrorAnswers[string(key.Kind)], w.opts.Now())
	w.mu.Unlock()
	return w.count(rk.sync(ctx, key.NamespacedName, desired, w.opts.ControllerName))
}
