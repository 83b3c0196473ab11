package status

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwclientset "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gwlisters "sigs.k8s.io/gateway-api/pkg/client/listers/apis/v1"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// Kind is the kind of object whose status the writer owns.
type Kind uint8

// The kinds the writer writes.
const (
	GatewayClassKind Kind = iota + 1
	GatewayKind
	HTTPRouteKind
)

func (k Kind) String() string {
	switch k {
	case GatewayClassKind:
		return "GatewayClass"
	case GatewayKind:
		return "Gateway"
	case HTTPRouteKind:
		return "HTTPRoute"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

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
	// Features are written to every GatewayClass we own (see controller/features).
	Features []gwapiv1.SupportedFeature
	// Listers read the live objects from the informer caches; a write that conflicts re-reads the
	// object from the API server instead.
	GatewayClasses gwlisters.GatewayClassLister
	Gateways       gwlisters.GatewayLister
	HTTPRoutes     gwlisters.HTTPRouteLister
	// Workers is the number of objects written concurrently; 1 when zero.
	Workers int
	// Now stamps the conditions the writer makes up itself; metav1.Now when nil.
	Now func() metav1.Time
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

	mu       sync.Mutex
	classes  map[types.NamespacedName]*gwapiv1.GatewayClassStatus
	gateways map[types.NamespacedName]*gwapiv1.GatewayStatus
	routes   map[types.NamespacedName]*gwapiv1.HTTPRouteStatus
	applied  map[types.NamespacedName]int64
	desired  bool // Desire has run once

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
	return &Writer{
		opts: opts,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[Key](),
			workqueue.TypedRateLimitingQueueConfig[Key]{Name: "status"}),
		classes:  map[types.NamespacedName]*gwapiv1.GatewayClassStatus{},
		gateways: map[types.NamespacedName]*gwapiv1.GatewayStatus{},
		routes:   map[types.NamespacedName]*gwapiv1.HTTPRouteStatus{},
		applied:  map[types.NamespacedName]int64{},
	}
}

// Writes counts the status updates the writer has made.
func (w *Writer) Writes() int64 { return w.writes.Load() }

// Desired is the status one translation computed (the maps of a translator.Result). Route
// statuses hold only this controller's parent entries.
type Desired struct {
	GatewayClasses map[types.NamespacedName]*gwapiv1.GatewayClassStatus
	Gateways       map[types.NamespacedName]*gwapiv1.GatewayStatus
	HTTPRoutes     map[types.NamespacedName]*gwapiv1.HTTPRouteStatus
}

// Desire records the status a translation computed and queues every object whose desired status
// changed, and every route that left the result (its entries of ours are removed). The first call
// also queues the routes whose live status holds entries of ours that the result does not have.
// The writer keeps res; the caller must not modify it afterwards.
func (w *Writer) Desire(res Desired) {
	w.mu.Lock()
	defer w.mu.Unlock()
	diff(GatewayClassKind, w.classes, res.GatewayClasses, w.queue.Add)
	diff(GatewayKind, w.gateways, res.Gateways, w.queue.Add)
	diff(HTTPRouteKind, w.routes, res.HTTPRoutes, w.queue.Add)
	w.classes, w.gateways, w.routes = res.GatewayClasses, res.Gateways, res.HTTPRoutes
	for nn := range w.applied {
		if _, ok := w.gateways[nn]; !ok {
			delete(w.applied, nn) // a Gateway that is gone, or no longer ours
		}
	}
	if !w.desired {
		w.desired = true
		w.queueStaleRoutes()
	}
}

func diff[S any](kind Kind, old, cur map[types.NamespacedName]*S, add func(Key)) {
	for nn, s := range cur {
		if o, ok := old[nn]; !ok || !Equal(o, s) {
			add(Key{kind, nn})
		}
	}
	for nn := range old {
		if _, ok := cur[nn]; !ok {
			add(Key{kind, nn})
		}
	}
}

// queueStaleRoutes queues routes carrying our entries that no translation of this term produced:
// left behind by an earlier leader, or by a route that stopped naming our Gateways meanwhile.
func (w *Writer) queueStaleRoutes() {
	routes, err := w.opts.HTTPRoutes.List(labels.Everything())
	if err != nil {
		w.opts.Log.Warn("listing HTTPRoutes for stale status", zap.Error(err))
		return
	}
	for _, r := range routes {
		nn := types.NamespacedName{Namespace: r.Namespace, Name: r.Name}
		if _, ok := w.routes[nn]; !ok && hasParentsOf(r.Status.Parents, w.opts.ControllerName) {
			w.queue.Add(Key{HTTPRouteKind, nn})
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
			w.queue.Add(Key{GatewayKind, nn})
		}
	}
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
		w.opts.Log.Warn("writing status", zap.Stringer("kind", key.Kind), zap.String("object", key.String()), zap.Error(err))
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
	case HTTPRouteKind:
		return w.syncRoute(ctx, key.NamespacedName)
	}
	return fmt.Errorf("unknown kind %v", key.Kind)
}
