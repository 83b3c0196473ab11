package status

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Policies gives the writer access to the status of one policy kind. Every policy kind keeps its
// status as a gwapiv1.PolicyStatus (GEP-713), so one generic implementation serves them all; the
// controller makes one per kind it watches (see PolicyClient).
type Policies interface {
	// Kind is the policy's Kubernetes kind, as in translator.PolicyKey.Kind.
	Kind() string
	sync(ctx context.Context, nn types.NamespacedName, desired *gwapiv1.PolicyStatus, controller gwapiv1.GatewayController) (bool, error)
	stale(controller gwapiv1.GatewayController) ([]types.NamespacedName, error)
}

// PolicyClient implements Policies for policy type T with functions over its informer cache
// and REST client, as RouteClient does for routes.
type PolicyClient[T any] struct {
	KindName string
	// Cached and List read the informer cache; Get reads the API server (after a conflict).
	Cached func(namespace, name string) (T, error)
	List   func() ([]T, error)
	Get    func(ctx context.Context, namespace, name string) (T, error)
	// UpdateStatus writes the /status subresource.
	UpdateStatus func(ctx context.Context, policy T) error
	// Status returns the policy's status and its namespaced name.
	Status func(policy T) (types.NamespacedName, gwapiv1.PolicyStatus)
	// WithStatus returns a copy of policy with st as its status; policy is not modified.
	WithStatus func(policy T, st gwapiv1.PolicyStatus) T
}

// Kind implements Policies.
func (pc PolicyClient[T]) Kind() string { return pc.KindName }

func (pc PolicyClient[T]) sync(ctx context.Context, nn types.NamespacedName, desired *gwapiv1.PolicyStatus, controller gwapiv1.GatewayController) (bool, error) {
	cached, err := pc.Cached(nn.Namespace, nn.Name)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var ours []gwapiv1.PolicyAncestorStatus
	if desired != nil {
		ours = desired.Ancestors
	} else if _, st := pc.Status(cached); !hasAncestorsOf(st.Ancestors, controller) {
		return false, nil // not ours and never was
	}
	return update(ctx, cached,
		func(ctx context.Context) (T, error) { return pc.Get(ctx, nn.Namespace, nn.Name) },
		func(live T) (T, bool) {
			_, st := pc.Status(live)
			ancestors := policyAncestors(st.Ancestors, ours, controller)
			if Equal(st.Ancestors, ancestors) {
				var zero T
				return zero, false
			}
			return pc.WithStatus(live, gwapiv1.PolicyStatus{Ancestors: ancestors}), true
		},
		pc.UpdateStatus)
}

func (pc PolicyClient[T]) stale(controller gwapiv1.GatewayController) ([]types.NamespacedName, error) {
	policies, err := pc.List()
	if err != nil {
		return nil, err
	}
	var out []types.NamespacedName
	for _, p := range policies {
		if nn, st := pc.Status(p); hasAncestorsOf(st.Ancestors, controller) {
			out = append(out, nn)
		}
	}
	return out, nil
}

// policyAncestors merges this controller's ancestor statuses into live as routeParents merges
// route parents. GEP-713 keys an entry by (ancestorRef, controllerName).
func policyAncestors(live, desired []gwapiv1.PolicyAncestorStatus, controller gwapiv1.GatewayController) []gwapiv1.PolicyAncestorStatus {
	return mergeOwned(live, desired, controller, ancestorFields)
}

var ancestorFields = ownedFields[gwapiv1.PolicyAncestorStatus]{
	controller: func(a *gwapiv1.PolicyAncestorStatus) *gwapiv1.GatewayController { return &a.ControllerName },
	ref:        func(a *gwapiv1.PolicyAncestorStatus) any { return a.AncestorRef },
	conditions: func(a *gwapiv1.PolicyAncestorStatus) *[]metav1.Condition { return &a.Conditions },
}

// hasAncestorsOf reports whether controller wrote any entry of ancestors.
func hasAncestorsOf(ancestors []gwapiv1.PolicyAncestorStatus, controller gwapiv1.GatewayController) bool {
	return hasOwned(ancestors, controller, ancestorFields)
}
