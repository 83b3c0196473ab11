package status

import (
	"context"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// APICounters count the status updates of every writer of the process, by result, for
// coxswain_controller_status_writes_total and coxswain_controller_status_conflicts_total. They are
// process-wide rather than per Writer because a Writer lives one leadership term, and a counter
// that restarts at each term would read as resets.
var APICounters struct {
	Writes, Conflicts, Failures atomic.Int64
}

// update writes the status next computes for an object: first from the cached copy, and after a
// conflict from a fresh read of the API server. next returns false when the status is already
// what it should be. A missing object is not an error: its deletion is on its way to the cache.
func update[T any](ctx context.Context, cached T, get func(context.Context) (T, error), next func(T) (T, bool), put func(context.Context, T) error) (bool, error) {
	obj, fresh, wrote := cached, false, false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if fresh {
			var err error
			if obj, err = get(ctx); err != nil {
				return err
			}
		}
		fresh = true
		upd, changed := next(obj)
		if !changed {
			return nil
		}
		if err := put(ctx, upd); err != nil {
			switch {
			case apierrors.IsConflict(err):
				APICounters.Conflicts.Add(1)
			case !apierrors.IsNotFound(err):
				APICounters.Failures.Add(1)
			}
			return err
		}
		APICounters.Writes.Add(1)
		wrote = true
		return nil
	})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return wrote, err
}

func (w *Writer) count(wrote bool, err error) error {
	if wrote {
		w.writes.Add(1)
	}
	return err
}

func (w *Writer) syncClass(ctx context.Context, name string) error {
	w.mu.Lock()
	desired := w.classes[types.NamespacedName{Name: name}]
	w.mu.Unlock()
	if desired == nil {
		return nil // not ours: leave it alone
	}
	cached, err := w.opts.GatewayClasses.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	client := w.opts.Client.GatewayV1().GatewayClasses()
	return w.count(update(ctx, cached,
		func(ctx context.Context) (*gwapiv1.GatewayClass, error) {
			return client.Get(ctx, name, metav1.GetOptions{})
		},
		func(live *gwapiv1.GatewayClass) (*gwapiv1.GatewayClass, bool) {
			st := classStatus(live.Status, desired)
			if Equal(live.Status, st) {
				return nil, false
			}
			out := *live // a shallow copy: the cached object is never modified
			out.Status = st
			return &out, true
		},
		func(ctx context.Context, gc *gwapiv1.GatewayClass) error {
			_, err := client.UpdateStatus(ctx, gc, metav1.UpdateOptions{})
			return err
		}))
}

func (w *Writer) syncGateway(ctx context.Context, nn types.NamespacedName) error {
	w.mu.Lock()
	desired, applied, awaiting, unbound := w.gateways[nn], w.applied[nn], w.awaiting[nn], w.unbound[nn]
	w.mu.Unlock()
	if desired == nil {
		return nil
	}
	cached, err := w.opts.Gateways.Gateways(nn.Namespace).Get(nn.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	client := w.opts.Client.GatewayV1().Gateways(nn.Namespace)
	g := gate{Generation: generationOf(desired.Conditions), Applied: applied, Addresses: w.opts.Addresses, Unbound: unbound, Now: w.opts.Now()}
	if awaiting.generation == g.Generation {
		g.Awaiting = awaiting.what
	}
	return w.count(update(ctx, cached,
		func(ctx context.Context) (*gwapiv1.Gateway, error) {
			return client.Get(ctx, nn.Name, metav1.GetOptions{})
		},
		func(live *gwapiv1.Gateway) (*gwapiv1.Gateway, bool) {
			st := gatewayStatus(live.Status, desired, g)
			if Equal(live.Status, st) {
				return nil, false
			}
			out := *live
			out.Status = st
			return &out, true
		},
		func(ctx context.Context, gw *gwapiv1.Gateway) error {
			_, err := client.UpdateStatus(ctx, gw, metav1.UpdateOptions{})
			return err
		}))
}

// generationOf is the generation a translated status describes: the newest observedGeneration of
// its conditions.
func generationOf(conds []metav1.Condition) int64 {
	var g int64
	for _, c := range conds {
		g = max(g, c.ObservedGeneration)
	}
	return g
}
