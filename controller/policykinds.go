package controller

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/status"
	"github.com/coxswain-labs/coxswain/controller/translator"
	policyv1a1 "github.com/coxswain-labs/coxswain/modules/api/policy/v1alpha1"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// policyKinds are the typed informers and status access of the policy kinds the core translates
// (Store.BackendPolicies, Store.ClientTrafficPolicies, Store.BackendTLSPolicies). Like a module kind each starts once its
// CRD is served, at start-up or later: a cluster without the CRD runs without that policy.
func policyKinds(cfg *rest.Config, ev events) ([]*moduleKind, error) {
	backend, err := policyWatch(cfg, ev, policyv1a1.SchemeGroupVersion, policyv1a1.AddToScheme, policyv1a1.BackendPolicyResource, policyv1a1.BackendPolicyKind,
		func(s *translator.Store, p *policyv1a1.CoxswainBackendPolicy) {
			s.BackendPolicies = append(s.BackendPolicies, p)
		},
		func(p *policyv1a1.CoxswainBackendPolicy) *gwapiv1.PolicyStatus { return &p.Status })
	if err != nil {
		return nil, fmt.Errorf("%s: %w", policyv1a1.BackendPolicyKind, err)
	}
	client, err := policyWatch(cfg, ev, policyv1a1.SchemeGroupVersion, policyv1a1.AddToScheme, policyv1a1.ClientTrafficPolicyResource, policyv1a1.ClientTrafficPolicyKind,
		func(s *translator.Store, p *policyv1a1.ClientTrafficPolicy) {
			s.ClientTrafficPolicies = append(s.ClientTrafficPolicies, p)
		},
		func(p *policyv1a1.ClientTrafficPolicy) *gwapiv1.PolicyStatus { return &p.Status })
	if err != nil {
		return nil, fmt.Errorf("%s: %w", policyv1a1.ClientTrafficPolicyKind, err)
	}
	backendTLS, err := policyWatch(cfg, ev, schema.GroupVersion(gwapiv1.GroupVersion), gwapiv1.Install, "backendtlspolicies", translator.BackendTLSPolicyKind,
		func(s *translator.Store, p *gwapiv1.BackendTLSPolicy) {
			s.BackendTLSPolicies = append(s.BackendTLSPolicies, p)
		},
		func(p *gwapiv1.BackendTLSPolicy) *gwapiv1.PolicyStatus { return &p.Status })
	if err != nil {
		return nil, fmt.Errorf("%s: %w", translator.BackendTLSPolicyKind, err)
	}
	return []*moduleKind{backend, client, backendTLS}, nil
}

// policyWatch is the typed informer and status access of one policy kind of group version gv.
func policyWatch[T any, PT interface {
	*T
	translation.Object
}](cfg *rest.Config, ev events, gv schema.GroupVersion, addToScheme func(*runtime.Scheme) error, resource, kind string, add func(*translator.Store, PT), statusOf func(PT) *gwapiv1.PolicyStatus) (*moduleKind, error) {
	rc, err := restClientFor(gv, addToScheme, cfg)
	if err != nil {
		return nil, err
	}
	lw := cache.NewListWatchFromClient(rc, resource, "", fields.Everything())
	inf := cache.NewSharedIndexInformer(lw, PT(new(T)), 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := inf.SetTransform(stripUnread); err != nil {
		return nil, err
	}
	mk := &moduleKind{gk: gv.WithKind(kind).GroupKind(), gvr: gv.WithResource(resource), informer: inf, started: make(chan struct{})}
	mk.add = func(s *translator.Store, o translation.Object) error {
		p, ok := o.(PT)
		if !ok {
			return fmt.Errorf("%s cache holds a %T", kind, o)
		}
		add(s, p)
		return nil
	}
	mk.policy = policyStatusClient(mk, rc, resource, statusOf)
	// A spec change translates again (generationChanged); every change, our own status writes
	// among them, has the writer look again.
	if _, err := inf.AddEventHandler(ownedHandler(status.Kind(kind), ev)); err != nil {
		return nil, err
	}
	return mk, nil
}

// policyStatusClient gives the status writer its access to a typed policy kind: reads from the
// informer cache, a fresh read and the /status update through the REST client.
func policyStatusClient[T any, PT interface {
	*T
	translation.Object
}](mk *moduleKind, rc rest.Interface, resource string, statusOf func(PT) *gwapiv1.PolicyStatus) status.Policies {
	typed := func(o any) (PT, error) {
		p, ok := o.(PT)
		if !ok {
			return nil, fmt.Errorf("%s cache holds a %T", mk.gk.Kind, o)
		}
		return p, nil
	}
	return status.PolicyClient[PT]{
		KindName: mk.gk.Kind,
		Cached: func(namespace, name string) (PT, error) {
			o, ok, err := mk.informer.GetIndexer().GetByKey(namespace + "/" + name)
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, apierrors.NewNotFound(mk.gvr.GroupResource(), name)
			}
			return typed(o)
		},
		List: func() ([]PT, error) {
			objs := mk.informer.GetIndexer().List()
			out := make([]PT, 0, len(objs))
			for _, o := range objs {
				p, err := typed(o)
				if err != nil {
					return nil, err
				}
				out = append(out, p)
			}
			return out, nil
		},
		Get: func(ctx context.Context, namespace, name string) (PT, error) {
			p := PT(new(T))
			err := rc.Get().Namespace(namespace).Resource(resource).Name(name).Do(ctx).Into(p)
			return p, err
		},
		UpdateStatus: func(ctx context.Context, p PT) error {
			return rc.Put().Namespace(p.GetNamespace()).Resource(resource).Name(p.GetName()).SubResource("status").Body(p).Do(ctx).Error()
		},
		Status: func(p PT) (types.NamespacedName, gwapiv1.PolicyStatus) {
			return types.NamespacedName{Namespace: p.GetNamespace(), Name: p.GetName()}, *statusOf(p)
		},
		WithStatus: func(p PT, st gwapiv1.PolicyStatus) PT {
			c := PT(new(T))
			*c = *p // a shallow copy: the cached object is never modified
			*statusOf(c) = st
			return c
		},
	}
}
