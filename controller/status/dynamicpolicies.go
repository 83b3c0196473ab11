package status

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// DynamicPolicyClient is the PolicyClient of a policy kind only a module knows (an ExtensionRef
// kind whose objects target Gateways): unstructured objects from a dynamic informer's cache,
// written through the dynamic client. Only .status.ancestors is read and replaced; the rest of
// the object's status, if its kind has more, is kept as it is.
func DynamicPolicyClient(kind string, gr schema.GroupResource, cached cache.Indexer, res dynamic.NamespaceableResourceInterface) PolicyClient[*unstructured.Unstructured] {
	typed := func(o any) (*unstructured.Unstructured, error) {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			return nil, fmt.Errorf("%s cache holds a %T", kind, o)
		}
		return u, nil
	}
	return PolicyClient[*unstructured.Unstructured]{
		KindName: kind,
		Cached: func(namespace, name string) (*unstructured.Unstructured, error) {
			o, ok, err := cached.GetByKey(namespace + "/" + name)
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, apierrors.NewNotFound(gr, name)
			}
			return typed(o)
		},
		List: func() ([]*unstructured.Unstructured, error) {
			objs := cached.List()
			out := make([]*unstructured.Unstructured, 0, len(objs))
			for _, o := range objs {
				u, err := typed(o)
				if err != nil {
					return nil, err
				}
				out = append(out, u)
			}
			return out, nil
		},
		Get: func(ctx context.Context, namespace, name string) (*unstructured.Unstructured, error) {
			return res.Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
		},
		UpdateStatus: func(ctx context.Context, u *unstructured.Unstructured) error {
			_, err := res.Namespace(u.GetNamespace()).UpdateStatus(ctx, u, metav1.UpdateOptions{})
			return err
		},
		Status: func(u *unstructured.Unstructured) (types.NamespacedName, gwapiv1.PolicyStatus) {
			return types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}, unstructuredPolicyStatus(u)
		},
		WithStatus: func(u *unstructured.Unstructured, st gwapiv1.PolicyStatus) *unstructured.Unstructured {
			c := u.DeepCopy() // the cached object is never modified
			ancestors, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
			if err != nil {
				return c // cannot happen for a PolicyStatus; the update then changes nothing
			}
			_ = unstructured.SetNestedField(c.Object, ancestors["ancestors"], "status", "ancestors")
			return c
		},
	}
}

// unstructuredPolicyStatus reads .status.ancestors; a missing or malformed one reads as none.
func unstructuredPolicyStatus(u *unstructured.Unstructured) gwapiv1.PolicyStatus {
	var st gwapiv1.PolicyStatus
	raw, ok, err := unstructured.NestedFieldNoCopy(u.Object, "status")
	if m, isMap := raw.(map[string]any); ok && err == nil && isMap {
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(m, &st)
	}
	return st
}
