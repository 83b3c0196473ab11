package controller

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/status"
	"github.com/coxswain-labs/coxswain/controller/translator"
	policyv1a1 "github.com/coxswain-labs/coxswain/modules/api/policy/v1alpha1"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// backendPolicyWatch is the typed informer and status access of CoxswainBackendPolicy, a kind
// the core translates (Store.BackendPolicies). Like a module kind it starts once its CRD is
// served, at start-up or later: a cluster without the CRD runs without policies.
func backendPolicyWatch(cfg *rest.Config, ev events) (*moduleKind, error) {
	gv := policyv1a1.SchemeGroupVersion
	rc, err := restClientFor(gv, policyv1a1.AddToScheme, cfg)
	if err != nil {
		return nil, err
	}
	const resource, kind = policyv1a1.BackendPolicyResource, policyv1a1.BackendPolicyKind
	lw := cache.NewListWatchFromClient(rc, resource, "", fields.Everything())
	inf := cache.NewSharedIndexInformer(lw, &policyv1a1.CoxswainBackendPolicy{}, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := inf.SetTransform(stripManagedFields); err != nil {
		return nil, err
	}
	mk := &moduleKind{gk: gv.WithKind(kind).GroupKind(), gvr: gv.WithResource(resource), informer: inf, started: make(chan struct{})}
	mk.add = func(s *translator.Store, o translation.Object) error {
		p, ok := o.(*policyv1a1.CoxswainBackendPolicy)
		if !ok {
			return fmt.Errorf("%s cache holds a %T", kind, o)
		}
		s.BackendPolicies = append(s.BackendPolicies, p)
		return nil
	}
	mk.policy = backendPolicyStatusClient(mk, rc)
	// A spec change translates again (generationChanged); every change, our own status writes
	// among them, has the writer look again.
	if _, err := inf.AddEventHandler(ownedHandler(status.Kind(kind), ev)); err != nil {
		return nil, err
	}
	return mk, nil
}

// backendPolicyStatusClient gives the status writer its access to CoxswainBackendPolicy: reads
// from the informer cache, a fresh read and the /status update through the REST client.
func backendPolicyStatusClient(mk *moduleKind, rc rest.Interface) status.Policies {
	type policy = *policyv1a1.CoxswainBackendPolicy
	resource := policyv1a1.BackendPolicyResource
	typed := func(o any) (policy, error) {
		p, ok := o.(policy)
		if !ok {
			return nil, fmt.Errorf("%s cache holds a %T", mk.gk.Kind, o)
		}
		return p, nil
	}
	return status.PolicyClient[policy]{
		KindName: mk.gk.Kind,
		Cached: func(namespace, name string) (policy, error) {
			o, ok, err := mk.informer.GetIndexer().GetByKey(namespace + "/" + name)
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, apierrors.NewNotFound(mk.gvr.GroupResource(), name)
			}
			return typed(o)
		},
		List: func() ([]policy, error) {
			objs := mk.informer.GetIndexer().List()
			out := make([]policy, 0, len(objs))
			for _, o := range objs {
				p, err := typed(o)
				if err != nil {
					return nil, err
				}
				out = append(out, p)
			}
			return out, nil
		},
		Get: func(ctx context.Context, namespace, name string) (policy, error) {
			p := &policyv1a1.CoxswainBackendPolicy{}
			err := rc.Get().Namespace(namespace).Resource(resource).Name(name).Do(ctx).Into(p)
			return p, err
		},
		UpdateStatus: func(ctx context.Context, p policy) error {
			return rc.Put().Namespace(p.Namespace).Resource(resource).Name(p.Name).SubResource("status").Body(p).Do(ctx).Error()
		},
		Status: func(p policy) (types.NamespacedName, gwapiv1.PolicyStatus) {
			return types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, p.Status
		},
		WithStatus: func(p policy, st gwapiv1.PolicyStatus) policy {
			c := *p // a shallow copy: the cached object is never modified
			c.Status = st
			return &c
		},
	}
}
