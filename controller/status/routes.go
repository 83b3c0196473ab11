package status

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Routes gives the writer access to the status of one route kind. Every route kind keeps its
// status as a gwapiv1.RouteStatus, so one generic implementation serves them all; the controller
// makes one per kind it watches (see RouteClient).
type Routes interface {
	// Kind is the route's Kubernetes kind, as in translator.RouteKey.Kind.
	Kind() string
	sync(ctx context.Context, nn types.NamespacedName, desired *gwapiv1.RouteStatus, controller gwapiv1.GatewayController) (bool, error)
	stale(controller gwapiv1.GatewayController) ([]types.NamespacedName, error)
}

// RouteClient implements Routes for route type T (*gwapiv1.HTTPRoute, *gwapiv1.TCPRoute, ...)
// with functions over its typed lister and client.
type RouteClient[T any] struct {
	KindName string
	// Cached and List read the informer cache; Get reads the API server (after a conflict).
	Cached func(namespace, name string) (T, error)
	List   func() ([]T, error)
	Get    func(ctx context.Context, namespace, name string) (T, error)
	// UpdateStatus writes the /status subresource.
	UpdateStatus func(ctx context.Context, route T) error
	// Status returns the route's status and its namespaced name.
	Status func(route T) (types.NamespacedName, gwapiv1.RouteStatus)
	// WithStatus returns a shallow copy of route with st as its status; route is not modified.
	WithStatus func(route T, st gwapiv1.RouteStatus) T
}

var _ Routes = RouteClient[*gwapiv1.HTTPRoute]{}

// Kind implements Routes.
func (rc RouteClient[T]) Kind() string { return rc.KindName }

func (rc RouteClient[T]) sync(ctx context.Context, nn types.NamespacedName, desired *gwapiv1.RouteStatus, controller gwapiv1.GatewayController) (bool, error) {
	cached, err := rc.Cached(nn.Namespace, nn.Name)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var ours []gwapiv1.RouteParentStatus
	if desired != nil {
		ours = desired.Parents
	} else if _, st := rc.Status(cached); !hasParentsOf(st.Parents, controller) {
		return false, nil // not ours and never was
	}
	return update(ctx, cached,
		func(ctx context.Context) (T, error) { return rc.Get(ctx, nn.Namespace, nn.Name) },
		func(live T) (T, bool) {
			_, st := rc.Status(live)
			parents := routeParents(st.Parents, ours, controller)
			if Equal(st.Parents, parents) {
				var zero T
				return zero, false
			}
			return rc.WithStatus(live, gwapiv1.RouteStatus{Parents: parents}), true
		},
		rc.UpdateStatus)
}

func (rc RouteClient[T]) stale(controller gwapiv1.GatewayController) ([]types.NamespacedName, error) {
	routes, err := rc.List()
	if err != nil {
		return nil, err
	}
	var out []types.NamespacedName
	for _, r := range routes {
		if nn, st := rc.Status(r); hasParentsOf(st.Parents, controller) {
			out = append(out, nn)
		}
	}
	return out, nil
}
